"""Thin command line: arguments -> api call -> renderer -> exit code. No decisions here.

Exit codes (the contract scripts rely on): 0 nothing failed; 1 a FAIL or ERROR finding (or a WARN under
``--fail-on warn``); 2 usage error, unreadable input, or the tool could not run.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import click

from npudoctor import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class LazyGroup(click.Group):
    """Subcommands in their own modules, imported only when used (keeps `npudoctor --help` fast)."""

    lazy: ClassVar[Dict[str, str]] = {
        "libs": "npudoctor.cli.libs:libs",
        "logs": "npudoctor.cli.logs:logs",
        "parse": "npudoctor.cli.parse:parse",
        "fleet": "npudoctor.cli.fleet:fleet",
        "profile": "npudoctor.cli.fleet:profile",
        "collective": "npudoctor.cli.fleet:collective",
        "onboard": "npudoctor.cli.fleet:onboard",
    }

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        if name in self.lazy:
            module, attr = self.lazy[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


def fail_usage(message: str) -> click.exceptions.Exit:
    """Print a one-line error and leave with exit code 2."""
    click.echo(f"npudoctor: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_USAGE)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="npudoctor")
def main() -> None:
    """Find, explain and fix what breaks training on Huawei Ascend NPU nodes."""


FORMATS = click.Choice(["text", "json", "junit", "prometheus", "npd"])


@main.command()
@click.option("--level", type=click.IntRange(1, 3), default=1, show_default=True,
              help="1: static checks; 2: also import torch/torch_npu in a child process and run one op.")
@click.option("--profile", "profile_name", metavar="NAME|PATH", help="Node profile (expected chips, thresholds).")
@click.option("--from", "bundle", metavar="BUNDLE", help="Replay a bundle made by `npudoctor collect`.")
@click.option("--root", metavar="DIR", help="Read system files (sysfs, /dev, /usr/local/Ascend, /etc) under DIR.")
@click.option("--only", multiple=True, metavar="ID", help="Run only these checks (ID, ID prefix or stage).")
@click.option("--skip", "skip_ids", multiple=True, metavar="ID", help="Skip these checks (ID, prefix or stage).")
@click.option("--format", "fmt", type=FORMATS, default="text", show_default=True)
@click.option("--fail-on", type=click.Choice(["warn", "fail"]), default="fail", show_default=True,
              help="Exit 1 on FAIL/ERROR (default) or also on WARN.")
@click.option("--python", "python", metavar="PATH",
              help="The interpreter training runs with (default: python3 on PATH).")
@click.option("--logs", "logs_dirs", multiple=True, metavar="DIR",
              help="Also scan the newest CANN plogs under DIR (e.g. ~/ascend/log).")
@click.option("-v", "--verbose", is_flag=True, help="Show evidence and passing details.")
@click.option("--textfile", metavar="PATH",
              help="Also write the Prometheus text (node_exporter textfile collector) to PATH, atomically.")
@click.option("--demo", metavar="SCENARIO", is_flag=False, flag_value="healthy", default=None,
              help="Replay a scenario shipped with npudoctor (healthy, chip-warning, ...; `--demo list`).")
def check(level: int, profile_name: Optional[str], bundle: Optional[str], root: Optional[str],
          only: Tuple[str, ...], skip_ids: Tuple[str, ...], fmt: str, fail_on: str, python: Optional[str],
          logs_dirs: Tuple[str, ...], verbose: bool, textfile: Optional[str], demo: Optional[str]) -> None:
    """Run the ordered node checks and say how to fix what is wrong."""
    from npudoctor import api

    only = split_list(only)
    skip_ids = split_list(skip_ids)
    options = {"python": python, "logs_dirs": logs_dirs}
    try:
        if textfile:
            from npudoctor.fleet.textfile import TextfileError, check_target

            try:
                check_target(textfile)
            except TextfileError as exc:
                raise api.UsageError(str(exc)) from None
        if demo is not None:
            from npudoctor.fleet import demo as demos

            if demo == "list":
                click.echo(demos.describe())
                return
            bundle, profile_name = demos.check_arguments(demo, bundle, root, profile_name)
            if fmt == "text":
                click.echo(demos.banner(demo), err=True)
        runner = api.make_runner(root=root, bundle=bundle)
        profile = api.load_profile(profile_name)
        report = api.run_checks(runner, profile, only=only, skip=skip_ids, level=level, options=options)
    except api.UsageError as exc:
        raise fail_usage(str(exc)) from None
    if textfile:
        from npudoctor.fleet.textfile import TextfileError, write_atomically
        from npudoctor.report import prometheus

        try:
            write_atomically(textfile, prometheus.render(report, fail_on))
        except TextfileError as exc:
            raise fail_usage(str(exc)) from None
    _emit(report, fmt, verbose, fail_on)
    if fmt == "npd":
        from npudoctor.report import npd

        raise click.exceptions.Exit(npd.verdict(report, fail_on)[0])
    raise click.exceptions.Exit(report.exit_code(fail_on))


def split_list(values: Sequence[str]) -> Tuple[str, ...]:
    """Accept both `--only A --only B` and `--only A,B`."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _emit(report: Any, fmt: str, verbose: bool, fail_on: str = "fail") -> None:
    if fmt in ("prometheus", "npd"):
        from npudoctor.report import npd, prometheus

        click.echo((prometheus if fmt == "prometheus" else npd).render(report, fail_on), nl=False)
    elif fmt == "json":
        from npudoctor.report import json_report

        click.echo(json_report.render(report), nl=False)
    elif fmt == "junit":
        from npudoctor.report import junit

        click.echo(junit.render(report), nl=False)
    else:
        from npudoctor.report import console

        console.render(report, console.make_console(), verbose=verbose)


@main.command("list-checks")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_checks(fmt: str) -> None:
    """List every check with its stable ID, stage and summary."""
    import json

    from npudoctor import api

    specs = api.list_checks()
    if fmt == "json":
        rows = [{"id": s.id, "stage": s.stage, "title": s.title, "level": s.level, "summary": s.summary}
                for s in specs]
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for spec in specs:
        level = f" (level {spec.level})" if spec.level > 1 else ""
        click.echo(f"{spec.id:<8} {spec.stage:<10} {spec.title}{level}")


@main.command()
@click.argument("check_id")
def explain(check_id: str) -> None:
    """Print a check's documentation: why it matters and how to fix it."""
    from npudoctor import api

    spec = api.find_check(check_id)
    if spec is None:
        raise fail_usage(f"no check with id {check_id!r}; see `npudoctor list-checks`")
    click.echo(f"{spec.id}: {spec.title}  (stage {spec.stage}, level {spec.level})\n")
    click.echo(spec.doc)


@main.command()
@click.option("-o", "--output", required=True, metavar="BUNDLE.tar.gz",
              help="Where to write the bundle (never overwritten).")
@click.option("--root", metavar="DIR", help="Read system files under DIR.")
@click.option("--level", type=click.IntRange(1, 3), default=1, show_default=True)
@click.option("--python", "python", metavar="PATH", help="The interpreter training runs with.")
@click.option("--logs", "logs_dirs", multiple=True, metavar="DIR", help="Also record the newest plogs under DIR.")
def collect(output: str, root: Optional[str], level: int, python: Optional[str], logs_dirs: Tuple[str, ...]) -> None:
    """Record every raw output the checks use into a bundle (secrets redacted), for `check --from`."""
    from npudoctor import api

    try:
        report = api.collect(output, root=root, level=level, options={"python": python, "logs_dirs": logs_dirs})
    except api.UsageError as exc:
        raise fail_usage(str(exc)) from None
    except OSError as exc:
        raise fail_usage(f"cannot write {output}: {exc.strerror or exc}") from None
    summary = report.summary.to_dict()
    click.echo(f"wrote {output}: {len(report.findings)} findings recorded "
               f"({', '.join(f'{v} {k}' for k, v in summary.items())}); secrets redacted")


def run() -> None:  # pragma: no cover - console entry for `python -m npudoctor`
    sys.exit(main())
