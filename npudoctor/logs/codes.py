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
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npudoctor import knowledge

# What a code looks like, per family; used to normalise user input and to find codes in text.
CODE_SHAPE = re.compile(r"^(?:[EW][0-9A-Z]\d{4}|ERR\d{5}|\d{5,10}|0x[0-9a-fA-F]{1,16})$")
# How codes appear in text: E/W family codes and ERR codes as words (groups 1+2 form the code) ...
CODE = re.compile(r"([EW])(?<![A-Za-z0-9_][EW])([0-9A-Z]\d{4}|RR\d{5})(?!\d)")
# ... numbers only in the contexts CANN and torch_npu print codes in, and only code-shaped: six digits of the
# AscendCL families (1xxxxx parameter, 2xxxxx resource, 5xxxxx internal) or a 10-digit status ...
NUMERIC_CODE = re.compile(r"(?i:error ?code is|errcode=|errorcode=|result\[|(?:runtime|failed,|ge) result = |"
                          r"ErrorNo: )\s*([125]\d{5}|\d{10})(?!\d)")
# ... and HCCL's errNo[0x...] status words.
HCCL_ERRNO = re.compile(r"errNo\[(0x[0-9a-fA-F]{1,16})\]")


def find_codes(text: str) -> List[str]:
    """Every error code in ``text`` in order of appearance, once each, as the log scanner finds them.

    >>> find_codes("EH9999: Inner Error! ... build op model failed, result = 500001 ... EH9999")
    ['EH9999', '500001']
    >>> find_codes("ret = 123456 (not a code context); HcclAllreduce errNo[0x0000000005010009]")
    ['0x05010009']
    """
    found = [(m.start(), m.group(1) + m.group(2)) for m in CODE.finditer(text)]
    found += [(m.start(1), m.group(1)) for m in NUMERIC_CODE.finditer(text)]
    found += [(m.start(1), normalize(m.group(1))) for m in HCCL_ERRNO.finditer(text)]
    return list(dict.fromkeys(code for _position, code in sorted(found)))


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


def default_severity(code: str) -> str:
    """The severity of a code whose entry gives none, or of an unknown code: W codes warn, the rest are errors."""
    return "warn" if code.startswith("W") else "error"


def _info(code: str, entry: Mapping[str, Any], exact: bool) -> CodeInfo:
    severity = str(entry.get("severity") or default_severity(code))
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
