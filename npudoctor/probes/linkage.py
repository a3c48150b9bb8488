"""The dynamic loader's view of one shared object on the node behind a runner (``npudoctor libs``, and the
libraries probe for torch_npu): the search environment from the node, the static analysis, and C++ names
demangled by binutils' ``c++filt``. Kept apart from the libraries probe so ``npudoctor libs`` imports only
this (its start-up time is measured against ``ldd -r``)."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

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


# Packages whose extensions are only ever loaded after another package's: `import torch_npu` runs after
# `import torch`, whose _C extension has loaded torch's libraries (libtorch_python, libtorch_cpu, libc10).
LOADED_BEFORE: Dict[str, Tuple[str, ...]] = {"torch_npu": ("torch",)}
_SITE_FOLDERS = ("site-packages", "dist-packages")


class PackageContext(NamedTuple):
    """What is in the process before a file inside an installed Python package is loaded."""

    package: str  # the top-level package the file belongs to ("torch_npu"), "" for a loose extension
    site: str  # the site-packages folder, "" when the file is not in one
    interpreter: Optional[str]  # the interpreter of that site-packages, when found
    preload: Tuple[str, ...]  # what is loaded first: the interpreter, then the packages imported before
    said: str  # one line for the user: what was assumed and why


def is_python_extension(path: str) -> bool:
    """A CPython extension module by its file name (``_C.cpython-311-x86_64-linux-gnu.so``, ``x.abi3.so``)."""
    name = os.path.basename(path)
    return ".cpython-" in name or name.endswith(".abi3.so")


def package_context(runner: Any, path: str) -> Optional[PackageContext]:
    """The load context of ``path`` (a system path) when it sits in a Python package or is an extension
    module: the interpreter of its site-packages, and the ``_C`` extensions of the packages always imported
    before its own (:data:`LOADED_BEFORE`). None for any other file."""
    parts = path.split("/")
    at = max((i for i, part in enumerate(parts) if part in _SITE_FOLDERS), default=-1)
    if at < 0 or at + 2 >= len(parts):
        return None if not is_python_extension(path) else PackageContext(
            "", "", None, (), "a Python extension: its Py* symbols come from the interpreter that imports it")
    site, package = "/".join(parts[: at + 1]), parts[at + 1]
    interpreter = _site_interpreter(runner, parts[:at])
    preload: List[str] = [interpreter] if interpreter else []
    first = [f"the interpreter {interpreter}"] if interpreter else []
    for earlier in LOADED_BEFORE.get(package, ()):
        extension = _extension(runner, f"{site}/{earlier}")
        if extension:
            preload.append(extension)
            first.append(f"{earlier}/{os.path.basename(extension)} (import {earlier})")
    said = f"inside the {package} package: analysed as its import loads it"
    if first:
        said += ", after " + ", ".join(first)
    if not interpreter:
        said += "; no interpreter beside its site-packages: Py* symbols are left to it"
    return PackageContext(package, site, interpreter, tuple(preload), said)


def _site_interpreter(runner: Any, lib_parts: Sequence[str]) -> Optional[str]:
    """<prefix>/bin/pythonX.Y for <prefix>/lib/pythonX.Y/site-packages (a venv, a conda env, /usr)."""
    if len(lib_parts) < 2:
        return None
    version = lib_parts[-1]  # "python3.11", or "python3" for Debian's /usr/lib/python3/dist-packages
    prefix = "/".join(lib_parts[:-2]) or "/"
    for name in dict.fromkeys((version, "python3")):
        candidate = f"{prefix.rstrip('/')}/bin/{name}"
        if runner.path_info(candidate).exists:
            return candidate
    return None


def _extension(runner: Any, package_dir: str) -> Optional[str]:
    """The package's ``_C`` extension module (``torch/_C.cpython-311-x86_64-linux-gnu.so``), if there."""
    for entry in runner.list_dir(package_dir).entries:
        if re.match(r"^_C[.\w-]*\.so$", entry):
            return f"{package_dir}/{entry}"
    return None


class LibsAnalysis(NamedTuple):
    """`npudoctor libs`: the report, the context taken, and what the text adds to it."""

    report: LinkReport
    context: Optional[PackageContext]
    left_to_interpreter: int  # Py* symbols of a Python extension not reported: the interpreter provides them
    cann_fix: Optional[str]  # the fix for missing CANN libraries


def analyse_libs(runner: Any, path: str, search: SearchEnv, preload: Sequence[str] = (),
                 alone: bool = False) -> LibsAnalysis:
    """:func:`analyse_file` as ``npudoctor libs`` runs it: a file inside a Python package is analysed in the
    context its import has (unless ``alone`` or an explicit ``preload``), a Python extension's Py* symbols
    are left to the interpreter, and missing CANN libraries get the set_env.sh fix."""
    from npudoctor.elf.summary import PYTHON_PROVIDER

    context = None if alone or preload else package_context(runner, path)
    report = analyse_file(runner, path, search, tuple(preload) or (context.preload if context else ()))
    left = 0
    if context is not None or (not alone and not preload and is_python_extension(path)):
        kept = tuple(s for s in report.missing_symbols if s.provider != PYTHON_PROVIDER)
        left = len(report.missing_symbols) - len(kept)
        report = report._replace(missing_symbols=kept)
    return LibsAnalysis(report, context, left, cann_fix(runner, report))


def find_set_env(runner: Any, install: str) -> Optional[str]:
    """set_env.sh sits in the install (cann-<ver>) or one level up (ascend-toolkit/set_env.sh for latest)."""
    for candidate in (f"{install}/set_env.sh", f"{os.path.dirname(install)}/set_env.sh", f"{install}/bin/setenv.bash"):
        info = runner.path_info(candidate)
        if info.exists and info.kind == "file":
            return candidate
    return None


def cann_fix(runner: Any, report: LinkReport) -> Optional[str]:
    """For CANN libraries that are not found: source the set_env.sh of the CANN install on the node, or
    install CANN when there is none. Looks only where set_env.sh points and at the default installs (the
    libraries probe's find_cann_installs knows more places, at an import cost `libs` does not pay)."""
    from npudoctor.probes.ascend_layout import ASCEND, CANN_LIBRARY_PATTERN, HOME_VARIABLES

    if not any(re.match(CANN_LIBRARY_PATTERN, need.name) for need in report.missing_libraries):
        return None
    env = runner.environ()
    installs = [env[var].rstrip("/") for var in HOME_VARIABLES if env.get(var)]
    installs += [f"{ASCEND}/ascend-toolkit/latest", f"{ASCEND}/nnae/latest", f"{ASCEND}/cann"]
    for install in dict.fromkeys(installs):
        set_env = find_set_env(runner, install)
        if set_env:
            return f"source {set_env}   # puts CANN's lib64 on LD_LIBRARY_PATH, then run again"
    return ("install the CANN toolkit (Ascend-cann-toolkit_<version>_linux-<arch>.run --install), then "
            "source its set_env.sh")
