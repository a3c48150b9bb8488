"""``npudoctor libs PATH.so``: the dynamic loader's view of any shared object, statically.

Which file each needed library resolves to and from which search entry, which are not found, which
undefined symbols no loaded library exports (demangled, with the library that should provide them), and
which libraries exist in more than one directory of the search path. Never executes the file.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING, Optional, Tuple

import click

from npudoctor.cli import EXIT_FINDINGS, EXIT_OK, fail_usage

if TYPE_CHECKING:  # the ELF modules load when the command runs, not for `npudoctor --help`
    from npudoctor.elf.summary import LinkReport

NO_PROVIDER = "no known provider"


@click.command("libs")
@click.argument("path", metavar="PATH.so")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--root", metavar="DIR", help="Analyse a node image: PATH and library folders lie under DIR.")
@click.option(
    "--ld-library-path",
    metavar="DIRS",
    default=None,
    help="Use this LD_LIBRARY_PATH instead of the environment's.",
)
@click.option(
    "--preload",
    multiple=True,
    metavar="PATH",
    help="Objects loaded before PATH.so, as after `import torch`: the python binary (so Py* symbols "
    "resolve), torch/_C*.so. Repeatable.",
)
@click.option("-v", "--verbose", is_flag=True, help="List every resolved library, not only problems.")
def libs(
    path: str,
    fmt: str,
    root: Optional[str],
    ld_library_path: Optional[str],
    preload: Tuple[str, ...],
    verbose: bool,
) -> None:
    """Resolve PATH.so's libraries and symbols as ld.so would (exit 1 when something is missing)."""
    # Only what this command needs (not npudoctor.api, which loads every check module): start-up counts.
    from npudoctor.elf.reader import ElfError
    from npudoctor.probes.linkage import analyse_file, search_env
    from npudoctor.probes.runner import LiveRunner

    if root is None:
        path = os.path.abspath(path)
        preload = tuple(os.path.abspath(p) for p in preload)
    elif not os.path.isdir(root):
        raise fail_usage(f"--root {root}: not a directory")
    from npudoctor.report.progress import Progress

    runner = LiveRunner(root or "/")
    try:
        # A spinner on a terminal's stderr when the analysis is slow (a 93 MiB libtorch_npu.so on a cold cache).
        with Progress() as progress:
            progress.update(f"resolving the libraries and symbols of {os.path.basename(path)}")
            report = analyse_file(runner, path, search_env(runner, ld_library_path), preload)
    except ElfError as exc:
        raise fail_usage(str(exc)) from None
    if fmt == "json":
        from npudoctor.report.json_layout import dumps

        click.echo(dumps({"schema": "npudoctor.libs/1", **report.to_dict(), "clean": report.clean}))
    else:
        _text(report, verbose)
    raise click.exceptions.Exit(EXIT_OK if report.clean else EXIT_FINDINGS)


def _text(report: LinkReport, verbose: bool) -> None:
    from npudoctor.elf.summary import PYTHON_PROVIDER

    echo = click.echo
    echo(f"{report.root}: {report.kind}, {len(report.loaded)} objects loaded")
    echo(f"LD_LIBRARY_PATH={report.ld_library_path}")
    if verbose:
        for need in report.needed:
            where = need.path or "not found"
            via = f"  [{need.via}{': ' + need.entry if need.entry and need.entry != need.name else ''}]"
            echo(
                f"  {need.name} => {where}{via if need.path else ''}"
                f"   (needed by {os.path.basename(need.requester)})"
            )
    for need in report.missing_libraries:
        echo(click.style(f"NOT FOUND  {need.name}", fg="red") + f"  (needed by {need.requester})")
    for version, file, obj in report.missing_versions:
        echo(
            click.style(f"VERSION    {file}: version `{version}' not found", fg="red")
            + f"  (required by {obj})"
        )
    # Grouped by the library that should provide them, biggest group first: hundreds of symbols usually have
    # two or three causes (a missing CANN library, a torch mismatch, no Python loaded).
    groups = Counter(sym.provider or NO_PROVIDER for sym in report.missing_symbols)
    # The interpreter's symbols come last: they only mean the file was analysed without python loaded.
    ordered = sorted(groups, key=lambda provider: (provider == PYTHON_PROVIDER, -groups[provider], provider))
    if groups:
        count = len(report.missing_symbols)
        echo(f"{count} undefined symbol{'' if count == 1 else 's'}, by the library that should provide them:")
        missing = {need.name for need in report.missing_libraries}
        loaded = {os.path.basename(str(path)) for path in report.loaded}
        for provider in ordered:
            note = ""
            if provider in missing:
                note = "  (not found: see NOT FOUND above)"
            elif provider in loaded:
                note = "  (loaded, but does not export them: a build for another version?)"
            elif provider == PYTHON_PROVIDER:
                note = "  (normal for an extension analysed alone: --preload $(readlink -f $(which python3)))"
            echo(f"  {groups[provider]:>5}  {provider}{note}")
    rank = {provider: index for index, provider in enumerate(ordered)}
    symbols = sorted(report.missing_symbols, key=lambda s: (rank[s.provider or NO_PROVIDER], s.name))
    shown = symbols if verbose else symbols[:40]
    for sym in shown:
        name = sym.name + (f"@{sym.version}" if sym.version else "")
        line = f"UNDEFINED  {name}"
        if sym.demangled:
            line += f"  [{sym.demangled}]"
        line += f"  in {os.path.basename(sym.object)}"
        if sym.provider:
            line += f"; should come from {sym.provider}"
        if sym.provided_by:
            line += f" (exported by the shadowed {sym.provided_by})"
        echo(click.style(line, fg="red"))
    if len(shown) < len(report.missing_symbols):
        echo(f"... {len(report.missing_symbols) - len(shown)} more undefined symbols (-v lists all)")
    for shadow in report.shadowed:
        echo(
            click.style(f"SHADOWED   {shadow.name}", fg="yellow")
            + f": {shadow.winner} wins (via {shadow.via} {shadow.entry}) over {', '.join(shadow.others)}"
        )
    for problem in report.errors:
        echo(click.style(f"UNREADABLE {problem}", fg="yellow"))
    if report.clean:
        echo(click.style("OK: every library and symbol resolves", fg="green"))
    else:
        echo(
            f"{len(report.missing_libraries)} libraries not found, "
            f"{len(report.missing_symbols)} undefined symbols, "
            f"{len(report.missing_versions)} missing versions"
        )
