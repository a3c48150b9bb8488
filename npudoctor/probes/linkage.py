"""The dynamic loader's view of one shared object on the node behind a runner (``npudoctor libs``, and the
libraries probe for torch_npu): the search environment from the node, the static analysis, and C++ names
demangled by binutils' ``c++filt``. Kept apart from the libraries probe so ``npudoctor libs`` imports only
this (its start-up time is measured against ``ldd -r``)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence

from npudoctor.elf.compiled import compiled_resolver
from npudoctor.elf.loader import SearchEnv, analyse, load_cache
from npudoctor.elf.summary import LinkReport, link_report
from npudoctor.probes.sources import Command


def demangle(runner: Any, names: Iterable[str]) -> Dict[str, str]:
    """C++ names demangled by the C++ runtime in this process (the compiled resolver loads libstdc++'s
    demangler), else by ``c++filt`` (binutils) on the node; names neither can read stay as they are.
    Demangling reads nothing of the node, so doing it in-process changes no recorded answer."""
    mangled = sorted({n for n in names if n.startswith("_Z")})
    if not mangled:
        return {}
    compiled = compiled_resolver()
    plain = compiled.demangle(mangled) if compiled is not None else None
    if plain is not None:
        return {m: d for m, d in zip(mangled, plain) if d and d != m}
    result: Dict[str, str] = {}
    for start in range(0, len(mangled), 500):
        chunk = mangled[start : start + 500]
        answer = runner.run(Command(("c++filt", *chunk), timeout_s=10))
        lines = answer.stdout.splitlines() if answer.ran and answer.rc == 0 else []
        if len(lines) != len(chunk):
            continue
        result.update({m: d for m, d in zip(chunk, lines) if d != m})
    return result


def search_env(runner: Any, ld_library_path: Optional[str] = None) -> SearchEnv:
    """What ld.so reads on the node behind ``runner``: its LD_LIBRARY_PATH (or ``ld_library_path``), its
    ld.so.cache, its files. Build it once per node; ``_replace(ld_library_path=...)`` for another path."""
    env = runner.environ()
    return SearchEnv(
        env.get("LD_LIBRARY_PATH", "") if ld_library_path is None else ld_library_path,
        load_cache(runner.local_path),
        runner.local_path,
        env.get("PWD", "/"),
    )


def analyse_file(runner: Any, path: str, search: SearchEnv, preload: Sequence[str] = ()) -> LinkReport:
    """The loader's view of ``path`` (a system path) on the node behind ``runner``, in ``search``.

    Raises :class:`ElfError` when ``path`` cannot be read as an ELF file or binaries are not reachable.
    """
    analysis = analyse(path, search, preload)
    try:
        names = [m.name for m in analysis.missing_symbols]
        return link_report(analysis, runner.local_path, demangle(runner, names), analysis.reachable)
    finally:
        analysis.close()
