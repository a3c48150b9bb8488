"""Build hook: compile the optional C parts (``npudoctor/elf/_resolver.c``, ``npudoctor/logs/_plogscan.c``) into
the wheel.

npudoctor is pure Python; the resolver makes ``npudoctor libs`` and the libraries checks about ten times faster
on torch-sized load graphs (see bench/bench_libs.py), the plog pass makes ``logs scan`` 3-5x faster on plogs
(bench/bench_logs_scan.py). When there is no C compiler or no Python headers, or when
NPUDOCTOR_PURE_PYTHON_BUILD=1 is set, the build goes on without them (with a warning) and the same
pure-Python code answers. An editable install (``pip install -e .``) puts the module next to
its source; run that again after editing a C file (a test fails while a built module is stale).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# The compiled parts, each next to the Python code that gives the same answers without it: the ELF resolver
# (``npudoctor libs``) and the log scanner's pass over plog chunks (``logs scan``).
SOURCES = (Path("npudoctor/elf/_resolver.c"), Path("npudoctor/logs/_plogscan.c"))


def source_digest(source: Path) -> str:
    """What the built module reports as SOURCE_SHA256: the C file it was compiled from."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


def compile_commands(source: Path, target: Path) -> List[List[str]]:
    """The compiler Python was built with (LDSHARED: compiles and links in one step), then plain cc/gcc."""
    include = sysconfig.get_paths()["include"]
    flags = ["-O2", "-fPIC", "-std=c99", f"-I{include}", f'-DSOURCE_SHA256="{source_digest(source)}"']
    commands = []
    ldshared = shlex.split(sysconfig.get_config_var("LDSHARED") or "")
    libraries = ["-ldl"]  # dlopen: the demangler comes from libstdc++ when it is there
    if ldshared:
        commands.append([*ldshared, *flags, str(source), *libraries, "-o", str(target)])
    for compiler in ("cc", "gcc"):
        if shutil.which(compiler) and compiler not in ldshared[:1]:
            commands.append([compiler, "-shared", *flags, str(source), *libraries, "-o", str(target)])
    return commands


def build_extension(source: Path, target: Path) -> Optional[str]:
    """Compile ``source`` into ``target``; None on success, else why it could not be built."""
    reasons = []
    for command in compile_commands(source, target):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{command[0]}: {exc}")
            continue
        if done.returncode == 0:
            return None
        said = (done.stderr or done.stdout).strip().splitlines()
        reasons.append(f"{command[0]}: {said[-1] if said else f'exit status {done.returncode}'}")
    return "; ".join(reasons) or "no C compiler found"


class CompiledResolverHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: Dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("NPUDOCTOR_PURE_PYTHON_BUILD"):
            return
        root = Path(self.root)
        self._tmp = tempfile.TemporaryDirectory(prefix="npudoctor-build-")
        for source in SOURCES:
            name = source.stem + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
            module_path = (source.parent / name).as_posix()
            # an editable install imports it from the source tree
            target = root / module_path if version == "editable" else Path(self._tmp.name) / name
            why = build_extension(root / source, target)
            if why is not None:
                self.app.display_warning(f"npudoctor: {module_path} not built ({why}); using pure Python")
                continue
            if version != "editable":
                build_data["force_include"][str(target)] = module_path
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: Dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()
