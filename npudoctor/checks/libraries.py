"""Checks of the libraries stage: will ``import torch_npu`` find every shared library and symbol?

The facts come from a static emulation of the dynamic loader (``npudoctor.elf``): which file each
DT_NEEDED name resolves to and from which search entry, and which undefined symbols stay unresolved.
The diagnosis (set_env.sh not sourced, older CANN first on LD_LIBRARY_PATH, torch/torch_npu mismatch,
CANN not installed) is made once, in :func:`diagnose`, and shared by the static and the import checks.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

from npudoctor import install as install_hints
from npudoctor.checks.registry import (
    NO_CANN,
    CheckContext,
    Outcome,
    check,
    error,
    fail,
    not_installed,
    passed,
    skip,
    warn,
)
from npudoctor.logs.codes import explain, find_codes
from npudoctor.parsers.child_output import first_error_line
from npudoctor.probes.ascend_layout import CANN_LIBRARY_PATTERN, SOURCED_INSTALL_VARIABLES

CANN_LIBRARY = re.compile(CANN_LIBRARY_PATTERN)
TORCH_LIBRARY = re.compile(r"^lib(?:torch\w*|c10|shm)\.so")


@dataclass(frozen=True)
class Diagnosis:
    kind: str  # "set-env-not-sourced", "older-cann-first", "torch-mismatch", "cann-not-installed", ...
    detail: str
    fix: str
    evidence: Dict[str, Any]


def _base_version(version: str) -> str:
    match = re.match(r"\d+(?:\.\d+){0,2}", version)
    return match.group(0) if match else version


def _torch_mismatch(facts: Any) -> Optional[Diagnosis]:
    torch, npu = facts.packages.torch, facts.packages.torch_npu
    if torch is None or npu is None:
        return None
    torch_base, npu_base = _base_version(torch.version), _base_version(npu.version)
    detail = f"torch and torch_npu builds do not match (torch {torch.version}, torch_npu {npu.version})"
    fix = (
        f'pip install "torch_npu=={torch_base}.*"   # a torch_npu built for torch {torch_base}; '
        f"or keep torch_npu and: pip install torch=={npu_base}"
    )
    if torch_base == npu_base:
        fix = (
            f"torch {torch.version} and torch_npu {npu.version} carry the same version "
            "but not the same build: "
            f"reinstall both from one index: pip install --force-reinstall torch=={torch.version} "
            f'"torch_npu=={npu.version}"'
        )
    return Diagnosis("torch-mismatch", detail, fix, {"torch": torch.version, "torch_npu": npu.version})


def _npu_version(facts: Any) -> str:
    npu = facts.packages.torch_npu
    return npu.version if npu is not None else ""


def _install_of(path: str, installs: Sequence[Any]) -> Optional[Any]:
    for install in installs:
        if path.startswith(install.path.rstrip("/") + "/"):
            return install
    return None


def _source_line(install: Any) -> str:
    return f"source {install.set_env}"


def diagnose(facts: Any) -> Optional[Diagnosis]:
    """The most likely cause of the loader problems in ``facts`` (LibraryFacts), with a fix; None if clean."""
    report = facts.report
    if report is None or report.clean:
        return None
    installs = facts.installs
    missing_cann = [m.name for m in report.missing_libraries if CANN_LIBRARY.match(m.name)]
    if report.missing_libraries:
        names = [m.name for m in report.missing_libraries]
        if missing_cann and not installs:
            return Diagnosis(
                "cann-not-installed",
                f"CANN not installed: {', '.join(names)} not found and no CANN "
                "install under /usr/local/Ascend, $ASCEND_HOME_PATH or ascend_cann_install.info",
                "install the CANN toolkit (Ascend-cann-toolkit_<version>_linux-<arch>.run --install) "
                f"in a version torch_npu {_npu_version(facts)} supports (its compatibility matrix), "
                "then source its set_env.sh",
                {"missing_libraries": names},
            )
        after = facts.after_set_env
        if facts.set_env_used and after is not None:
            still = [m.name for m in after.missing_libraries]
            line = f"source {facts.set_env_used}"
            if not still and after.clean:
                return Diagnosis(
                    "set-env-not-sourced",
                    f"set_env.sh not sourced: {', '.join(names)} not found; "
                    f"checked: after `{line}` every library and symbol resolves",
                    line,
                    {"missing_libraries": names, "set_env": facts.set_env_used},
                )
            if len(still) < len(names):
                return Diagnosis(
                    "set-env-not-sourced",
                    f"set_env.sh not sourced: {', '.join(names)} not found; "
                    f"after `{line}` still missing: {', '.join(still) or 'no library'}"
                    + (f", {len(after.missing_symbols)} symbols unresolved" if after.missing_symbols else ""),
                    line,
                    {
                        "missing_libraries": names,
                        "still_missing_after_set_env": still,
                        "set_env": facts.set_env_used,
                    },
                )
        if facts.set_env_error:
            return Diagnosis(
                "set-env-failed",
                f"{', '.join(names)} not found, and sourcing "
                f"{facts.set_env_used} failed ({facts.set_env_error})",
                f"check {facts.set_env_used}; reinstall CANN if it is broken",
                {"missing_libraries": names},
            )
        where = "; ".join(
            f"{m.name} (needed by {os.path.basename(m.requester)})" for m in report.missing_libraries
        )
        return Diagnosis(
            "library-not-found",
            f"not found on the loader's search path: {where}",
            "add the folder holding them to LD_LIBRARY_PATH, or reinstall the package providing them",
            {"missing_libraries": names},
        )
    return diagnose_symbols(facts, report.missing_symbols)


def diagnose_symbols(facts: Any, symbols: Sequence[Any]) -> Optional[Diagnosis]:
    """Why ``symbols`` (SymbolInfo) stay undefined: an older CANN shadowing a newer one, torch and torch_npu
    builds that do not match, or a missing symbol version."""
    report = facts.report
    installs = facts.installs
    shadowed = [s for s in symbols if s.provided_by]
    if shadowed:
        sym = shadowed[0]
        shadow = next((s for s in report.shadowed if sym.provided_by in s.others), None)
        winner = shadow.winner if shadow else "?"
        old = _install_of(winner, installs)
        new = _install_of(sym.provided_by, installs)
        old_name = f"CANN {old.version or '?'} ({old.path})" if old else os.path.dirname(winner)
        new_name = (
            f"CANN {new.version or '?'} ({new.path})" if new else os.path.dirname(sym.provided_by or "")
        )
        entry = shadow.entry if shadow else ""
        fix = (
            f"remove {entry} from {shadow.via if shadow else 'LD_LIBRARY_PATH'} (it comes before "
            f"{os.path.dirname(sym.provided_by or '')})"
        )
        if new is not None and new.set_env:
            fix += f", then: {_source_line(new)}"
        return Diagnosis(
            "older-cann-first",
            f"older CANN earlier on LD_LIBRARY_PATH than {new_name}: "
            f"{os.path.basename(winner)} is loaded from {old_name}, which lacks {sym.name}",
            fix,
            {"loaded": winner, "provided_by": sym.provided_by, "symbol": sym.name},
        )
    if any(s.provider and TORCH_LIBRARY.match(s.provider) for s in symbols):
        mismatch = _torch_mismatch(facts)
        if mismatch is not None:
            return mismatch
    first = symbols[0] if symbols else None
    if first is not None:
        return Diagnosis(
            "symbol-not-found",
            f"{first.name} is not exported by any loaded library "
            f"(should come from {first.provider or 'an unknown library'})",
            "install the versions of the libraries this object was built against",
            {"symbol": first.name},
        )
    if not report.missing_versions:
        return None
    version = report.missing_versions[0]
    return Diagnosis(
        "version-not-found",
        f"version {version[0]} of {version[1]} not found (required by {version[2]})",
        f"install a {version[1]} that provides {version[0]}",
        {},
    )


def _facts(ctx: CheckContext) -> Any:
    return ctx.facts("libraries")


def install_torch_npu_fix(ctx: CheckContext) -> str:
    """How to get torch_npu, from the facts: nothing to install on a machine without NPUs; CANN first where
    none is installed (torch_npu without CANN breaks even ``import torch``, through torch's backend autoload);
    else the torch_npu built for the installed torch."""
    from npudoctor.checks.npu_smi import npus_on_bus

    npus = npus_on_bus(ctx)
    if npus is not None and not npus:
        return ""  # not an Ascend node: installing torch_npu here only breaks `import torch`
    facts = ctx.facts_or_none("libraries")
    python = ctx.facts_or_none("python")
    torch = python.package("torch") if python is not None and not python.error else None
    wanted = f'pip install "torch_npu=={torch.version.split("+")[0]}.*"' if torch else (
        "pip install torch and the torch_npu built for it (the same release)")
    if facts is not None and not facts.installs:
        return ("install CANN first (Ascend-cann-toolkit_<version>_linux-$(uname -m).run --install, in a version "
                "the torch_npu release supports), source its set_env.sh, then: " + wanted)
    return wanted


@check("LIB001", stage="libraries", title="CANN installed and set_env.sh sourced",
       settings=("versions.python_timeout_s",))
def cann_environment(ctx: CheckContext) -> Iterable[Outcome]:
    """CANN is installed and its set_env.sh has been sourced in this environment.

    torch_npu loads libascendcl.so, libhccl.so, libge_runner.so... from the CANN toolkit (or nnae). They are
    found only through LD_LIBRARY_PATH, which CANN's set_env.sh sets, together with ASCEND_TOOLKIT_HOME,
    ASCEND_HOME_PATH and ASCEND_OPP_PATH (operator packages). Without it, ``import torch_npu`` (and, with
    torch's backend autoload, even ``import torch``) fails with
    ``libhccl.so: cannot open shared object file``.

    Fix: ``source /usr/local/Ascend/ascend-toolkit/set_env.sh`` (the check prints the exact line for the
    install it found on disk); add it to ~/.bashrc or the container's entrypoint. Install CANN first when
    none is found.
    """
    facts = _facts(ctx)
    env = dict(facts.env)
    installs = facts.installs
    npu = facts.packages.torch_npu
    evidence = {
        "installs": [i.path for i in installs],
        **{k: env[k] for k in SOURCED_INSTALL_VARIABLES if k in env},
    }
    if not installs:
        if npu is None:
            yield skip("no CANN install and no torch_npu: not an Ascend training environment", cause=NO_CANN)
            return
        yield fail(
            "cann",
            f"CANN not installed, but torch_npu {npu.version} is",
            evidence,
            fix="install the CANN toolkit (Ascend-cann-toolkit_<version>_linux-<arch>.run --install) "
            "matching torch_npu, then source its set_env.sh",
        )
        return
    var = facts.sourced_by
    with_set_env = [i for i in installs if i.set_env]
    line = _source_line(with_set_env[0]) if with_set_env else ""
    if var is not None:
        yield passed("cann", f"{var}={env[var]}", evidence)
        return
    stale = [k for k in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH") if env.get(k)]
    detail = "set_env.sh not sourced: " + (
        f"{stale[0]}={env[stale[0]]} points at no install"
        if stale
        else "ASCEND_TOOLKIT_HOME / ASCEND_HOME_PATH are unset"
    )
    detail += f"; found {', '.join(i.path + (' (' + i.version + ')' if i.version else '') for i in installs)}"
    if not line:
        detail += "; no set_env.sh found next to them"
    outcome = fail if npu is not None else warn
    yield outcome("cann", detail, evidence, fix=line or "reinstall CANN: its set_env.sh is missing")


def _needs_report(ctx: CheckContext) -> Any:
    facts = _facts(ctx)
    if facts.report is None:
        python = ctx.facts_or_none("python")
        cause = ""
        if facts.packages.torch_npu is None and python is not None and not python.error:
            cause = not_installed("torch_npu", python.where)  # shared with VER003/VER004
        return facts, skip(facts.analysis_error or "no analysis", cause=cause)
    return facts, None


@check("LIB002", stage="libraries", title="torch_npu's shared libraries resolve",
       settings=("libraries.set_env_timeout_s", "versions.python_timeout_s"))
def libraries_resolve(ctx: CheckContext) -> Iterable[Outcome]:
    """Every library torch_npu's ``_C`` extension needs (directly or through libtorch_npu.so) is found.

    The check resolves the load graph the way ld.so does (DT_NEEDED, RPATH/RUNPATH with $ORIGIN,
    LD_LIBRARY_PATH, ld.so.cache, default directories), statically, with torch's own libraries already
    loaded as they are after ``import torch``. A library that is not found is what
    ``ImportError: libhccl.so: cannot open shared object file`` means.

    Fix: it depends on the cause, and the finding says which: source CANN's set_env.sh (checked by
    computing the environment it produces and resolving again), install CANN, or repair LD_LIBRARY_PATH.
    """
    facts, blocked = _needs_report(ctx)
    if blocked:
        yield blocked
        return
    report = facts.report
    evidence = {"root": report.root, "loaded_objects": len(report.loaded)}
    if not report.missing_libraries:
        yield passed("torch_npu", f"{len(report.needed)} DT_NEEDED entries resolve", evidence)
        return
    diagnosis = diagnose(facts)
    missing = [{"name": m.name, "needed_by": m.requester} for m in report.missing_libraries]
    assert diagnosis is not None
    yield fail(
        "torch_npu",
        diagnosis.detail,
        {**evidence, "missing": missing, "diagnosis": diagnosis.kind, **diagnosis.evidence},
        fix=diagnosis.fix,
    )


@check("LIB003", stage="libraries", title="torch_npu's undefined symbols resolve",
       settings=("versions.python_timeout_s",))
def symbols_resolve(ctx: CheckContext) -> Iterable[Outcome]:
    """Every undefined (non-weak) symbol of torch_npu's objects is exported, in the right version, by a
    library the loader picked.

    ``undefined symbol: aclrtGetRecentContext`` means an older libascendcl.so was found first (another CANN
    install earlier on LD_LIBRARY_PATH); ``undefined symbol: _ZN5torch...`` or ``_ZN3c10...`` means torch
    and torch_npu are builds for different torch versions. Symbols are looked up through each library's
    GNU/SysV hash table with glibc's symbol-version rules.

    Fix: the finding names the missing symbol (demangled), the library that should provide it, and either
    the LD_LIBRARY_PATH entry to remove or the ``pip install torch_npu==...`` that matches torch.
    """
    facts, blocked = _needs_report(ctx)
    if blocked:
        yield blocked
        return
    report = facts.report
    if report.clean or (not report.missing_symbols and not report.missing_versions):
        yield passed("torch_npu", f"all undefined symbols of {len(report.loaded)} objects resolve")
        return
    # Symbols that the libraries LIB002 reports as not found would provide are LIB002's business.
    not_found = {m.name for m in report.missing_libraries}
    unexplained = [
        s
        for s in report.missing_symbols
        if not (not_found and s.provider and (s.provider in not_found or CANN_LIBRARY.match(s.provider)))
    ]
    if not unexplained and not report.missing_versions:
        yield skip(
            "blocked by LIB002: symbols of libraries that are not found cannot resolve",
            evidence={"missing_symbols": len(report.missing_symbols)},
        )
        return
    diagnosis = diagnose_symbols(facts, unexplained) if unexplained else diagnose(facts)
    symbols = [
        {
            "symbol": s.name,
            "demangled": s.demangled,
            "object": s.object,
            "version": s.version,
            "should_come_from": s.provider,
            "found_in": s.provided_by,
        }
        for s in unexplained[:20]
    ]
    first = unexplained[0] if unexplained else None
    detail = diagnosis.detail if diagnosis else ""
    if first is not None:
        shown = first.demangled or first.name
        detail = (detail + "; " if detail else "") + (
            f"undefined symbol: {first.name}"
            + (f" ({shown})" if first.demangled else "")
            + f" in {os.path.basename(first.object)}, should come from "
            f"{first.provider or 'an unknown library'}"
        )
        if len(unexplained) > 1:
            detail += f" (+{len(unexplained) - 1} more)"
    evidence = {
        "missing_symbols_count": len(unexplained),
        "missing_symbols": symbols,
        "missing_versions": [list(v) for v in report.missing_versions],
    }
    if diagnosis:
        evidence["diagnosis"] = diagnosis.kind
    yield fail(
        "torch_npu",
        detail,
        evidence,
        fix=diagnosis.fix if diagnosis else "install matching builds of the libraries named above",
    )


@check("LIB004", stage="libraries", title="No CANN library shadowed by another CANN install",
       settings=("versions.python_timeout_s",))
def no_shadowing(ctx: CheckContext) -> Iterable[Outcome]:
    """No library torch_npu loads exists in two CANN installs on the search path.

    With two CANN versions on LD_LIBRARY_PATH (an old toolkit left behind, a container's nnae plus the
    host's toolkit), the first one wins for every library: torch_npu may run against a mix of versions,
    which fails with undefined symbols or, worse, at run time with error codes such as 507011.

    Fix: keep one CANN on LD_LIBRARY_PATH: start a fresh shell and source only the wanted set_env.sh.
    """
    facts, blocked = _needs_report(ctx)
    if blocked:
        yield blocked
        return
    installs = facts.installs
    found = []
    for shadow in facts.report.shadowed:
        winner_install = _install_of(shadow.winner, installs)
        other_installs = {i.path for i in (_install_of(o, installs) for o in shadow.others) if i is not None}
        if winner_install is None and not other_installs:
            continue
        if winner_install is not None and other_installs <= {winner_install.path}:
            continue
        found.append(shadow)
    if not found:
        yield passed(
            "torch_npu",
            f"{len(facts.report.shadowed)} libraries with more than one copy, none across CANN installs",
        )
        return
    for shadow in found:
        yield warn(
            f"lib:{shadow.name}",
            f"{shadow.name} is in several CANN installs; {shadow.winner} wins "
            f"(via {shadow.via} {shadow.entry}) over {', '.join(shadow.others)}",
            {"winner": shadow.winner, "others": list(shadow.others), "via": shadow.via},
            fix="keep only one CANN on LD_LIBRARY_PATH: open a fresh shell and source only its set_env.sh",
        )


# -- level 2 ---------------------------------------------------------------------------------------------
def explain_codes(codes: Sequence[str]) -> List[str]:
    """One line per code from the error-code knowledge base (``checks/error_codes.yaml``), as the log doctor
    explains it: ``EH9999: <title>: <meaning> Fix: <fix>``."""
    lines = []
    for code in codes:
        info = explain(code)
        if info is None:
            continue
        family = "" if info.exact else " (family)"
        fix = f" Fix: {info.fix}" if info.fix else ""
        lines.append(f"{code}{family}: {info.title}: {info.meaning}{fix}")
    return lines


# What an import error says in so many words -> (kind, detail, fix), first match wins.
_IMPORT_ERRORS_SAID = (
    ("No module named 'torch_npu._C'", "no-extension", "No module named 'torch_npu._C'",
     "do not run python from inside the torch_npu source tree (cd elsewhere); otherwise "
     "reinstall torch_npu: pip install --force-reinstall torch_npu"),
    ("No module named 'torch_npu'", "not-installed", "torch_npu is not installed for this interpreter",
     'pip install "torch_npu==<your torch version>.*"'),
    ("Torch not compiled with CUDA enabled", "cuda-device-index",
     "a bare device index (.to(0), device=0) means CUDA in torch",
     "use torch.device('npu:0') / tensor.npu(0) / .to('npu:0'), or "
     "`from torch_npu.contrib import transfer_to_npu` to map cuda calls to npu"),
)


def classify_import_error(text: str) -> Optional[Diagnosis]:
    """Map the text of a failed ``import torch_npu`` / first NPU op to a diagnosis kind (no fix yet)."""
    match = re.search(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file", text)
    if match:
        library = match.group(1)
        return Diagnosis("library-not-found", f"{library}: cannot open shared object file", "", {"library": library})
    match = re.search(r"(\S+\.so[\w.]*): undefined symbol: (\S+)", text)
    if match:
        shared_object, symbol = match.groups()
        return Diagnosis("undefined-symbol", f"{os.path.basename(shared_object)}: undefined symbol: {symbol}", "",
                         {"object": shared_object, "symbol": symbol})
    for said, kind, detail, fix in _IMPORT_ERRORS_SAID:
        if said in text:
            return Diagnosis(kind, detail, fix, {})
    codes = find_codes(text)
    if codes:
        return Diagnosis("cann-error", f"CANN error {', '.join(codes)}", "", {"error_codes": codes})
    return None


def _symbol_diagnosis(symbol: str, ctx: CheckContext) -> Optional[Diagnosis]:
    """Why ``symbol`` is undefined, from its name alone (when the static analysis could not run)."""
    from npudoctor.elf.summary import PYTHON_PROVIDER, provider_hint

    provider = provider_hint(symbol) or ""
    try:
        facts = _facts(ctx)
    except Exception:  # the packages are a bonus here; LIB001..LIB004 report their own errors
        facts = None
    if provider == "libtorch_npu.so":
        npu = facts.packages.torch_npu if facts is not None else None
        return Diagnosis(
            "extension-mismatch",
            "an extension was built against another torch_npu than the "
            f"installed one{' (' + npu.version + ')' if npu else ''}",
            "rebuild the extension against the installed torch_npu (pip install --no-build-isolation "
            "--force-reinstall --no-binary :all: <package>)",
            {"symbol": symbol},
        )
    # A missing Py* symbol in an import error also means torch_npu was built for another torch/Python.
    if (provider == PYTHON_PROVIDER or TORCH_LIBRARY.match(provider)) and facts is not None:
        return _torch_mismatch(facts)
    return None


@check("LIB005", stage="libraries", title="import torch_npu and one NPU op work", level=2,
       settings=("libraries.import_timeout_s", "versions.python_timeout_s"))
def import_works(ctx: CheckContext) -> Iterable[Outcome]:
    """``import torch, torch_npu`` and one small op on the NPU work in a child interpreter.

    The static checks explain why an import would fail; this one runs it (with a timeout, in a separate
    process, TORCH_DEVICE_BACKEND_AUTOLOAD=0 during ``import torch``) and maps the real error text to the
    same diagnoses: ``cannot open shared object file``, ``undefined symbol``, ``No module named
    'torch_npu._C'``, ``Torch not compiled with CUDA enabled`` after ``.to(int)``, and CANN error codes
    (ERR00100, EH9999, EZ9999, 500001, 507011...), which are listed in the evidence.

    Fix: the one the diagnosis names; for CANN error codes, read the plog under ~/ascend/log.
    """
    python = ctx.facts_or_none("python")
    if python is not None and not python.error and python.package("torch_npu") is None:
        missing = not_installed("torch_npu", python.where)
        yield skip(f"{missing}: nothing to import", cause=missing, fix=install_torch_npu_fix(ctx))
        return
    trial = ctx.facts("torch_npu_import")
    evidence: Dict[str, Any] = {"python": trial.python, "stage": trial.last_stage}
    if not trial.ran:
        if trial.error == "timeout":
            yield fail(
                "torch_npu",
                f"{trial.last_stage or 'python'} did not finish within the timeout",
                evidence,
                fix="look for a hung device (npu-smi info) or a lock; raise libraries.import_timeout_s",
            )
        elif trial.error == "output-limit":
            yield error(f"{trial.python} printed far more than the import trial does and was killed", "torch_npu",
                        evidence)
        else:
            yield skip(f"cannot run {trial.python}: {trial.error}")
        return
    if trial.rc == 0 and trial.last_stage.startswith("ok"):
        yield passed(
            "torch_npu",
            f"import torch, torch_npu and one op on the NPU worked ({trial.last_stage})",
            evidence,
        )
        return
    text = trial.output
    codes = find_codes(text)
    evidence["error_codes"] = codes
    evidence["output_tail"] = text.strip()[-1500:]
    explained = explain_codes(codes)
    if explained:
        evidence["error_code_meaning"] = explained
    found = classify_import_error(text)
    fix = found.fix if found else ""
    if found and found.kind == "not-installed":
        fix = install_torch_npu_fix(ctx) or "run on a node with Ascend NPUs"
    said = first_error_line(text)  # the child's own first error, when no known diagnosis explains it
    detail = f"{trial.last_stage} failed" + (
        f": {found.detail}" if found else f" (exit {trial.rc})" + (f": {said}" if said else ""))
    if not found and said:
        fix = install_hints.hint_for_error(said) or ""
    if found and found.kind in ("library-not-found", "undefined-symbol"):
        # The static analysis knows why: reuse its diagnosis and fix.
        static = (
            _symbol_diagnosis(found.evidence["symbol"], ctx) if found.kind == "undefined-symbol" else None
        )
        if static is None:
            try:
                static = diagnose(_facts(ctx))
            except Exception:  # the static facts are a bonus here; their own checks report their errors
                static = None
        if static is not None:
            detail += f"; {static.detail}"
            fix = static.fix
            evidence["diagnosis"] = static.kind
    if found and not fix:
        fix = "see the CANN plog (~/ascend/log/debug/plog) for the error codes listed in the evidence"
    yield fail("torch_npu", detail, evidence, fix=fix or "see the output in the evidence")
