"""The one place that decides whether the compiled part of the ELF layer is used.

``npudoctor.elf._resolver`` is built from ``_resolver.c`` at install when a C compiler is there (see
hatch_build.py). Without it, the pure-Python code gives the same answers, about ten times slower on a
torch-sized load graph. NPUDOCTOR_PURE_PYTHON=1 ignores it (to compare the two, or to rule it out).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import List, Optional

PURE_PYTHON_VARIABLE = "NPUDOCTOR_PURE_PYTHON"


_imported: List[Optional[ModuleType]] = []  # the import's outcome, once tried (a failed import is not cached)


def compiled_resolver() -> Optional[ModuleType]:
    """``npudoctor.elf._resolver``, or None when it is not built or NPUDOCTOR_PURE_PYTHON is set (read at
    every call: tests compare both paths in one process)."""
    if os.environ.get(PURE_PYTHON_VARIABLE):
        return None
    if not _imported:
        try:
            from npudoctor.elf import _resolver
        except ImportError:
            _imported.append(None)
        else:
            _imported.append(_resolver)
    return _imported[0]
