"""`npudoctor ops audit`: will this model run on the NPU? Which operators fall back to the CPU on a torch_npu release.

Exit codes: 0 audited (and nothing falls back under ``--fail-on fallback``); 1 an operator falls back under
``--fail-on fallback``; 2 usage error, unreadable operator list, or the audit could not run (the program failed on
its own: raised, or exited non-zero); 130 after Ctrl-C (what ran until then is judged); 143 after SIGTERM.
"""

from __future__ import annotations

import time
from typing import Optional, Tuple

import click

from npudoctor.cli.common import EXIT_INTERRUPTED, PATH, FailOn, fail_usage


@click.group()
def ops() -> None:
    """Which operators of a model run on the NPU, and which fall back to the CPU (no NPU needed)."""


@ops.command("audit", context_settings={"ignore_unknown_options": True})
@click.option("--torch-npu", "torch_npu", type=PATH, metavar="PATH|VERSION",
              help="The torch_npu release to judge against: a wheel, a folder holding torch_npu/, or a release "
                   "(shipped list). Default: the torch_npu installed beside --python, else the newest shipped.")
@click.option("--model", type=click.Choice(["tiny", "vit-b-32"]), default=None,
              help="Audit the reference CLIP training step (train-step's model) instead of a script.")
@click.option("--steps", type=click.IntRange(1, 100), default=1, show_default=True,
              help="--model: training steps audited.")
@click.option("--python", metavar="PY", help="Interpreter that runs the script (default: this one).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1, None), default=600.0, show_default=True,
              metavar="S", help="Stop the script after S seconds and judge what it ran until then.")
@click.option("--root", metavar="DIR", help="Find the installed torch_npu under DIR (a mounted image).")
@click.option("--from", "bundle", metavar="BUNDLE", help="Find the installed torch_npu in a collected bundle.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--fail-on", type=FailOn(["fallback"]), default=None,
              help="Exit 1 when an operator falls back to the CPU (fallback; for CI). fail and warn are "
                   "every command's words; an audit lists operators, none of them a FAIL or WARN.")
@click.option("-v", "--verbose", is_flag=True, help="List every operator, with the reason of its verdict.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- SCRIPT [ARGS...]")
def audit(torch_npu: Optional[str], model: Optional[str], steps: int, python: Optional[str], timeout_s: float,
          root: Optional[str], bundle: Optional[str], fmt: str, fail_on: Optional[str], verbose: bool,
          command: Tuple[str, ...]) -> None:
    """Run SCRIPT on the CPU under the audit (like `python -m cProfile`), record every operator it dispatches
    (forward and backward) and judge each against a torch_npu release's operator list: native, fallback (runs on
    the CPU), decomposed (torch's composite kernel; its parts are judged) or unknown."""
    from npudoctor import __version__, api
    from npudoctor.ops import engine

    if bool(command) == bool(model):
        raise fail_usage("give either -- SCRIPT [ARGS...] or --model tiny|vit-b-32")
    started = time.time()
    # OpsError and api.UsageError are InputErrors: the command group prints them in one line, exit 2.
    runner = None
    facts = None
    if not torch_npu:
        runner = api.make_runner(root=root, bundle=bundle)
        facts = api.python_facts(runner, python)
    op_list = engine.choose_list(torch_npu, runner, facts)
    if model:
        result = engine.audit_reference(model, steps, op_list, python=python, timeout_s=timeout_s,
                                        stdout_to_stderr=True)
        what = f"the reference {model} CLIP training step ({steps} step{'s' if steps != 1 else ''})"
    else:
        result = engine.audit_script(command[0], command[1:], op_list, python=python, timeout_s=timeout_s,
                                     stdout_to_stderr=fmt == "json")
        what = command[0]
    if result.run.get("ended") == "no-recording":
        raise fail_usage(engine.run_line(result.run))
    if engine.failed(result.run):  # what a failing program ran is no audit of it: its error, no verdict
        raise fail_usage(f"{engine.run_line(result.run)}; the program failed, so the audit is incomplete "
                         "(no verdict)")
    if fmt == "json":
        from npudoctor.report import json_report

        json_report.emit(result.to_dict())
    else:
        from npudoctor.report import ops_console
        from npudoctor.report.console import make_console

        ops_console.render(result, make_console(), verbose=verbose, version=__version__, what=what,
                           started=started, run_line=engine.run_line(result.run))
    raise click.exceptions.Exit(EXIT_INTERRUPTED if result.run.get("interrupted") else result.exit_code(fail_on))
