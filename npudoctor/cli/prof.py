"""`npudoctor prof run|analyze`: profile a command with msprof, or read existing profiles, and say why it is slow.

Exit codes as `check`: 0 nothing failed; 1 a FAIL or ERROR finding (or WARN under ``--fail-on warn``); 2 usage
error, no profiler, or nothing readable. ``prof run`` exits with the profiled command's code when that failed.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional, Tuple

import click

from npudoctor.cli.common import EXIT_INTERRUPTED, EXIT_USAGE, FAIL_ON_HELP, PATH, FailOn, emit_findings, fail_usage
from npudoctor.knowledge import setting

FORMATS = click.Choice(["text", "json", "junit", "github"])


def _common(func: Any) -> Any:
    for option in reversed([
        click.option("--format", "fmt", type=FORMATS, default="text", show_default=True),
        click.option("--fail-on", type=FailOn(), default="fail", show_default=True, help=FAIL_ON_HELP),
        click.option("--steps", type=click.IntRange(0, None), default=0, metavar="N",
                     help="Analyse only the last N steps (tables with a Step Id / Step column); 0: all."),
        click.option("--profile", "profile_name", type=PATH, metavar="NAME|PATH",
                     help="Node profile (prof: thresholds)."),
        click.option("--logs", "logs_dirs", type=PATH, multiple=True, metavar="DIR",
                     help="Also read CANN/torch_npu logs under DIR and merge their CPU-fallback findings."),
        click.option("-v", "--verbose", is_flag=True, help="Show evidence and every note."),
    ]):
        func = option(func)
    return func


@click.group()
def prof() -> None:
    """Profile a training command with msprof, or analyse existing profiler output."""


def _analyze_and_emit(paths: Tuple[str, ...], profile_name: Optional[str], steps: int,
                      logs_dirs: Tuple[str, ...], fmt: str, fail_on: str, verbose: bool, command: str) -> int:
    from npudoctor import api
    from npudoctor.prof.engine import analyze
    from npudoctor.report.progress import Progress

    try:
        with Progress() as progress:  # what is being read, on stderr on a terminal only
            profile = api.load_profile(profile_name)
            result = analyze(list(paths), profile, steps=steps, logs_dirs=logs_dirs, progress=progress.update)
    except KeyboardInterrupt:
        click.echo("npudoctor: interrupted while reading the profile", err=True)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    if result.unreadable:  # some inputs gave nothing: said, and the exit is at least 1 (npudoctor.model.inputs)
        from npudoctor.model.inputs import warning_line
        from npudoctor.untrusted import clean, one_line

        click.echo(one_line(clean(warning_line(result.unreadable))), err=True)
    if fmt != "text":
        scope = None
        if fmt == "github":  # the only writer with a verdict sentence (the console module brings rich)
            from npudoctor.report.prof_console import verdict_scope

            scope = verdict_scope(result)
        emit_findings(fmt, result.as_report(), "npudoctor prof", fail_on, result.exit_code(fail_on),
                      result.to_dict() if fmt == "json" else None, scope)
    else:
        from npudoctor.report import console, prof_console

        prof_console.render(result, console.make_console(), verbose=verbose, command=command,
                            profile=profile.name)
    return result.exit_code(fail_on)


@prof.command("analyze")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", type=PATH)
@_common
def analyze_command(paths: Tuple[str, ...], fmt: str, fail_on: str, steps: int, profile_name: Optional[str],
                    logs_dirs: Tuple[str, ...], verbose: bool) -> None:
    """Analyse *_ascend_pt folders, PROF_* folders or kernel_details/op_summary CSVs (several ranks at once)."""
    raise click.exceptions.Exit(_analyze_and_emit(paths, profile_name, steps, logs_dirs, fmt, fail_on, verbose,
                                                 "analyze"))


@prof.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", type=PATH, metavar="DIR", help="Where msprof writes (default ./npudoctor_prof_<time>).")
@click.option("--aic-metrics", metavar="SET",
              help="PMU set: PipeUtilization (default), ArithmeticUtilization, Memory, MemoryL0, MemoryUB, "
                   "ResourceConflictRatio, L2Cache, ...")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1, None), default=None, metavar="S",
              help="Stop the command after S seconds (default: the profile's prof.run_timeout_s).")
@_common
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
def run_command(output: Optional[str], aic_metrics: Optional[str], timeout_s: Optional[float],
                command: Tuple[str, ...], fmt: str, fail_on: str, steps: int, profile_name: Optional[str],
                logs_dirs: Tuple[str, ...], verbose: bool) -> None:
    """Run CMD under msprof, wait for the export, then analyse what it wrote.

    The command's output passes through (its stdout to stderr with --format json/junit/github); Ctrl-C stops
    it and still analyses what was written.
    """
    from npudoctor import api
    from npudoctor.prof import launch
    from npudoctor.untrusted import clean, one_line

    msprof = launch.find_msprof()
    if msprof is None:
        click.echo(f"npudoctor: error: {launch.MISSING}", err=True)
        click.echo(launch.TORCH_SNIPPET, err=True)
        raise click.exceptions.Exit(EXIT_USAGE)
    profile = api.load_profile(profile_name)
    output = output or f"npudoctor_prof_{time.strftime('%Y%m%d_%H%M%S')}"
    if os.path.islink(output):  # msprof would write through it, wherever it points
        raise fail_usage(f"-o {output}: a symbolic link (not followed; give the real folder)")
    if os.path.exists(output) and not os.path.isdir(output):
        raise fail_usage(f"-o {output}: exists and is not a directory")
    try:
        outcome = launch.run_profiled(
            msprof, output, command, aic_metrics,
            timeout_s=timeout_s or float(setting(profile, "prof.run_timeout_s")),
            export_timeout_s=float(setting(profile, "prof.export_timeout_s")),
            stdout_to_stderr=fmt != "text")  # machine formats keep stdout for the report
    except OSError as exc:  # -o cannot be created (read-only, /proc), msprof cannot be started
        raise fail_usage(f"{exc.filename or output}: {exc.strerror or exc}") from None
    for problem in outcome.export_problems:
        click.echo(f"npudoctor: warning: {one_line(clean(problem))}", err=True)  # msprof's own text
    if outcome.interrupted:
        click.echo("npudoctor: interrupted; analysing what the profiler wrote", err=True)
    if outcome.timed_out:
        click.echo("npudoctor: the command ran past its timeout and was stopped", err=True)
    if not outcome.new_dirs:
        raise fail_usage(f"{msprof} wrote no PROF_* folder under {output} (exit code {outcome.exit_code})")
    code = _analyze_and_emit(tuple(outcome.new_dirs), profile_name, steps, logs_dirs, fmt, fail_on, verbose,
                             "run")
    raise click.exceptions.Exit(outcome.exit_code if outcome.exit_code else code)
