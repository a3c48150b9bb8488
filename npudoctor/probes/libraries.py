"""Probes of the libraries stage: where torch / torch_npu are installed, which CANN installs exist, and
how the dynamic loader would resolve torch_npu's shared objects (statically, never executing them).

Equivalent shell commands::

    python3 -c 'import importlib.metadata as m; print(m.version("torch_npu"), m.files("torch_npu"))'
    ls /usr/local/Ascend/ascend-toolkit/latest /usr/local/Ascend/nnae/latest /usr/local/Ascend/cann-*
    cat /etc/Ascend/ascend_cann_install.info
    ldd -r .../site-packages/torch_npu/_C.cpython-*.so          (analysed statically instead)
    bash -c 'source /usr/local/Ascend/ascend-toolkit/set_env.sh; env -0'
    python3 -c 'import torch, torch_npu; torch.ones(2).npu() + 1'   (--level 2 only)
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor.elf.reader import ElfError
from npudoctor.elf.summary import LinkReport
from npudoctor.knowledge import setting
from npudoctor.parsers.keyvalue import cann_version_from_cfg
from npudoctor.parsers.python_packages import PackageInfo
from npudoctor.probes import provides
from npudoctor.probes.ascend_layout import (
    ASCEND,
    CANN_INSTALL_RECORD,
    HOME_VARIABLES,
    INFO_FILES,
    SOURCED_INSTALL_VARIABLES,
)
from npudoctor.probes.linkage import analyse_file, find_set_env, search_env
from npudoctor.probes.sources import Command
from npudoctor.probes.versions import read_version_file

# Environment variables set_env.sh exports; any of them pointing at an install means it was sourced.
ASCEND_ENV = (*SOURCED_INSTALL_VARIABLES, "ASCEND_AICPU_PATH")

@dataclass(frozen=True)
class PythonPackages:
    python: Optional[str]  # the interpreter that was asked
    executable: Optional[str] = None  # its real path (an ELF file: Python's own symbols come from it)
    torch: Optional[PackageInfo] = None
    torch_npu: Optional[PackageInfo] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class CannInstall:
    path: str  # e.g. /usr/local/Ascend/ascend-toolkit/latest
    set_env: Optional[str]  # the set_env.sh that configures it, when found
    version: Optional[str] = None
    found_by: str = ""  # "default location", "$ASCEND_HOME_PATH", "ascend_cann_install.info"


@dataclass(frozen=True)
class LibraryFacts:
    packages: PythonPackages
    installs: Tuple[CannInstall, ...]
    env: Mapping[str, str]  # LD_LIBRARY_PATH and the ASCEND_* variables as the checks saw them
    # None when binaries cannot be read (a replayed bundle), with the reason in analysis_error.
    report: Optional[LinkReport] = None
    analysis_error: Optional[str] = None
    # The same analysis in the environment set_env.sh produces, when it could change the verdict.
    after_set_env: Optional[LinkReport] = None
    set_env_used: Optional[str] = None
    set_env_error: Optional[str] = None
    # The ASCEND_* variable that points at an existing install (set_env.sh was sourced), if any.
    sourced_by: Optional[str] = None


def installed_packages(ctx: Any) -> PythonPackages:
    """torch and torch_npu of the target interpreter, from the shared ``python`` facts (package metadata,
    never imported)."""
    facts = ctx.facts("python")
    if facts.error:
        return PythonPackages(facts.interpreter, error=facts.error)
    return PythonPackages(facts.interpreter, facts.executable, facts.package("torch"), facts.package("torch_npu"))


def _install_version(runner: Any, path: str) -> Optional[str]:
    """The CANN version of an install: ``version=`` of its install.info, else the public version in
    version.cfg (``[7.6.0.1.220:8.0.0]`` is CANN 8.0.0, not 7.6)."""
    listing = runner.list_dir(path)
    for entry in listing.entries:
        if entry.endswith("-linux"):
            for info in INFO_FILES.values():
                version = read_version_file(runner, f"{path}/{entry}/{info}").get("version")
                if version:
                    return version
    return cann_version_from_cfg(read_version_file(runner, f"{path}/version.cfg").values)




def find_cann_installs(runner: Any, env: Mapping[str, str]) -> Tuple[CannInstall, ...]:
    """Every CANN install on the node, by the places set_env.sh and the installers use."""
    candidates: List[Tuple[str, str]] = []
    for var in HOME_VARIABLES:
        if env.get(var):
            candidates.append((env[var].rstrip("/"), f"${var}"))
    bases = [ASCEND]
    info = runner.read_text(CANN_INSTALL_RECORD).text
    if info:
        match = re.search(r"^Install_Path=(\S+)", info, re.M)
        if match and match.group(1).rstrip("/") != ASCEND:
            bases.insert(0, match.group(1).rstrip("/"))
    for base in bases:
        found_by = "default location" if base == ASCEND else "ascend_cann_install.info"
        candidates += [
            (f"{base}/ascend-toolkit/latest", found_by),
            (f"{base}/nnae/latest", found_by),
            (f"{base}/cann", found_by),
        ]
        entries = runner.list_dir(base).entries
        candidates += [(f"{base}/{e}", found_by) for e in entries if e.startswith("cann-")]
        for product in ("ascend-toolkit", "nnae"):
            candidates += [
                (f"{base}/{product}/{e}", found_by)
                for e in runner.list_dir(f"{base}/{product}").entries
                if re.match(r"\d", e)
            ]
    installs: List[CannInstall] = []
    seen = set()
    for path, found_by in candidates:
        if path in seen:
            continue
        seen.add(path)
        info_path = runner.path_info(path)
        if not (info_path.exists and info_path.kind == "dir"):
            continue
        installs.append(
            CannInstall(path, find_set_env(runner, path), _install_version(runner, path), found_by)
        )
    return tuple(installs)


def sourced_by(runner: Any, env: Mapping[str, str], installs: Sequence[CannInstall]) -> Optional[str]:
    """The ASCEND_* variable set_env.sh exports that points at an existing install, if any."""
    paths = {os.path.normpath(i.path) for i in installs}
    for var in SOURCED_INSTALL_VARIABLES:
        value = (env.get(var) or "").rstrip("/")
        if not value:
            continue
        home = os.path.normpath(value[: -len("/opp")] if value.endswith("/opp") else value)
        info = runner.path_info(home)
        if home in paths or (info.exists and info.kind == "dir"):
            return var
    return None


def set_env_environment(
    runner: Any, set_env: str, base_env: Mapping[str, str], timeout_s: float
) -> Tuple[Optional[Dict[str, str]], Optional[str]]:
    """The environment ``source set_env.sh`` produces, computed in a child bash (nothing else runs)."""
    script = 'source "$1" >/dev/null 2>&1; env -0'
    local = runner.local_path(set_env) or set_env
    result = runner.run(
        Command(
            ("bash", "-c", script, "npudoctor", local),
            timeout_s=timeout_s,
            env=tuple(sorted(base_env.items())),
        )
    )
    if not result.ran or result.rc != 0:
        return None, result.error or f"exit {result.rc}"
    env: Dict[str, str] = {}
    for item in result.stdout.split("\0"):
        key, sep, value = item.partition("=")
        if sep and key:
            env[key] = value
    return env, None


def _roots(npu: PackageInfo) -> List[str]:
    roots = []
    ext = npu.find(r"^torch_npu/_C[.\w-]*\.so$")
    if ext:
        roots.append(ext)
    else:
        lib = npu.find(r"^torch_npu/lib/libtorch_npu\.so$")
        if lib:
            roots.append(lib)
    return roots


@provides("libraries")
def library_facts(ctx: Any) -> LibraryFacts:
    """torch_npu's load graph as ld.so would resolve it now, and after sourcing set_env.sh."""
    runner = ctx.runner
    env = runner.environ()
    packages = installed_packages(ctx)
    installs = find_cann_installs(runner, env)
    shown = {k: env[k] for k in ("LD_LIBRARY_PATH", *ASCEND_ENV) if k in env}
    facts: Dict[str, Any] = {
        "packages": packages,
        "installs": installs,
        "env": shown,
        "sourced_by": sourced_by(runner, env, installs),
    }
    npu = packages.torch_npu
    if npu is None:
        return LibraryFacts(**facts, analysis_error="torch_npu is not installed")
    roots = _roots(npu)
    if not roots:
        return LibraryFacts(
            **facts,
            analysis_error=f"torch_npu {npu.version} has no _C extension or "
            "lib/libtorch_npu.so in its file list",
        )
    if runner.local_path(roots[0]) is None:
        return LibraryFacts(**facts, analysis_error="binary analysis needs the live node")
    preload = [
        p
        for p in (
            packages.executable,
            packages.torch.find(r"^torch/_C[.\w-]*\.so$") if packages.torch else None,
        )
        if p
    ]
    search = search_env(runner)
    try:
        report = analyse_file(runner, roots[0], search, preload)
    except ElfError as exc:
        return LibraryFacts(**facts, analysis_error=str(exc))
    facts["report"] = report
    if report.clean:
        return LibraryFacts(**facts)
    # Would sourcing set_env.sh fix it? Compute that environment and resolve again.
    install = next((i for i in installs if i.set_env), None)
    if install is None or install.set_env is None:
        return LibraryFacts(**facts)
    timeout = float(setting(ctx.profile, "libraries.set_env_timeout_s"))
    new_env, problem = set_env_environment(runner, install.set_env, env, timeout)
    facts["set_env_used"] = install.set_env
    if new_env is None:
        return LibraryFacts(**facts, set_env_error=problem)
    ld_path = new_env.get("LD_LIBRARY_PATH", "")
    try:
        after = analyse_file(runner, roots[0], search._replace(ld_library_path=ld_path), preload)
    except ElfError as exc:
        return LibraryFacts(**facts, set_env_error=str(exc))
    return LibraryFacts(**facts, after_set_env=after)


# -- level 2: import in a child process ------------------------------------------------------------------
IMPORT_SCRIPT = r"""
import sys, traceback
def stage(name):
    print("NPUDOCTOR-STAGE " + name, flush=True)
try:
    stage("import torch")
    import torch
    stage("import torch_npu")
    import torch_npu
    stage("device op")
    x = torch.ones(2).npu() + 1
    torch.npu.synchronize()
    stage("ok " + str(x.cpu().tolist()))
except BaseException:
    traceback.print_exc()
    sys.stdout.flush()
    sys.exit(3)
"""


@dataclass(frozen=True)
class ImportTrial:
    python: str
    ran: bool
    rc: Optional[int]
    last_stage: str  # "import torch", "import torch_npu", "device op", "ok ..."
    output: str
    error: Optional[str] = None  # "timeout", "not-found", ...


@provides("torch_npu_import")
def import_trial(ctx: Any) -> ImportTrial:
    """Import torch and torch_npu in a child interpreter and run one op on the NPU (``--level 2``).

    torch is imported with TORCH_DEVICE_BACKEND_AUTOLOAD=0 so that a broken torch_npu fails at
    ``import torch_npu`` (where its error is clear) rather than inside ``import torch``.
    """
    python = installed_packages(ctx).python or sys.executable
    env = dict(ctx.runner.environ())
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    timeout = float(setting(ctx.profile, "libraries.import_timeout_s"))
    result = ctx.runner.run(
        Command((python, "-c", IMPORT_SCRIPT), timeout_s=timeout, env=tuple(sorted(env.items())))
    )
    stages = re.findall(r"^NPUDOCTOR-STAGE (.+)$", result.stdout, re.M)
    output = re.sub(r"^NPUDOCTOR-STAGE .*\n?", "", result.output, flags=re.M)
    return ImportTrial(python, result.ran, result.rc, stages[-1] if stages else "", output, result.error)
