"""The error-code knowledge base (``checks/error_codes.yaml``): what a CANN / torch_npu code means.

Pure API for any part of npudoctor that meets a code (log scan, library doctor, import checks)::

    >>> from npudoctor.logs.codes import explain
    >>> info = explain("507011")
    >>> info.title, info.exact
    ('ACL_ERROR_RT_MODEL_EXECUTE', True)
    >>> explain("EI0099").title      # unknown code: explained by its family (longest known prefix)
    'HCCL errors'
    >>> explain("hello") is None
    True
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from npudoctor import knowledge

# What a code looks like, per family; used to normalise user input and to find codes in text.
CODE_SHAPE = re.compile(r"^(?:[EW][0-9A-Z]\d{4}|ERR\d{5}|\d{5,10}|0x[0-9a-fA-F]{1,16})$")


@dataclass(frozen=True)
class CodeInfo:
    """What a code means. ``exact`` is False when only the code's family (prefix) is known."""

    code: str
    title: str
    meaning: str
    cause: str = ""
    fix: str = ""
    severity: str = "error"  # "error" or "warn"
    exact: bool = True

    def to_dict(self) -> Dict[str, Any]:
        return {"code": self.code, "title": self.title, "meaning": self.meaning, "cause": self.cause,
                "fix": self.fix, "severity": self.severity, "exact": self.exact}


def normalize(code: str) -> str:
    """Canonical spelling: upper-case letters, HCCL errNo as ``0x`` + 8 hex digits."""
    code = code.strip()
    if code.lower().startswith("0x"):
        try:
            return f"0x{int(code, 16):08x}"
        except ValueError:
            return code
    return code.upper()


def _info(code: str, entry: Mapping[str, Any], exact: bool) -> CodeInfo:
    severity = str(entry.get("severity") or ("warn" if code.startswith("W") else "error"))
    return CodeInfo(code=code, title=str(entry.get("title", "")), meaning=str(entry.get("meaning", "")),
                    cause=str(entry.get("cause", "")), fix=str(entry.get("fix", "")), severity=severity,
                    exact=exact)


@functools.lru_cache(maxsize=1)
def _base() -> Tuple[Dict[str, Mapping[str, Any]], Dict[str, Mapping[str, Any]]]:
    data = knowledge.load("error_codes") or {}
    codes = {normalize(str(k)): v for k, v in (data.get("codes") or {}).items()}
    families = {str(k): v for k, v in (data.get("families") or {}).items()}
    return codes, families


def explain(code: str) -> Optional[CodeInfo]:
    """Explain ``code`` (``EZ9999``, ``EI0006``, ``ERR00100``, ``507011``, ``0x05000004``).

    Returns the exact entry when the code is known, otherwise the entry of its family (the longest known
    prefix, e.g. ``EI`` for HCCL, ``5`` for AscendCL internal errors) with ``exact=False``, or None when the
    text is not an error code at all.
    """
    code = normalize(code)
    if not CODE_SHAPE.match(code):
        return None
    codes, families = _base()
    if code in codes:
        return _info(code, codes[code], exact=True)
    if code.startswith("0x"):  # HCCL errNo: the module byte is the first non-zero one
        prefixes: Tuple[str, ...] = ("0x0" + code[2:].lstrip("0")[:1],)
    elif code.isdigit() and len(code) != 6:  # numeric families are the 6-digit AscendCL codes only
        prefixes = ()
    else:
        prefixes = tuple(code[:n] for n in range(len(code), 0, -1))
    for prefix in prefixes:
        if prefix in families:
            return _info(code, families[prefix], exact=False)
    return None
