"""The one place that decides whether the compiled part of the ELF layer is used.

``npudoctor.elf._resolver`` is built from ``_resolver.c`` at install when a C compiler is there (see
hatch_build.py). Without it, the pure-Python code gives the same answers, about ten times slower on a
torch-sized load graph. NPUDOCTOR_PURE_PYTHON=1 ignores it (to compare the two, or to rule it out).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Dict, Optional

PURE_PYTHON_VARIABLE = "NPUDOCTOR_PURE_PYTHON"


_imported: Dict[str, Optional[ModuleType]] = {}  # each import's outcome, once tried


def compiled_module(name: str) -> Optional[ModuleType]:
    """The compiled module ``name`` (``npudoctor.elf._resolver``, ``npudoctor.logs._plogscan``), or None when
    it is not built or NPUDOCTOR_PURE_PYTHON is set (read at every call: tests compare both paths in one
    process)."""
    if os.environ.get(PURE_PYTHON_VARIABLE):
        return None
    if name not in _imported:
        try:
            _imported[name] = importlib.import_module(name)
        except ImportError:
            _imported[name] = None
    return _imported[name]


def compiled_resolver() -> Optional[ModuleType]:
    """``npudoctor.elf._resolver``, or None (see :func:`compiled_module`)."""
    return compiled_module("npudoctor.elf._resolver")
