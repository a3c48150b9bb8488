"""Human output of ``npudoctor libs``: what stops the load first, then why, then the evidence; a verdict last.

Layout (fits the terminal's width, 80 columns when piped; wrapped, never cut)::

    /opt/venv/lib/python3.11/site-packages/torch_npu/lib/libtorch_npu.so: ELF64
      x86-64, 6 objects loaded
    context: inside the torch_npu package: analysed as its import loads it, after
      ...
    LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/driver:/usr/local/Ascend/driver/
      lib64/common

    NOT FOUND  libascendcl.so  (needed by libtorch_npu.so)
          fix: install the CANN toolkit
               (Ascend-cann-toolkit_<version>_linux-<arch>.run --install), then
               source its set_env.sh

    10 undefined symbols, by the library that should provide them:
          2  libc10.so  (loaded, but does not export them: a build for another
               version?)
          8  libascendcl.so  (not found: see NOT FOUND above)

    UNDEFINED in libtorch_npu.so; should come from libc10.so (2):
      c10::GeneratorImpl::philox_state(unsigned long, at::Tensor&, at::Tensor&,
          at::Tensor&)
      c10::TensorImpl::release_resources()
    UNDEFINED in libtorch_npu.so; should come from libascendcl.so (8):
      aclFinalize
      ...
      ... 3 more (-v lists all)

    1 library not found, 10 undefined symbols

(tests/data/golden/libs_torch_npu.*.txt show it whole.)

Undefined symbols are grouped by the object that references them and the library that should provide them
(hundreds of symbols usually have two or three causes); each shows its demangled name, the mangled one only
with ``-v`` (and in JSON). Without ``-v`` a group lists its first few symbols and counts the rest; the
groups whose provider is loaded but lacks them (a build for another version: the decisive ones) come first
and list more.

Plain strings, no rich: ``libs`` answers in a fifth of a second and its start-up counts. ``paint(text,
style)`` colours a piece (styles as in :data:`npudoctor.report.symbols.STYLE`: "bold red", "yellow"...);
the CLI passes one only when colour is on.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING, Callable, Dict, List, Tuple

from npudoctor.report.terminal import FIX_INDENT, FIX_LABEL, WORD_BREAKS, fix_lines, wrap

if TYPE_CHECKING:  # the analysis is imported by the CLI when it runs; this module only reads it
    from npudoctor.elf.summary import SymbolInfo
    from npudoctor.probes.linkage import LibsAnalysis

Paint = Callable[[str, str], str]

NO_PROVIDER = "no known provider"
LABEL = "NOT FOUND  "  # the width of the row labels (NOT FOUND, VERSION, SHADOWED): continuations align
ROW_INDENT = " " * len(LABEL)
SYMBOL_INDENT = "  "
SYMBOL_REST = "      "
# Symbols listed per group without -v: the decisive groups (provider loaded but lacking them) list more.
SHOWN_PER_GROUP = 5
SHOWN_PER_DECISIVE_GROUP = 20


def plain(text: str, style: str) -> str:
    return text


def render_libs(result: LibsAnalysis, width: int, verbose: bool = False, paint: Paint = plain) -> List[str]:
    """The lines ``npudoctor libs`` prints for ``result``, each at most ``width`` columns (save a single
    word of a fix or note longer than the line)."""
    from npudoctor.elf.summary import PYTHON_PROVIDER

    report = result.report
    out: List[str] = []

    def rows(text: str, head: str, style: str, first: str = "", rest: str = ROW_INDENT,
             words_may_break: bool = True) -> None:
        """``text`` wrapped; its leading ``head`` painted ``style``."""
        lines = wrap(text, width, first, rest, words_may_break, WORD_BREAKS)
        start = len(first)
        if head and lines[0][start:start + len(head)] == head:
            lines[0] = lines[0][:start] + paint(head, style) + lines[0][start + len(head):]
        out.extend(lines)

    def gap() -> None:
        """A blank line between the parts: what stops the load, why symbols are missing, which, the verdict."""
        if out and out[-1]:
            out.append("")

    objects = len(report.loaded)
    rows(f"{report.root}: {report.kind}, {objects} object{'' if objects == 1 else 's'} loaded", "", "", rest="  ")
    if result.context is not None:
        rows(f"context: {result.context.said} (--alone: the file by itself)", "", "", rest="  ")
    rows(f"LD_LIBRARY_PATH={report.ld_library_path}", "", "", rest="  ")
    if verbose:
        for need in report.needed:
            where = need.path or "not found"
            via = f"  [{need.via}{': ' + need.entry if need.entry and need.entry != need.name else ''}]"
            rows(f"{need.name} => {where}{via if need.path else ''}   (needed by {os.path.basename(need.requester)})",
                 "", "", first="  ", rest="      ")

    # What stops the load: libraries not found (with the fix), versions not found.
    if report.missing_libraries or report.missing_versions:
        gap()
    for need in report.missing_libraries:
        requester = os.path.basename(need.requester) if need.requester == report.root else need.requester
        rows(f"{LABEL}{need.name}  (needed by {requester})", f"{LABEL}{need.name}", "bold red")
    if result.cann_fix:
        lines = fix_lines(result.cann_fix, width, FIX_INDENT)
        label = FIX_LABEL.rstrip()
        lines[0] = FIX_INDENT + paint(label, "bold") + lines[0][len(FIX_INDENT) + len(label):]
        out.extend(lines)
    for version, file, obj in report.missing_versions:
        head = f"VERSION    {file}: version `{version}' not found"
        rows(f"{head}  (required by {obj})", head, "bold red")

    # Why the symbols are missing: one line per library that should provide them. First the decisive groups,
    # whose provider is loaded but lacks them (a build for another version), then the biggest; the
    # interpreter's last (they only mean the file was analysed without python loaded).
    groups = Counter(sym.provider or NO_PROVIDER for sym in report.missing_symbols)
    loaded = {os.path.basename(str(path)) for path in report.loaded}
    ordered = sorted(groups, key=lambda provider: (provider == PYTHON_PROVIDER, provider not in loaded,
                                                   -groups[provider], provider))
    if groups or report.shadowed or report.errors:
        gap()
    if groups:
        count = len(report.missing_symbols)
        out.extend(wrap(f"{count} undefined symbol{'' if count == 1 else 's'}, by the library that should provide "
                        "them:", width, rest="  "))
        missing = {need.name for need in report.missing_libraries}
        for provider in ordered:
            note = ""
            if provider in missing:
                note = "  (not found: see NOT FOUND above)"
            elif provider in loaded:
                note = "  (loaded, but does not export them: a build for another version?)"
            elif provider == PYTHON_PROVIDER:
                note = "  (normal for an extension analysed alone: --preload $(readlink -f $(which python3)))"
            rows(f"{groups[provider]:>5}  {provider}{note}", "", "", first="  ",
                 words_may_break=False)
    for shadow in report.shadowed:
        head = f"SHADOWED   {shadow.name}"
        rows(f"{head}: {shadow.winner} wins (via {shadow.via} {shadow.entry}) over {', '.join(shadow.others)}",
             head, "yellow")
    for problem in report.errors:
        rows(f"UNREADABLE {problem}", "UNREADABLE", "yellow")

    # The evidence: the symbols, grouped by where they are missing and where they should come from.
    gap()
    rank = {provider: index for index, provider in enumerate(ordered)}
    by_group: Dict[Tuple[int, str, str], List[SymbolInfo]] = {}
    for sym in report.missing_symbols:
        key = (rank[sym.provider or NO_PROVIDER], _object_order(sym.object, report.root), sym.provider or "")
        by_group.setdefault(key, []).append(sym)
    for (_, _, provider), symbols in sorted(by_group.items(), key=lambda item: item[0]):
        symbols.sort(key=lambda s: (s.demangled or s.name, s.name))
        where = f"in {os.path.basename(symbols[0].object)}" + (f"; should come from {provider}" if provider else "")
        rows(f"UNDEFINED {where} ({len(symbols)}):", "UNDEFINED", "bold red", rest=" " * len("UNDEFINED "))
        limit = SHOWN_PER_DECISIVE_GROUP if provider in loaded else SHOWN_PER_GROUP
        shown = symbols if verbose or len(symbols) <= limit + 1 else symbols[:limit]
        for sym in shown:
            out.extend(_symbol_lines(sym, width, verbose, paint))
        if len(shown) < len(symbols):
            out.append(f"{SYMBOL_INDENT}... {len(symbols) - len(shown)} more (-v lists all)")
    if result.left_to_interpreter:
        count = result.left_to_interpreter
        gap()
        out.extend(wrap(f"{count} Py* symbol{'' if count == 1 else 's'} left to the Python interpreter that imports "
                        "this extension (--preload PYTHON to check them)", width, rest="  "))
    gap()
    out.extend(_verdict(result, width, paint))
    return out


def _object_order(path: str, root: str) -> str:
    """The analysed file's own symbols first, then the other objects' by name."""
    return "" if path == root else os.path.basename(path) + "\0" + path


def _symbol_lines(sym: SymbolInfo, width: int, verbose: bool, paint: Paint) -> List[str]:
    """One undefined symbol: its demangled name (the mangled one under it with -v), wrapped under its row."""
    version = f"@{sym.version}" if sym.version else ""
    shown = (sym.demangled or sym.name) + version
    if sym.provided_by:
        shown += f"  (exported by the shadowed {sym.provided_by})"
    lines = wrap(shown, width, SYMBOL_INDENT, SYMBOL_REST, breaks=WORD_BREAKS)
    if verbose and sym.demangled:
        lines += [paint(line, "dim") for line in wrap(sym.name + version, width, SYMBOL_REST, SYMBOL_REST)]
    return lines


def _verdict(result: LibsAnalysis, width: int, paint: Paint) -> List[str]:
    report = result.report
    if report.clean:
        return [paint("OK: every library and symbol resolves", "green")]
    counts = ((len(report.missing_libraries), "library not found", "libraries not found"),
              (len(report.missing_versions), "symbol version not found", "symbol versions not found"),
              (len(report.missing_symbols), "undefined symbol", "undefined symbols"))
    sentence = ", ".join(f"{count} {one if count == 1 else many}" for count, one, many in counts if count)
    return [paint(line, "bold") for line in wrap(sentence, width)]

