"""Which NPU chip a finding is about: one reading for every writer that speaks per chip (Prometheus labels,
ClusterD ``deviceIds``).

Chip-level findings carry ``evidence["chip"] = {"npu_id", "chip_id", "logic_id", "phy_id", "bus_id"}``; older
ones (and replayed reports) carry the subject ``npu:N/chip:C`` and the evidence keys ``npu_id``, ``chip_id``,
``bus_id`` (SMI002). Both are read here, so a writer never parses a subject itself. A finding whose subject is
a PCI address (PCI002-PCI004) is a chip too once the report says which chip sits at that address
(:func:`chips_by_bus`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional

from npudoctor.model.finding import Finding

_SUBJECT = re.compile(r"npu:(\d{1,4})(?:/chip:(\d{1,4}))?\Z")
_BUS = re.compile(r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\Z")


@dataclass(frozen=True)
class Chip:
    """An NPU chip as npu-smi names it; ``phy_id`` is the physical ID MindCluster's ``deviceIds`` want."""

    npu_id: int
    chip_id: Optional[int] = None
    logic_id: Optional[int] = None
    phy_id: Optional[int] = None
    bus_id: Optional[str] = None


def normal_bus_id(bus_id: str) -> str:
    """``0000:C1:00.0`` and ``c1:00.0`` name one PCI function: lower case, with the domain."""
    text = bus_id.strip().lower()
    return text if text.count(":") == 2 else f"0000:{text}"


def _int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _bus(value: Any) -> Optional[str]:
    return normal_bus_id(value) if isinstance(value, str) and _BUS.match(value.strip()) else None


def chip_of(finding: Finding, by_bus: Optional[Mapping[str, Chip]] = None) -> Optional[Chip]:
    """The chip ``finding`` is about, or None when it is about the node (a version, a file, npu-smi itself).

    ``evidence["chip"]`` first; else the subject ``npu:N[/chip:C]`` with the evidence's ``npu_id``,
    ``chip_id`` and ``bus_id``; else a PCI-address subject looked up in ``by_bus``."""
    evidence = finding.evidence or {}
    given = evidence.get("chip")
    if isinstance(given, Mapping) and _int(given.get("npu_id")) is not None:
        return Chip(npu_id=_int(given.get("npu_id")) or 0, chip_id=_int(given.get("chip_id")),
                    logic_id=_int(given.get("logic_id")), phy_id=_int(given.get("phy_id")),
                    bus_id=_bus(given.get("bus_id")))
    match = _SUBJECT.match(finding.subject or "")
    if match:
        npu_id = _int(evidence.get("npu_id"))
        chip_id = _int(evidence.get("chip_id"))
        return Chip(npu_id=int(match.group(1)) if npu_id is None else npu_id,
                    chip_id=(int(match.group(2)) if match.group(2) else None) if chip_id is None else chip_id,
                    logic_id=_int(evidence.get("logic_id")), phy_id=_int(evidence.get("phy_id")),
                    bus_id=_bus(evidence.get("bus_id")))
    bus = _bus(finding.subject or "")
    if bus and by_bus:
        return by_bus.get(bus)
    return None


def chips_by_bus(findings: Iterable[Finding]) -> Dict[str, Chip]:
    """Every chip the findings name with its PCI address (npu-smi's Bus-Id), by normalised address."""
    found: Dict[str, Chip] = {}
    for finding in findings:
        chip = chip_of(finding)
        if chip is not None and chip.bus_id:
            found.setdefault(chip.bus_id, chip)
    return found
