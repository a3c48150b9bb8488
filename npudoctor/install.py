"""How npudoctor was installed, and the install hint that matches it (a checkout: ``pip install -e
'/path/to/npudoctor[train]'``; a wheel: ``pip install 'npudoctor[train]'``).

The base install brings what every command that does not train needs (click, rich, pyyaml, psutil, pandas,
textual); ``[train]`` brings torch's companions for the training commands (numpy) and torch itself, which
on an NPU node must be the build its torch_npu was made for, and elsewhere a CPU build (an open ``torch``
requirement on x86-64 Linux pulls a CUDA build of several GB). ``[prof]`` adds pyarrow, the profiling
doctor's streaming reader for multi-GB tables (pandas' chunked reader does without it).
No heavy import here: the CLI's safety net for a missing module uses it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

# Optional (or base) modules -> the extra that brings them ("" = the base install).
MODULE_EXTRA = {
    "torch": "train",
    "numpy": "train",
    "pyarrow": "prof",
    "pandas": "",
    "textual": "",
    "psutil": "",
    "yaml": "",
    "rich": "",
    "click": "",
}
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def checkout_root() -> Optional[Path]:
    """The source checkout npudoctor runs from (an editable install or PYTHONPATH), None for a wheel."""
    root = Path(__file__).resolve().parent.parent
    try:
        with open(root / "pyproject.toml", encoding="utf-8") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    return root if 'name = "npudoctor"' in head else None


def extra_hint(extra: str = "") -> str:
    """The pip command that installs npudoctor with ``extra`` the way this copy was installed."""
    root = checkout_root()
    suffix = f"[{extra}]" if extra else ""
    if root is None:
        return f"pip install 'npudoctor{suffix}'"
    where = "." if Path(os.getcwd()).resolve() == root else str(root)
    return f"pip install -e '{where}{suffix}'"


def torch_npu_version() -> Optional[str]:
    """The torch_npu installed beside this interpreter (package metadata only: importing it needs CANN)."""
    from importlib import metadata

    try:
        return metadata.version("torch_npu")
    except metadata.PackageNotFoundError:
        return None


def torch_hint() -> str:
    """How to install torch here, one line: the release the installed torch_npu was built for, else a CPU build."""
    npu = torch_npu_version()
    if npu is not None:
        torch = _torch_built_for(npu)
        if torch is not None:
            return f"pip install torch=={torch}   # the torch torch_npu {npu} was built for"
        return f"install the torch release torch_npu {npu} was built for (`npudoctor check` names it in VER003)"
    return (f"pip install torch --index-url {CPU_TORCH_INDEX}   # a CPU build (a plain `pip install torch` on "
            "x86-64 Linux pulls a CUDA build of several GB); on an NPU node, the torch your torch_npu was built for")


def _torch_built_for(torch_npu: str) -> Optional[str]:
    """The PyTorch release the compatibility matrix (checks/compat_matrix.yaml) pairs with ``torch_npu``."""
    from npudoctor import knowledge
    from npudoctor.parsers.versions import parse_version

    wanted = parse_version(torch_npu)
    for row in knowledge.load("compat_matrix")["releases"]:
        if wanted is not None and parse_version(str(row["torch_npu"])) == wanted:
            return str(row["torch"])
    return None


def train_hint() -> str:
    """What the training commands need, in one line: torch first (the right build), then the [train] extra
    (numpy), so that pip does not pick a torch itself."""
    command, _, note = torch_hint().partition("   # ")
    line = f"{command} && {extra_hint('train')}" if command.startswith("pip ") else f"{extra_hint('train')}; {command}"
    return f"{line}   # {note}" if note else line


def require(*modules: str) -> None:
    """Raise ModuleNotFoundError for the first of ``modules`` this interpreter cannot import (found by spec,
    nothing imported): a command checks what it needs before it starts children that would fail one by one.
    The CLI turns the error into one line with :func:`missing_module_hint`."""
    from importlib.util import find_spec

    for module in modules:
        if find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named '{module}'", name=module)


def missing_module_hint(module: str) -> Optional[str]:
    """The install hint for a missing module npudoctor knows, None for any other."""
    root = module.split(".")[0]
    if root not in MODULE_EXTRA:
        return None
    extra = MODULE_EXTRA[root]
    if extra == "train":
        return train_hint()
    if not extra:
        return f"{root} comes with npudoctor itself: reinstall it ({extra_hint()})"
    return extra_hint(extra)


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def hint_for_error(line: str) -> Optional[str]:
    """The install hint that fits a child's error line ("RuntimeError: Numpy is not available",
    "ModuleNotFoundError: No module named 'torch_npu'"), None when it is not a missing module."""
    missing = _NO_MODULE.search(line or "")
    if missing:
        name = missing.group(1)
        if name.split(".")[0] == "torch_npu":
            return ("install the torch_npu built for this torch and the CANN in use (`npudoctor check` names "
                    "it in VER003/VER004), and source CANN's set_env.sh")
        return missing_module_hint(name)
    if "Numpy is not available" in (line or "") or "Failed to initialize NumPy" in (line or ""):
        return f"numpy is missing beside torch: {extra_hint('train')}   # [train] brings numpy"
    return None
