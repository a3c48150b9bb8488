"""Turn a loader :class:`~npudoctor.elf.loader.Analysis` into plain facts: what is missing, what should
provide it, and which library is shadowed by which. Used by the libraries probe and ``npudoctor libs``."""

from __future__ import annotations

import os
import re
from functools import cache
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from npudoctor.elf.loader import Analysis, LocalPath
from npudoctor.elf.reader import ElfError, ElfFile, gnu_hashes, open_elf

# Which library normally exports a symbol: by the first namespace of a mangled C++ name, else by the
# prefix of a C name. Enough to say "libascendcl.so should provide aclrtGetRecentContext" when the
# provider is not installed at all, so the analysis cannot see it.
NAMESPACE_PROVIDERS: Mapping[str, str] = {
    "c10_npu": "libtorch_npu.so",
    "at_npu": "libtorch_npu.so",
    "torch_npu": "libtorch_npu.so",
    "c10": "libc10.so",
    "c10d": "libtorch_cpu.so",
    "at": "libtorch_cpu.so",
    "caffe2": "libtorch_cpu.so",
    "torch": "libtorch_cpu.so",
    "pybind11": "libtorch_python.so",
    "ge": "libge_runner.so",
    "St": "libstdc++.so.6",
    "std": "libstdc++.so.6",
}
# torch:: names defined in libtorch_python.so rather than libtorch_cpu.so (torch/csrc/Exceptions.cpp...).
TORCH_PYTHON_NAMES = frozenset(
    (
        "ValueError",
        "TypeError",
        "IndexError",
        "AttributeError",
        "NotImplementedError",
        "PyWarningHandler",
        "python",
        "utils",
        "tensors",
        "dynamo",
        "autograd::python",
    )
)
PYTHON_PROVIDER = "the Python interpreter"
C_PREFIX_PROVIDERS: Sequence[Tuple[str, str]] = (
    (r"^(?:Hccl|hccl|HCCL)", "libhccl.so"),
    (r"^aclop", "libacl_op_compiler.so"),
    (r"^acl", "libascendcl.so"),
    (r"^rt[A-Z]", "libruntime.so"),
    (r"^Msprof", "libprofapi.so"),
    (r"^(?:Py|_Py)", PYTHON_PROVIDER),
)


@cache
def _pattern(text: str) -> re.Pattern[str]:
    """``text`` compiled once, on first use (re.match(str) pays a cache lookup per call: hundreds of
    symbols per report; compiling at import would slow every other command)."""
    return re.compile(text)


def _components(mangled: str) -> List[str]:
    """The leading source-name components of a mangled nested name (``_ZN5torch10ValueError...`` ->
    ``["torch", "ValueError"]``); ``["St"]`` for the std:: abbreviation."""
    match = _pattern(r"_Z(N[rVKRO]*)?").match(mangled)
    if not match:
        return []
    at = match.end()
    if mangled.startswith("St", at):
        return ["St"]
    names: List[str] = []
    while at < len(mangled) and mangled[at].isdigit() and len(names) < 2:
        digits = _pattern(r"\d+").match(mangled, at)
        assert digits is not None
        length = int(digits.group(0))
        start = digits.end()
        names.append(mangled[start : start + length])
        at = start + length
        if not match.group(1):
            break  # a plain _Z<len><name> has one component
    return names


def provider_hint(symbol: str) -> Optional[str]:
    """The library that normally exports ``symbol``, from its name.

    >>> provider_hint("aclrtGetRecentContext"), provider_hint("_ZN5torch10ValueErrorC1EPKcz")
    ('libascendcl.so', 'libtorch_python.so')
    >>> provider_hint("_ZN2at6native4normERKNS_6TensorE"), provider_hint("_ZN3c104impl3fooEv")
    ('libtorch_cpu.so', 'libc10.so')
    """
    if symbol.startswith("_Z"):
        parts = _components(symbol)
        if not parts:
            return None
        if parts[0] == "torch" and len(parts) > 1 and parts[1] in TORCH_PYTHON_NAMES:
            return "libtorch_python.so"
        return NAMESPACE_PROVIDERS.get(parts[0])
    for pattern, library in C_PREFIX_PROVIDERS:
        if _pattern(pattern).match(symbol):
            return library
    return None


class NeededInfo(NamedTuple):
    requester: str
    name: str
    path: Optional[str]
    via: str
    entry: str


class ShadowInfo(NamedTuple):
    """A library name found in more than one directory on the search path; ``winner`` is loaded."""

    name: str
    winner: str
    via: str
    entry: str
    others: Tuple[str, ...]


class SymbolInfo(NamedTuple):
    name: str
    object: str
    demangled: str = ""
    version: Optional[str] = None
    # The library that should provide it (a file name), and a file on disk that does (e.g. the newer
    # copy shadowed by an older one), when one was found.
    provider: Optional[str] = None
    provided_by: Optional[str] = None


class LinkReport(NamedTuple):
    root: str
    kind: str
    ld_library_path: str
    loaded: Tuple[str, ...]
    needed: Tuple[NeededInfo, ...]
    missing_libraries: Tuple[NeededInfo, ...]
    missing_symbols: Tuple[SymbolInfo, ...]
    missing_versions: Tuple[Tuple[str, str, str], ...]
    shadowed: Tuple[ShadowInfo, ...]
    errors: Tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return not (self.missing_libraries or self.missing_symbols or self.missing_versions)

    def to_dict(self) -> Dict[str, Any]:
        """Plain values for JSON: the records of the report as dicts (field name -> value)."""
        plain = self._asdict()
        for key in ("needed", "missing_libraries", "missing_symbols", "shadowed"):
            plain[key] = tuple(item._asdict() for item in plain[key])
        return plain


def link_report(
    analysis: Analysis,
    local_path: LocalPath,
    demangled: Optional[Mapping[str, str]] = None,
    objects: Optional[Sequence[str]] = None,
) -> LinkReport:
    """Summarise ``analysis``. ``objects`` limits missing symbols and libraries to those of these objects
    (the ones reachable from the root when other objects were preloaded)."""
    demangled = demangled or {}
    keep = set(objects) if objects is not None else None
    needed = tuple(
        NeededInfo(n.requester, n.name, n.path, n.via, n.entry)
        for n in analysis.needed
        if keep is None or n.requester in keep
    )
    # Each library missing once, at its first request (ld.so reports it for every requester).
    missing_libs: List[NeededInfo] = []
    for need in needed:
        if need.path is None and need.name not in {m.name for m in missing_libs}:
            missing_libs.append(need)
    shadowed: List[ShadowInfo] = []
    for shadow_need in analysis.shadowed:
        if keep is not None and shadow_need.requester not in keep:
            continue
        if shadow_need.name in {s.name for s in shadowed}:
            continue
        others = []
        reals = {shadow_need.candidates[0].real}
        for candidate in shadow_need.candidates[1:]:
            if candidate.real not in reals:
                reals.add(candidate.real)
                others.append(candidate.path)
        shadowed.append(
            ShadowInfo(
                shadow_need.name, shadow_need.path or "", shadow_need.via, shadow_need.entry, tuple(others)
            )
        )
    symbols = []
    missing_symbols = [m for m in analysis.missing_symbols if keep is None or m.object in keep]
    shadow_copies = _open_all([path for shadow in shadowed for path in shadow.others], local_path)
    try:
        # Which shadowed (not loaded) copies of loaded libraries do export each missing symbol: all names
        # looked up in one pass per copy.
        names = [m.name.encode("utf-8", errors="surrogateescape") for m in missing_symbols] if shadow_copies else []
        queries = [(name, hashed, None, False) for name, hashed in zip(names, gnu_hashes(names))]
        exported = [(path, elf.defines_each(queries)) for path, elf in shadow_copies]
        for position, missing in enumerate(missing_symbols):
            provider = missing.version_file or provider_hint(missing.name)
            provided_by = next((path for path, found in exported if found[position]), None)
            if provided_by:
                provider = os.path.basename(provided_by)
            symbols.append(
                SymbolInfo(
                    missing.name,
                    missing.object,
                    demangled.get(missing.name, ""),
                    missing.version,
                    provider,
                    provided_by,
                )
            )
    finally:
        for _, elf in shadow_copies:
            elf.close()
    return LinkReport(
        analysis.root,
        analysis.kind,
        analysis.ld_library_path,
        tuple(o.path for o in analysis.objects),
        needed,
        tuple(missing_libs),
        tuple(symbols),
        tuple(
            (v.version, v.file, v.object)
            for v in analysis.missing_versions
            if keep is None or v.object in keep
        ),
        tuple(shadowed),
        tuple(analysis.errors),
    )


def _open_all(paths: Sequence[str], local_path: LocalPath) -> List[Tuple[str, ElfFile]]:
    opened = []
    for path in dict.fromkeys(paths):
        local = local_path(path)
        if local is None:
            continue
        try:
            opened.append((path, open_elf(local)))
        except ElfError:
            continue  # an unreadable copy cannot provide anything; the loader skips it too
    return opened
