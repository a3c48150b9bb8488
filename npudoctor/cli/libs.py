"""``npudoctor libs PATH.so``: the dynamic loader's view of any shared object, statically.

Which file each needed library resolves to and from which search entry, which are not found, which
undefined symbols no loaded library exports (demangled, with the library that should provide them), and
which libraries exist in more than one directory of the search path. Never executes the file.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional, Tuple

import click

from npudoctor.cli.common import EXIT_FINDINGS, EXIT_OK, fail_usage

if TYPE_CHECKING:  # the ELF modules load when the command runs, not for `npudoctor --help`
    from npudoctor.probes.linkage import LibsAnalysis


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
@click.option(
    "--alone",
    is_flag=True,
    help="Analyse the file by itself, not as its Python package's import loads it (by default a file in "
    "site-packages/torch_npu is analysed with the interpreter and torch's _C loaded first).",
)
@click.option("-v", "--verbose", is_flag=True, help="List every resolved library, not only problems.")
def libs(
    path: str,
    fmt: str,
    root: Optional[str],
    ld_library_path: Optional[str],
    preload: Tuple[str, ...],
    alone: bool,
    verbose: bool,
) -> None:
    """Resolve PATH.so's libraries and symbols as ld.so would (exit 1 when something is missing)."""
    # Only what this command needs (not npudoctor.api, which loads every check module): start-up counts.
    from npudoctor.probes.linkage import analyse_libs, search_env
    from npudoctor.probes.runner import LiveRunner

    if root is None:
        path = os.path.abspath(path)
        preload = tuple(os.path.abspath(p) for p in preload)
    elif not os.path.isdir(root):
        raise fail_usage(f"--root {root}: not a directory")
    from npudoctor.report.progress import Progress

    runner = LiveRunner(root or "/")
    # A spinner on a terminal's stderr when the analysis is slow (a 93 MiB libtorch_npu.so on a cold cache).
    with Progress() as progress:
        progress.update(f"resolving the libraries and symbols of {os.path.basename(path)}")
        result = analyse_libs(runner, path, search_env(runner, ld_library_path), preload, alone)
    report = result.report
    if fmt == "json":
        from npudoctor.report.json_layout import dumps

        context = result.context
        click.echo(dumps({
            "schema": "npudoctor.libs/1", **report.to_dict(), "clean": report.clean,
            "context": None if context is None else {"package": context.package, "preloaded": list(context.preload),
                                                     "said": context.said},
            "left_to_interpreter": result.left_to_interpreter, "cann_fix": result.cann_fix,
        }))
    else:
        _text(result, verbose)
    raise click.exceptions.Exit(EXIT_OK if report.clean else EXIT_FINDINGS)


def _text(result: LibsAnalysis, verbose: bool) -> None:
    import sys

    from npudoctor.report import terminal
    from npudoctor.report.libs_console import plain, render_libs

    color = terminal.use_color(sys.stdout)

    def paint(text: str, style: str) -> str:
        """A style of ``report.symbols.STYLE`` ("bold red", "dim") in ANSI."""
        words = style.split()
        colors = [word for word in words if word not in ("bold", "dim")]
        return click.style(text, fg=colors[0] if colors else None, bold=("bold" in words) or None,
                           dim=("dim" in words) or None)

    lines = render_libs(result, terminal.width(sys.stdout), verbose, paint if color else plain)
    # sys.stdout, not click.echo: click re-encodes an ASCII stdout as UTF-8; the house style replaces what
    # the stream cannot encode (terminal.tolerate_encodings). Colour is already decided (paint).
    sys.stdout.write("\n".join(lines) + "\n")
