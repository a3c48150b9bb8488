"""`npudoctor dashboard`: the live view of the node and the job (Textual; the `npudoctor[tui]` extra)."""

from __future__ import annotations

import sys
from typing import Optional

import click

from npudoctor.cli.common import fail_usage
from npudoctor.report import terminal


@click.command()
@click.option("--replay", metavar="BUNDLE", help="Play the npu-smi samples of a bundle (`collect --samples N`).")
@click.option("--demo", is_flag=True, help="Play the shipped demo: a busy 8-chip node (assembled from real captures).")
@click.option("--speed", type=click.FloatRange(0.125, 64), default=1.0, show_default=True,
              help="Replay speed (also + and - while playing).")
@click.option("--follow", metavar="FILE.jsonl", help="Follow a training memory log (npudoctor.memlog/1).")
@click.option("--logs", "logs_dir", metavar="DIR", help="Tail the logs under DIR (e.g. ~/ascend/log) for new findings.")
@click.option("--interval", "interval_s", type=click.FloatRange(0.2, 60), default=1.0, show_default=True,
              metavar="S", help="Seconds between polls of npu-smi and redraws.")
@click.option("--profile", "profile_name", metavar="NAME|PATH", help="Node profile for the check (Findings).")
@click.option("--no-check", is_flag=True, help="Do not run `npudoctor check` at start (r runs it).")
def dashboard(replay: Optional[str], demo: bool, speed: float, follow: Optional[str], logs_dir: Optional[str],
              interval_s: float, profile_name: Optional[str], no_check: bool) -> None:
    """Watch the node's chips, a training job's memory and the doctor's findings live (q quits, ? helps)."""
    from npudoctor.live.session import make_config

    try:
        from npudoctor.tui import app as tui_app
    except ImportError as exc:
        raise fail_usage(f"the dashboard needs textual ({exc}); install it: pip install 'npudoctor[tui]'") from None
    config = make_config(replay=replay, demo=demo, follow=follow, logs_dir=logs_dir, interval_s=interval_s,
                         speed=speed, profile=profile_name, run_check=True)
    if not (terminal.is_terminal(sys.stdout) and terminal.is_terminal(sys.stdin)):
        # A full-screen UI written into a pipe or a file is escape codes, and it would wait for keys forever.
        raise fail_usage("the dashboard needs a terminal (stdin and stdout are not one)")
    app = tui_app.DashboardApp(config, check_at_start=not no_check)
    app.run()
    if app.return_code:  # a crash: Textual has printed the error; the exit status must say so too
        raise click.exceptions.Exit(1)
