"""Every error code CANN, the ACL runtime, HCCL, DCMI and torch_npu define, and what it means: one lookup.

Two knowledge files: ``checks/vendor_codes.yaml`` holds the facts of every publicly defined code (number,
name, component, class, with the vendor source each comes from); ``checks/error_codes.yaml`` holds what we
wrote about a code or a family (meaning, cause, fix), only where a source or a real sample backs it. On a
node, CANN's own registry texts may be given too (:func:`explain`'s ``installed``).

Pure API for any part of npudoctor that meets a code (log scan, library doctor, import checks)::

    >>> from npudoctor.logs.codes import explain
    >>> info = explain("507011")
    >>> info.title, info.exact
    ('ACL_ERROR_RT_MODEL_EXECUTE', True)
    >>> explain("0x7bc8b").code, explain("8005").code, explain("4294959291").code   # any spelling
    ('507019', '-8005', '-8005')
    >>> explain("EI0099").title      # a code nobody defines: explained by its family (longest known prefix)
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
from npudoctor.logs import fault_codes

#: CANN's own registry texts read on a node: code -> {title, message, cause, solution, source}
Installed = Mapping[str, Mapping[str, Any]]

# How codes appear in text: E/W family codes and ERR codes as words (groups 1+2 form the code), also as pastes
# leave them: after a JSON-escaped newline (`\\nEZ9999`), or glued to a lower-case word when the code's colon
# follows (`...for more informationE10001:`) ...
CODE = re.compile(r"([EW])(?:(?<![A-Za-z0-9_][EW])|(?<=\\[nrt][EW])|(?<=[a-z][EW])(?=[0-9A-Z]\d{4}:))"
                  r"([0-9A-Z]\d{4}|RR\d{5})(?!\d)")
# ... numbers in the contexts CANN and torch_npu print codes in, and only code-shaped: six digits of the
# AscendCL families (1xxxxx parameter, 2xxxxx resource, 5xxxxx internal) or a 10-digit status ...
NUMERIC_CODE = re.compile(r"(?i:error ?code is:?|(?:err|error|ret)?code ?=|result\[|\bret\[|"
                          r"(?:runtime|failed,|ge) result = |ErrorNo: |retcode=)\s*([125]\d{5}|\d{10})(?!\.?\d)")
# ... in looser contexts (an application's check macro `failed: 507034`, `(507035)`, `ret=`, `(error N)`)
# only numbers a vendor table defines (a size or a pid in brackets is not a code) ...
# (In brackets only alone: `(507035)`, never a record's `(507011,python)` pid.)
LOOSE_CODE = re.compile(r"(?i:failed[:,]? |error |\bret(?: is)? ?[=:]? ?|code ?: ?)([125]\d{5})(?!\.?\d)"
                        r"|\(([125]\d{5})\)")
# ... the task scheduler's hex codes of runtime lines (`retCode=0x31, [vector core exception]`) and of the
# device's exception report (`Other info[0]:... error code=0x26`) ...
# (`retcode=0x70 10006` is a longer code a paste split, not 0x70.)
TS_CODE = re.compile(r"(?i:retCode=|error code=)(0x[0-9a-fA-F]{1,4})(?![0-9a-fA-F]| \d)")
# ... DCMI's negative codes as npu-smi prints them (`dcmi module initialize failed. ret is -8020`) ...
DCMI_CODE = re.compile(r"(?i:\bret(?: is|=|:)? ?)(-80\d\d)(?!\d)")
# ... a code by its vendor name (`ACL_ERROR_RT_MEMORY_ALLOCATION`, `DRV_ERROR_OUT_OF_MEMORY`, `HCCL_E_TIMEOUT`) ...
NAMED_CODE = re.compile(r"\b(?:ACL_ERROR_|DRV_ERROR_|HCCL_E_|DCMI_ERR_CODE_)[A-Z0-9_]+\b")
# ... the driver's return codes, as the runtime prints them (`halMemAlloc failed ... drvRetCode=6`) ...
DRV_CODE = re.compile(r"drvRetCode[=:] ?(\d{1,3})(?!\d)")
# ... HCCL's return codes as torch_npu prints them (`HCCL function error: HcclAllReduce(...), error code is 7`)
HCCL_RESULT = re.compile(r"HCCL function error: [^\n]{0,300}?, error code is (\d{1,2})(?!\d)")
# ... and HCCL's errNo[0x...] status words.
HCCL_ERRNO = re.compile(r"errNo\[(0x[0-9a-fA-F]{1,16})\]")

# What the user may type or a log may print for one code (normalised by canonical()).
_EW_CODE = re.compile(r"[EW][0-9A-Z]\d{4}|ERR\d{5}")
_HCCL_SPELLING = re.compile(r"(?:HCCL(?:RESULT)?|HCCL ERROR CODE|ERROR CODE)[ :=#]*(\d{1,2})")
_DRV_SPELLING = re.compile(r"(?:DRV|DRVRETCODE|DRIVER)[ :=#]*(\d{1,3})")
_HEX = re.compile(r"0X[0-9A-F]{1,16}")
_DECIMAL = re.compile(r"[+-]?\d{1,10}")
# Kept for callers that test a spelling (--fail-on): a code is what canonical() accepts.
CODE_SHAPE = re.compile(r"^(?:[EW][0-9A-Z]\d{4}|ERR\d{5}|-?\d{1,10}|0x[0-9a-fA-F]{1,16}|HCCL \d{1,2}"
                        r"|DRV \d{1,3})$")
# -1 printed unsigned (4294967295) or signed, and 0: a generic failure / success, never a code of its own.
NOT_A_CODE = ("-1", "0")
# The families of the numeric tables, in the order a 6-digit number is looked up.
NUMERIC_FAMILIES = ("acl", "runtime", "ge")
FAMILY_NAMES = {"acl": "AscendCL", "runtime": "runtime", "ge": "GE", "hccl": "HCCL", "dcmi": "DCMI",
                "ts": "task scheduler", "torch_npu": "torch_npu", "registry": "CANN error registry",
                "driver": "driver"}
# Who "reports" a code of each numeric family, in a sentence.
_REPORTER = {"acl": "AscendCL", "runtime": "The runtime", "ge": "GE", "hccl": "HCCL", "dcmi": "DCMI",
             "driver": "The driver"}
# The words of a vendor name that say only which table it is in.
_NAME_PREFIX = re.compile(r"^(?:ACL_ERROR_(?:RT_|GE_)?|ACLNN_|HCCL_E_|DCMI_ERR_CODE_|TS_ERROR_|TS_|ACL_|DRV_ERROR_"
                          r"|DEV_ERROR_)")


@dataclass(frozen=True)
class CodeInfo:
    """What a code means. ``exact`` is False when only the code's family (prefix) is known. ``written`` says
    whether meaning/fix were written for this very code (else they are its family's). ``family`` names the
    definitions it belongs to, ``source`` where its name and text come from."""

    code: str
    title: str
    meaning: str
    cause: str = ""
    fix: str = ""
    severity: str = "error"  # "error", "warn" or "info" (not an error code at all: -1, 0)
    exact: bool = True
    family: str = ""
    source: str = ""
    written: bool = True

    def to_dict(self) -> Dict[str, Any]:
        return {"code": self.code, "title": self.title, "meaning": self.meaning, "cause": self.cause,
                "fix": self.fix, "severity": self.severity, "exact": self.exact, "family": self.family,
                "source": self.source, "written": self.written}


@dataclass(frozen=True)
class VendorCode:
    """One code as its vendor defines it."""

    family: str  # a key of FAMILY_NAMES
    name: str
    component: str = ""  # the registry's errClass; for a TS code, the ACL code the runtime reports it as
    source: str = ""


def find_codes(text: str) -> List[str]:
    """Every error code in ``text`` in order of appearance, once each, in canonical spelling.

    >>> find_codes("EH9999: Inner Error! ... build op model failed, result = 500001 ... EH9999")
    ['EH9999', '500001']
    >>> find_codes("ret = 123456 (not a code context); HcclAllreduce errNo[0x0000000005010009]")
    ['0x05010009']
    >>> find_codes("aclrtSynchronizeStream failed: 507035; retCode=0x26; ErrorNo: 4294967295")
    ['507035', '0x26']
    """
    found = [(m.start(), m.group(1) + m.group(2)) for m in CODE.finditer(text)]
    found += [(m.start(1), m.group(1)) for m in NUMERIC_CODE.finditer(text)]
    if "(" in text or "ailed" in text or "rror " in text or "ret" in text or "ode" in text:
        defined = _vendor()
        found += [(m.start(), code) for m in LOOSE_CODE.finditer(text) if (code := m.group(1) or m.group(2)) in defined]
    if "etCode=" in text or "etcode=" in text or "rror code=" in text:
        found += [(m.start(1), m.group(1)) for m in TS_CODE.finditer(text)]
    if "HCCL function error" in text:
        found += [(m.start(1), f"HCCL {m.group(1)}") for m in HCCL_RESULT.finditer(text)]
    found += [(m.start(1), m.group(1)) for m in HCCL_ERRNO.finditer(text)]
    if "-80" in text:
        found += [(m.start(1), m.group(1)) for m in DCMI_CODE.finditer(text)]
    if "_ERR" in text or "HCCL_E_" in text:
        found += [(m.start(), code) for m in NAMED_CODE.finditer(text) if (code := _names().get(m.group()))]
    if "drvRetCode" in text:
        found += [(m.start(1), f"DRV {m.group(1)}") for m in DRV_CODE.finditer(text)]
    spelled = (canonical(code) for _position, code in sorted(found))
    return list(dict.fromkeys(code for code in spelled if code and code not in NOT_A_CODE))


def _signed(value: int) -> int:
    """A 32-bit value printed unsigned (4294959291) as the signed number it is (-8005)."""
    return value - (1 << 32) if (1 << 31) <= value < (1 << 32) else value


def canonical(text: str) -> Optional[str]:
    """The one spelling of the code ``text`` names, in any spelling a log or a user uses, or None when it
    is not a code: ``ez9999`` EZ9999; ``0x7bc8b`` 507019; ``8005``, ``4294959291`` -8005; ``4294967295``
    -1; ``retCode=0x26``'s ``0x26``; ``error code 7``, ``HCCL_E_UNAVAIL`` ``HCCL 7``; ``ACL_ERROR_RT_*`` its
    number; HCCL errNo ``0x05010009`` as ``0x`` + 8 hex digits."""
    spelled = " ".join(text.strip().upper().split())
    if not spelled or len(spelled) > 64:
        return None
    if _EW_CODE.fullmatch(spelled):
        return spelled
    chip_fault = fault_codes.canonical(spelled)  # 80E01801, before the hex and decimal readings below
    if chip_fault:
        return chip_fault
    named = _names().get(spelled)
    if named:
        return named
    hccl = _HCCL_SPELLING.fullmatch(spelled)
    if hccl:
        return f"HCCL {int(hccl.group(1))}"
    driver = _DRV_SPELLING.fullmatch(spelled)
    if driver:
        return f"DRV {int(driver.group(1))}"
    if _HEX.fullmatch(spelled):
        value = int(spelled, 16)
        if (1 << 31) <= value < (1 << 32):
            return str(_signed(value))
        if str(value) in _vendor():
            return str(value)
        if f"0x{value:02x}" in _vendor() and len(spelled) <= 6:
            return f"0x{value:02x}"
        return f"0x{value:08x}"
    if _DECIMAL.fullmatch(spelled):
        value = _signed(int(spelled))
        digits = spelled.lstrip("+-")
        if 8000 <= value <= 8255:  # DCMI's codes printed without their sign
            value = -value
        if value < 0 or value == 0:
            return str(value)
        if len(digits) in (6, 10) or str(value) in _vendor():
            return str(value)
    return None


def normalize(code: str) -> str:
    """Canonical spelling of ``code`` (see :func:`canonical`); text that is not a code is only upper-cased."""
    return canonical(code) or code.strip().upper()


def default_severity(code: str) -> str:
    """The severity of a code whose entry gives none, or of an unknown code: W codes warn, the rest are errors."""
    return "warn" if code.startswith("W") else "error"


@functools.lru_cache(maxsize=1)
def _base() -> Tuple[Dict[str, Mapping[str, Any]], Dict[str, Mapping[str, Any]]]:
    data = knowledge.load("error_codes") or {}
    codes: Dict[str, Mapping[str, Any]] = {(canonical(str(k)) or str(k)): v
                                           for k, v in (data.get("codes") or {}).items()}
    families = {str(k): v for k, v in (data.get("families") or {}).items()}
    # What npu-smi's DCMI failures mean is written once, beside the npu-smi checks that report them.
    smi = knowledge.load("npu_smi_errors") or {}
    for number, entry in (smi.get("dcmi_codes") or {}).items():
        codes.setdefault(str(number), entry)
    if smi.get("dcmi_unknown"):
        families.setdefault("-80", {"title": "DCMI error", **smi["dcmi_unknown"]})
    return codes, families


def _source_label(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('repository')}@{str(entry.get('commit'))[:8]} {entry.get('path')}"


@functools.lru_cache(maxsize=1)
def _vendor() -> Dict[str, VendorCode]:
    """Every vendor-defined code by its canonical spelling."""
    data = knowledge.load("vendor_codes") or {}
    sources = {family: [_source_label(s) for s in entries] for family, entries in (data.get("sources") or {}).items()}
    index: Dict[str, VendorCode] = {}
    for family in (*NUMERIC_FAMILIES, "dcmi"):
        for number, name in (data.get(family) or {}).items():
            index.setdefault(str(number), VendorCode(family, str(name), source=sources[family][0]))
    for number, name in (data.get("hccl") or {}).items():
        index[f"HCCL {number}"] = VendorCode("hccl", str(name), source=sources["hccl"][0])
    for number, name in (data.get("driver") or {}).items():
        index[f"DRV {number}"] = VendorCode("driver", str(name), source=sources["driver"][0])
    for value, names in (data.get("ts") or {}).items():  # "TS_NAME > ACL_ERROR_RT_NAME"
        name, _, acl_name = str(names).partition(" > ")
        index[str(value)] = VendorCode("ts", name, acl_name, sources["ts"][0])
    torch_npu = data.get("torch_npu") or {}
    for module_number, module in (torch_npu.get("submodules") or {}).items():
        for kind_number, (_symbol, words) in (torch_npu.get("kinds") or {}).items():
            index[f"ERR{module_number}{kind_number}"] = VendorCode("torch_npu", f"{module} {words}",
                                                                   source=sources["torch_npu"][0])
    registry_sources = sources.get("registry") or []
    for code, fields in (data.get("registry") or {}).items():  # "title | class | source indexes"
        title, component, found_in = (part.strip() for part in str(fields).split(" | ", 2))
        first = int(found_in.split()[0]) if found_in and registry_sources else None
        index[str(code)] = VendorCode("registry", title, component,
                                      registry_sources[first] if first is not None else "")
    return index


@functools.lru_cache(maxsize=1)
def _names() -> Dict[str, str]:
    """Vendor names (ACL_ERROR_RT_VECTOR_CORE_EXCEPTION, HCCL_E_UNAVAIL, DCMI_ERR_CODE_INNER_ERR) -> code."""
    return {fact.name.upper(): code for code, fact in _vendor().items()
            if fact.family in (*NUMERIC_FAMILIES, "hccl", "dcmi", "ts", "driver")}


def vendor_codes() -> Dict[str, VendorCode]:
    """Every vendor-defined code (for coverage and the knowledge tests)."""
    return dict(_vendor())


def _family_entry(code: str, families: Mapping[str, Mapping[str, Any]],
                  fact: Optional[VendorCode] = None) -> Optional[Mapping[str, Any]]:
    if fact is not None and fact.family == "ts":
        prefixes: Tuple[str, ...] = ("TS",)
    elif code.startswith("HCCL "):
        prefixes = ("HCCL",)
    elif code.startswith("DRV "):
        prefixes = ("DRV",)
    elif code.startswith("-80") or (fact is not None and fact.family == "dcmi"):
        prefixes = ("-80",)
    elif code.startswith("0x"):  # HCCL errNo: the module byte is the first non-zero one
        prefixes = ("0x0" + code[2:].lstrip("0")[:1],)
    elif code.isdigit() and len(code) != 6:  # numeric families are the 6-digit AscendCL codes only
        prefixes = ()
    else:
        prefixes = tuple(code[:n] for n in range(len(code), 0, -1))
    return next((families[p] for p in prefixes if p in families), None)


def _words(name: str) -> str:
    """A vendor name as words: ACL_ERROR_RT_FILE_WRITE -> "file write"."""
    return _NAME_PREFIX.sub("", name).replace("_", " ").lower().strip() or name


def _vendor_meaning(fact: VendorCode) -> str:
    family = FAMILY_NAMES[fact.family]
    if fact.family == "registry":
        component = f" ({fact.component})" if fact.component else ""
        return f"CANN reports {fact.name}{component}; the message after the code says what failed."
    if fact.family == "torch_npu":
        return f"torch_npu reports: {fact.name}; the error printed before it (a CANN code) is the cause."
    if fact.family == "ts":
        reported = f", reported as {fact.component}" if fact.component else ""
        return f"The task scheduler on the device reports {_words(fact.name)}{reported}."
    return f"{_REPORTER.get(fact.family, family)} reports: {_words(fact.name)} ({fact.name})."


def explain(code: str, installed: Optional[Installed] = None) -> Optional[CodeInfo]:
    """Explain ``code`` in any spelling (``EZ9999``, ``ERR00100``, ``507011``, ``0x7bc8b``, ``-8005``,
    ``HCCL 7``, ``0x05000004``, ``ACL_ERROR_RT_AICORE_EXCEPTION``).

    The vendor's definition gives the name; our entry (error_codes.yaml) the meaning, cause and fix, else the
    code's family gives them (``written`` False). A code no table defines is explained by its family (the
    longest known prefix, ``exact=False``). ``installed`` (code -> {title, message, cause, solution,
    source}: CANN's own registry read on the node) is preferred for the text where it has the code. None
    when the text is not an error code at all.
    """
    spelled = canonical(code)
    if spelled is None:
        return None
    chip_fault = fault_codes.fault(spelled)
    if chip_fault is not None:
        return CodeInfo(code=chip_fault.code, title=chip_fault.title, meaning=chip_fault.meaning,
                        fix=chip_fault.fix(), severity="warn" if chip_fault.severity == "warn" else "error",
                        family="NPU fault", source=chip_fault.source, written=True)  # the fix is its level's
    codes, families = _base()
    own = codes.get(spelled)
    fact = _vendor().get(spelled)
    node = (installed or {}).get(spelled)
    family_entry = _family_entry(spelled, families, fact)
    if own is None and fact is None and node is None:
        if family_entry is None:
            return None
        return _info(spelled, family_entry, exact=False, family="", source="", written=False)
    reported_as = ""
    if fact is not None and fact.family == "ts" and own is None and fact.component:
        reported_as = _names().get(fact.component, "")
        own = codes.get(reported_as)  # a TS code means what the ACL code it is reported as means
    title = (fact.name if fact else "") or (str(own.get("title", "")) if own else "")
    entry: Dict[str, Any] = dict(family_entry or {})
    entry.pop("title", None)
    written = own is not None
    if fact is not None:
        entry["meaning"] = _vendor_meaning(fact)
    if own is not None:
        entry.update({k: v for k, v in own.items() if v})
    if reported_as and own is not None:
        entry["meaning"] = f"{_vendor_meaning(fact)} ({reported_as}: {own.get('meaning', '')})"  # type: ignore[arg-type]
    source = fact.source if fact else ""
    if node is not None:
        title = str(node.get("title") or title)
        entry["meaning"] = str(node.get("message") or entry.get("meaning", ""))
        for key, theirs in (("cause", "cause"), ("fix", "solution")):
            if node.get(theirs) and node.get(theirs) != "N/A":
                entry[key] = str(node[theirs])
        source = str(node.get("source") or source)
    family = FAMILY_NAMES.get(fact.family, "") if fact else ""
    if fact is not None and fact.family == "registry":  # the component its class names ("HCCL Errors")
        family = fact.component.replace("Errors", "").strip() or "CANN"
    entry["title"] = title
    return _info(spelled, entry, exact=True, family=family, source=source, written=written)


def _info(code: str, entry: Mapping[str, Any], exact: bool, family: str, source: str, written: bool) -> CodeInfo:
    severity = str(entry.get("severity") or default_severity(code))
    return CodeInfo(code=code, title=str(entry.get("title", "")), meaning=str(entry.get("meaning", "")),
                    cause=str(entry.get("cause", "")), fix=str(entry.get("fix", "")), severity=severity,
                    exact=exact, family=family, source=source, written=written)
