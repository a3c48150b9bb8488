"""Ascend chip fault codes (``80E01801``): the level MindCluster handles each at, what it means, what to do.

The facts are data in ``checks/npu_fault_codes.yaml`` (the device plugin's public fault-code table, the level
meanings of MindCluster's documentation, and the few code descriptions public sources give, each with its
source). One lookup serves SMI002 (a chip's alarm), ``npudoctor explain`` and the fleet's fault writer::

    >>> info = fault("0x80e01801")
    >>> info.code, info.level, info.action, info.severity
    ('80E01801', 'RestartBusiness', 'restart the job', 'fail')
    >>> fault("80E18402").action, fault("12345678") is None
    ('isolate and replace the chip', True)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from npudoctor import knowledge

_SPELLING = re.compile(r"(?:0X)?([0-9A-F]{8})")


@dataclass(frozen=True)
class FaultInfo:
    """One fault code: its MindCluster level (``rank`` orders levels mild to severe), what that level means
    and does, and the code's own description where a source gives one (``described`` False: the level only)."""

    code: str
    level: str
    rank: int
    severity: str  # "warn" or "fail": a chip with this code
    action: str  # the level's short word: "watch", "restart the job", "reset the chip", ...
    title: str
    meaning: str
    fix_template: str  # {npu} {chip} {logic} {phy}
    hint: str = ""
    described: bool = False
    source: str = ""

    def fix(self, npu: Any = "<npu>", chip: Any = "<chip>", logic: Any = "<logic id>", phy: Any = "<phy id>") -> str:
        """What to do, for one chip (placeholders where a value is not known)."""
        def value(given: Any, placeholder: str) -> str:
            return placeholder if given is None else str(given)
        slots = {"npu": value(npu, "<npu>"), "chip": value(chip, "<chip>"), "logic": value(logic, "<logic id>"),
                 "phy": value(phy, "<phy id>")}
        text = self.fix_template.format(**slots)
        if self.hint:
            text += "\n" + self.hint.format(**slots)
        return text


def canonical(text: str) -> Optional[str]:
    """``80e01801``, ``0x80E01801`` -> ``80E01801`` when the table knows the code; None otherwise."""
    match = _SPELLING.fullmatch(text.strip().upper())
    if not match or match.group(1) not in _table()[0]:
        return None
    return match.group(1)


def fault(code: str) -> Optional[FaultInfo]:
    """The entry of ``code`` (any spelling), or None when the shipped table does not list it."""
    spelled = canonical(code)
    if spelled is None:
        return None
    levels_of, levels, descriptions, sources = _table()
    level = levels_of[spelled]
    entry = levels[level]
    described = descriptions.get(spelled) or {}
    own_sources = [sources[name] for name in described.get("source") or () if name in sources]
    source = "; ".join([sources["codes"], *own_sources])
    title = str(described.get("title") or f"NPU fault code (MindCluster level {level})")
    meaning = str(described.get("meaning") or "")
    level_words = f"MindCluster level {level}: {entry['meaning']}"
    return FaultInfo(code=spelled, level=level, rank=int(entry["rank"]), severity=str(entry["severity"]),
                     action=str(entry["action"]), title=title,
                     meaning=f"{meaning}. {level_words}" if meaning else level_words,
                     fix_template=str(entry["fix"]), hint=str(described.get("hint") or ""),
                     described=bool(described), source=source)


def fault_level_rank(level: str) -> int:
    """Where ``level`` stands from mild (0, NotHandleFault) to severe (SeparateNPU)."""
    return int(_table()[1][level]["rank"])


def known_codes() -> Tuple[str, ...]:
    """Every code of the shipped table (for `explain` coverage and the tests)."""
    return tuple(sorted(_table()[0]))


@functools.lru_cache(maxsize=1)
def _table() -> Tuple[Dict[str, str], Mapping[str, Mapping[str, Any]], Mapping[str, Mapping[str, Any]],
                      Dict[str, str]]:
    data = knowledge.load("npu_fault_codes")
    levels: Mapping[str, Mapping[str, Any]] = data["levels"]
    levels_of: Dict[str, str] = {}
    for level, codes in data["codes"].items():
        for code in codes or ():
            spelled = str(code).upper()
            known = levels_of.get(spelled)
            # listed under two levels (A2301001): the more severe one is kept
            if known is None or int(levels[level]["rank"]) > int(levels[known]["rank"]):
                levels_of[spelled] = level
    sources = {name: f"{s['repository']}@{str(s['commit'])[:8]} {s['path']}" if s.get("commit")
               else f"{s['repository']} {s['path']}" for name, s in data["sources"].items()}
    descriptions = {str(code).upper(): entry for code, entry in (data.get("descriptions") or {}).items()}
    return levels_of, levels, descriptions, sources
