"""Thin command line: arguments -> api call -> renderer -> exit code. No decisions here.

The exit codes scripts rely on are in :mod:`npudoctor.cli.common`.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple, TypeVar

import click

from npudoctor import __version__
from npudoctor.cli.common import (
    EXIT_OK,
    FAIL_ON_HELP,
    PATH,
    FailOn,
    emit_findings,
    fail_usage,
    quoted_topics,
    split_list,
)
from npudoctor.errors import InputError
from npudoctor.report import terminal

F = TypeVar("F", bound=Callable[..., Any])


def _set_color(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> None:
    if value is not None:
        terminal.set_color_choice(value)


_COLOR_DECLS = ["--color"]
_COLOR_ATTRS: Dict[str, Any] = {
    "type": click.Choice(terminal.COLOR_CHOICES), "default": None, "metavar": "WHEN", "expose_value": False,
    "is_eager": True, "callback": _set_color,
    "help": "Colour: auto (a terminal, unless NO_COLOR is set; FORCE_COLOR forces it), always, never.",
}


def color_option(command: F) -> F:
    """``--color auto|always|never`` on a command (LazyGroup adds it to every subcommand by itself)."""
    return click.option(*_COLOR_DECLS, **_COLOR_ATTRS)(command)


def with_terminal_options(command: click.Command) -> click.Command:
    """Give ``command`` (and, for a group, each subcommand) the shared ``--color`` option once."""
    if not any(param.name == "color" for param in command.params):
        command.params.append(click.Option(_COLOR_DECLS, **_COLOR_ATTRS))
    for sub in getattr(command, "commands", {}).values():
        with_terminal_options(sub)
    return command


def usage_line(exc: click.UsageError) -> str:
    """Click's usage error as the one line every npudoctor error is: the reason, then where help is."""
    where = exc.ctx.command_path if exc.ctx is not None else "npudoctor"
    return f"{exc.format_message().rstrip('.')} (see {where} --help)"


class LazyGroup(click.Group):
    """Subcommands in their own modules, imported only when used (keeps `npudoctor --help` fast).

    Every subcommand gets the terminal manners of the house style: ``--color``, characters the output
    encoding cannot show replaced rather than a traceback, and a closed stdout (``| head -1``) ending the
    command quietly with exit code 0.
    """

    lazy: ClassVar[Dict[str, str]] = {
        "dashboard": "npudoctor.cli.dashboard:dashboard",
        "libs": "npudoctor.cli.libs:libs",
        "logs": "npudoctor.cli.logs:logs",
        "parse": "npudoctor.cli.parse:parse",
        "train-step": "npudoctor.cli.train:train_step",
        "leak": "npudoctor.cli.train:leak",
        "prof": "npudoctor.cli.prof:prof",
        "fleet": "npudoctor.cli.fleet:fleet",
        "profile": "npudoctor.cli.fleet:profile",
        "collective": "npudoctor.cli.fleet:collective",
        "onboard": "npudoctor.cli.fleet:onboard",
        "ops": "npudoctor.cli.ops:ops",
    }

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            command = getattr(importlib.import_module(module), attr)
        else:
            command = super().get_command(ctx, name)
        return with_terminal_options(command) if command is not None else None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        terminal.set_color_choice(None)  # each run starts from auto (tests run many in one process)
        terminal.tolerate_encodings()
        try:
            return super().main(*args, **kwargs)
        except BrokenPipeError:  # outside click's own handler (standalone_mode=False, the final flush)
            terminal.quiet_broken_pipe()
            sys.exit(EXIT_OK)

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:  # `npudoctor --bogus`: the one-line error, as every other
            raise fail_usage(usage_line(exc)) from None

    def resolve_command(self, ctx: click.Context, args: List[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:  # `npudoctor chek`
            raise fail_usage(usage_line(exc)) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a subcommand's bad option or value: one line, not click's three
            raise fail_usage(usage_line(exc)) from None
        except InputError as exc:  # every command's user errors, printed the one way
            raise fail_usage(str(exc)) from None
        except ImportError as exc:
            # A module of an extra (or of the base install) is missing: one line with the install hint that
            # matches how npudoctor was installed, never a traceback. Any other import error is a bug.
            from npudoctor import install

            hint = install.missing_module_hint(exc.name or "")
            if hint is None:
                raise
            command = f"npudoctor {ctx.invoked_subcommand}" if ctx.invoked_subcommand else "npudoctor"
            raise fail_usage(f"{command} needs {exc.name}, which is not installed for {sys.executable}: "
                             f"{hint}") from None
        except KeyboardInterrupt as exc:
            # One rule for every command: Ctrl-C exits 130 (128 + SIGINT, as a shell reports it), SIGTERM and
            # SIGHUP where a command turned them into an interruption (probes.proctree.stop_on_sigterm) 128 + it.
            # A command that reports what ran until then raises Exit(EXIT_INTERRUPTED) itself.
            signum = getattr(exc, "signum", 2)
            click.echo(f"npudoctor: {'interrupted' if signum == 2 else f'stopped by signal {signum}'}", err=True)
            raise click.exceptions.Exit(128 + signum) from None
        except BrokenPipeError:
            # The reader went away (`npudoctor list-checks | head -1`): what it wanted, it has. Click would
            # exit 1 here; a pipeline under `set -o pipefail` must not fail because head stopped reading.
            terminal.quiet_broken_pipe()
            raise click.exceptions.Exit(EXIT_OK) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="npudoctor")
@color_option
def main() -> None:
    """Find, explain and fix what breaks training on Huawei Ascend NPU nodes."""


FORMATS = click.Choice(["text", "json", "junit", "github", "prometheus", "npd", "clusterd"])


@main.command()
@click.option("--level", type=click.IntRange(1, 3), default=None,
              help="1 (default; with --from: the bundle's): static checks; 2: also import torch/torch_npu in a "
                   "child process and run one op; 3: also train a tiny CLIP in a child process (TRN001-TRN006).")
@click.option("--profile", "profile_name", type=PATH, metavar="NAME|PATH",
              help="Node profile (expected chips, thresholds).")
@click.option("--from", "bundle", type=PATH, metavar="BUNDLE", help="Replay a bundle made by `npudoctor collect`.")
@click.option("--root", type=PATH, metavar="DIR",
              help="Read system files (sysfs, /dev, /usr/local/Ascend, /etc) under DIR.")
@click.option("--only", multiple=True, metavar="ID", help="Run only these checks (ID, ID prefix or stage).")
@click.option("--skip", "skip_ids", multiple=True, metavar="ID", help="Skip these checks (ID, prefix or stage).")
@click.option("--scope", type=click.Choice(["node", "job"]), default=None,
              help="node: only what is the node's (PCI bus, device files, driver/firmware, npu-smi, chip health, "
                   "RoCE ports), for node agents that drain or taint; job: only what is the job's (Python, "
                   "torch_npu, CANN environment, HCCL variables), for the job itself. Default: both.")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--fail-on", type=FailOn(), default="fail", show_default=True, help=FAIL_ON_HELP)
@click.option("--python", "python", type=PATH, metavar="PATH",
              help="The interpreter training runs with (default: python3 on PATH).")
@click.option("--logs", "logs_dirs", type=PATH, multiple=True, metavar="DIR",
              help="Also scan the newest CANN plogs under DIR (e.g. ~/ascend/log).")
@click.option("--prof", "prof_dirs", type=PATH, multiple=True, metavar="DIR",
              help="Also judge profiler output under DIR (npudoctor prof analyze's PROF checks).")
@click.option("-v", "--verbose", is_flag=True, help="Show evidence and passing details.")
@click.option("--textfile", type=PATH, metavar="PATH",
              help="Also write the Prometheus text (node_exporter textfile collector) to PATH, atomically.")
@click.option("--demo", metavar="SCENARIO", is_flag=False, flag_value="healthy", default=None,
              help="Replay a scenario shipped with npudoctor (healthy, chip-warning, ...; `--demo list`).")
@click.option("--save-report", type=PATH, metavar="PATH",
              help="Also keep this run's JSON report at PATH, atomically (the node's one poller).")
@click.option("--last-report", type=PATH, metavar="PATH",
              help="Run nothing: judge the report the node's poller kept at PATH (--save-report).")
@click.option("--max-age", type=click.IntRange(1, None), default=900, show_default=True, metavar="SECONDS",
              help="With --last-report: older than this, the answer is 'could not tell' (exit 2).")
def check(level: Optional[int], profile_name: Optional[str], bundle: Optional[str], root: Optional[str],
          only: Tuple[str, ...], skip_ids: Tuple[str, ...], scope: Optional[str], fmt: str, fail_on: str,
          python: Optional[str], logs_dirs: Tuple[str, ...], prof_dirs: Tuple[str, ...], verbose: bool,
          textfile: Optional[str], demo: Optional[str], save_report: Optional[str], last_report: Optional[str],
          max_age: int) -> None:
    """Run the ordered node checks and say how to fix what is wrong."""
    from npudoctor import api
    from npudoctor.report.progress import Progress

    only = split_list(only)
    skip_ids = split_list(skip_ids)
    if last_report:
        from npudoctor.cli.fleet import judge_last_report

        given = [name for name, value in (("--from", bundle), ("--root", root), ("--demo", demo),
                                          ("--level", level), ("--python", python), ("--logs", logs_dirs),
                                          ("--prof", prof_dirs), ("--save-report", save_report)) if value]
        if given:
            raise fail_usage(f"--last-report runs nothing: {given[0]} does not apply")
        raise click.exceptions.Exit(judge_last_report(last_report, max_age, only, skip_ids, scope, fmt, fail_on,
                                                      verbose, textfile))
    if prof_dirs:  # the profiling doctor reads with pandas: say so before the first stage is printed
        from npudoctor import install

        install.require("pandas")
    if python and bundle:
        click.echo(f"npudoctor: note: --python {python} is not used with --from: a bundle replays the "
                   "interpreter it recorded", err=True)
        python = None
    if demo not in (None, "list") and (logs_dirs or prof_dirs):
        # a scenario is a recorded node: it holds no folder of this machine's to read (LOG001 said "not-recorded")
        folder_option = "--logs" if logs_dirs else "--prof"
        raise fail_usage(f"--demo replays a shipped scenario; {folder_option} reads this machine's folders: run "
                         f"`npudoctor {'logs scan' if logs_dirs else 'prof analyze'} DIR` for them")
    options = {"python": python, "logs_dirs": logs_dirs, "prof_dirs": prof_dirs}
    if save_report:  # a path that can never be written is said before the run, as for --textfile
        from npudoctor.fleet.lastreport import check_target, named_save_report

        with named_save_report():
            check_target(save_report)
    if demo is not None or textfile:
        from npudoctor.cli.fleet import check_fleet_options

        bundle, profile_name = check_fleet_options(demo, textfile, bundle, root, profile_name, fmt)
    with Progress() as progress:
        runner = api.make_runner(root=root, bundle=bundle)
        api.check_python_option(runner, python)
        profile = api.load_profile(profile_name)
        listener = _listener(fmt, verbose, progress)
        report = api.run_checks(runner, profile, only=only, skip=skip_ids, level=level, options=options,
                                listener=listener, scope=scope)
    if textfile:
        from npudoctor.cli.fleet import write_textfile

        write_textfile(textfile, report, fail_on)
    if save_report:
        from npudoctor.fleet import lastreport

        lastreport.save(save_report, report)
    # A run that could check nothing (every check skipped: an empty --root, --only LOG001 without --logs) is
    # not "no problems": 2, the doctor could not tell.
    code = 2 if report.nothing_checked else report.exit_code(fail_on)
    if fmt == "text":
        listener.finished(report)
    else:
        emit_findings(fmt, report, "npudoctor check", fail_on, code)
    if fmt == "npd":  # node-problem-detector's protocol: 0 OK, 1 problem, 2 could not tell
        from npudoctor.report import npd

        raise click.exceptions.Exit(npd.verdict(report, fail_on)[0])
    raise click.exceptions.Exit(code)


def _listener(fmt: str, verbose: bool, progress: Any) -> Any:
    """Text streams each stage as it ends (the header at once); JSON and JUnit only move the spinner."""
    if fmt == "text":
        from npudoctor.report import console

        return console.CheckConsole(console.make_console(), verbose=verbose, progress=progress)
    from npudoctor.report.progress import ProgressListener

    return ProgressListener(progress)


RULES_OPTION = click.option("--rules", "rules_files", multiple=True, metavar="FILE",
                            help="Also site log rules from FILE (as `logs scan --rules`).")


@main.command("list-checks")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@RULES_OPTION
def list_checks(fmt: str, rules_files: Tuple[str, ...]) -> None:
    """List every ID npudoctor reports (node checks, PROF, COL, log rules) with its stage and what it needs."""
    from npudoctor import api
    from npudoctor.report import explain as explain_report

    specs = api.rulebook(rules_files)
    if fmt == "json":
        from npudoctor.report import json_report

        json_report.emit([{"id": s.id, "room": s.room, "stage": s.stage, "title": s.title, "level": s.level,
                           "needs": explain_report.needs(s), "settings": list(s.settings), "summary": s.summary}
                          for s in specs])
        return
    from npudoctor.report.console import make_console

    for line in explain_report.list_text(specs, make_console().width):
        click.echo(line)


@main.command(context_settings={"ignore_unknown_options": True})  # `explain -8005`: a code, not an option
@click.argument("topics", nargs=-1, required=True, metavar="ID|CODE...")
@click.option("--profile", "profile_name", metavar="NAME|PATH", help="Show the settings in force in this profile.")
@RULES_OPTION
@click.option("--from", "bundle", metavar="BUNDLE", help="Read CANN's own code texts from a bundle's node.")
@click.option("--root", metavar="DIR", help="Read CANN's own code texts from the install under DIR.")
def explain(topics: Tuple[str, ...], profile_name: Optional[str], rules_files: Tuple[str, ...],
            bundle: Optional[str], root: Optional[str]) -> None:
    """Explain checks (PCI001, PROF009, hccl-socket-timeout) and error codes of CANN, HCCL, DCMI, torch_npu
    (EZ9999, 507011, -8005, ERR00100, 0x05000004): why, how to fix, and the settings in force. Where a CANN
    toolkit is installed, its own texts are shown.

    Exit codes: 0 every topic explained; 2 a topic is neither a check ID nor an error code.
    """
    from npudoctor import api
    from npudoctor.report import explain as explain_report
    from npudoctor.report.console import make_console

    profile = api.load_profile(profile_name)
    entries, unknown = api.explain_topics(topics, root, bundle, rules_files)
    explain_report.render(entries, make_console(), profile)
    if unknown:
        raise fail_usage(f"{quoted_topics(unknown)}: neither a check ID nor a known error code; see "
                         "`npudoctor list-checks`")


@main.command()
@click.option("-o", "--output", type=PATH, required=True, metavar="BUNDLE.tar.gz",
              help="Where to write the bundle (never overwritten).")
@click.option("--root", type=PATH, metavar="DIR", help="Read system files under DIR.")
@click.option("--level", type=click.IntRange(1, 3), default=1, show_default=True,
              help="What to record: 1 the static checks' inputs; 2 also the import of torch/torch_npu and one "
                   "op in a child process (needed to replay `check --level 2` from this bundle).")
@click.option("--python", "python", type=PATH, metavar="PATH", help="The interpreter training runs with.")
@click.option("--logs", "logs_dirs", type=PATH, multiple=True, metavar="DIR",
              help="Also record the newest plogs under DIR.")
@click.option("--samples", type=click.IntRange(0, 100000), default=0, show_default=True,
              help="Also record `npu-smi info` N times, for `npudoctor dashboard --replay`.")
@click.option("--interval", "interval_s", type=click.FloatRange(0.1, 3600), default=1.0, show_default=True,
              metavar="S", help="Seconds between --samples.")
def collect(output: str, root: Optional[str], level: int, python: Optional[str], logs_dirs: Tuple[str, ...],
            samples: int, interval_s: float) -> None:
    """Record every raw output the checks use into a bundle (secrets redacted), for `check --from`."""
    from npudoctor import api
    from npudoctor.report.progress import Progress, ProgressListener

    try:
        with Progress() as progress:
            report = api.collect(output, root=root, level=level, options={"python": python, "logs_dirs": logs_dirs},
                                 listener=ProgressListener(progress, verb="recording "),
                                 samples=samples, interval_s=interval_s)
    except OSError as exc:
        raise fail_usage(f"cannot write {output}: {exc.strerror or exc}") from None
    from npudoctor.report import console

    console.print_lines(console.collect_summary(report, output), console.make_console())


def run() -> None:  # pragma: no cover - console entry for `python -m npudoctor`
    sys.exit(main())
