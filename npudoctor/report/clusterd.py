"""``--format clusterd``: MindCluster ClusterD's public-fault document (the ``PublicFault`` key of a ConfigMap
labelled ``mc-consumer-publicfault=true``), so Huawei's own pipeline (ClusterD, Ascend-volcano-plugin)
isolates the chip npudoctor found bad, not the whole node.

The shape and its limits are ClusterD's public-fault API (MindCluster reference, "公共故障接口", ConfigMap
tables 1-3): message ``id`` and ``faultId`` 8-128 characters of ``[A-Za-z0-9._-]``; ``timestamp`` and
``faultTime`` in ms, 13 digits, after 2025-01-01T00:00:00Z; ``version`` "1.0"; ``resource`` a sender listed in
the fault configuration's ``publicFaultResource``; 1-100 ``faults``; ``faultType`` NPU, Node, Network or
Storage; a 9-character ``faultCode`` listed with its level in the configuration's ``publicFaultCode``;
``assertion`` occur / recover / once; ``influence`` 1-1000 entries of ``nodeName`` (a Kubernetes node name)
and ``deviceIds`` (the chips' *physical* IDs: 1-32 distinct values in [0, 32); when the chip cannot be told,
every chip of the node); ``description`` at most 512 characters; the ConfigMap at most 1 MB. A document
outside them is dropped by ClusterD without a word, so :func:`validate` checks every one and the writer
refuses to print a document that fails it.

Only node-scope findings are sent (:mod:`npudoctor.model.scope`): a job's Python or HCCL variables never
isolate a chip. A FAIL is sent at the level that isolates the chips it names (``SeparateNPU``), a WARN as
``SubHealthFault``; an ERROR (npudoctor could not tell) is never sent.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor.errors import InputError
from npudoctor.model.chip import Chip, chip_of, chips_by_bus
from npudoctor.model.finding import Finding, Report, Status
from npudoctor.model.scope import scope_of

RESOURCE = "npudoctor"  # the sender; add it to publicFaultResource (customization())
VERSION = "1.0"
MAX_FAULTS = 100
MAX_INFLUENCE = 1000
MAX_DEVICE_ID = 32
MAX_DESCRIPTION = 512
MAX_DOCUMENT_BYTES = 1024 * 1024
EARLIEST_MS = 1735689600000  # 2025-01-01T00:00:00Z, the API's lower bound
_ID = re.compile(r"[A-Za-z0-9._-]{8,128}\Z")
_NODE_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\Z")
FAULT_TYPES = ("NPU", "Node", "Network", "Storage")
ASSERTIONS = ("occur", "recover", "once")

# npudoctor's fault codes: 83 (npudoctor's range) + the check family (2 digits) + the check number (3 digits)
# + the level (2 digits: 01 FAIL -> SeparateNPU, 02 WARN -> SubHealthFault). Nine digits, as ClusterD wants.
_FAMILIES = {"PCI": 1, "SMI": 2, "VER": 3, "LIB": 4, "HCCL": 5, "LOG": 6, "TRN": 7, "SITE": 8}
_LEVELS = {Status.FAIL: (1, "SeparateNPUCodes"), Status.WARN: (2, "SubHealthFaultCodes")}
_CHECK_ID = re.compile(r"([A-Z]+)(\d{1,3})\Z")


class ClusterdError(InputError):
    """The report cannot be said as a ClusterD public-fault document (one line for the user)."""


def fault_code(check_id: str, status: Status) -> Optional[str]:
    """The 9-digit code for a check's FAIL or WARN (None: not a check npudoctor sends).

    >>> fault_code("SMI002", Status.FAIL), fault_code("HCCL011", Status.WARN)
    ('830200201', '830501102')
    """
    match = _CHECK_ID.match(check_id)
    if not match or match.group(1) not in _FAMILIES or status not in _LEVELS:
        return None
    return f"83{_FAMILIES[match.group(1)]:02d}{int(match.group(2)):03d}{_LEVELS[status][0]:02d}"


def customization(check_ids: Sequence[str]) -> Dict[str, Any]:
    """The ``publicCustomization.json`` entries that make ClusterD accept npudoctor's faults: the sender and
    every node-scope check's codes under their level (merge them into the file ClusterD loads)."""
    codes: Dict[str, List[str]] = {"NotHandleFaultCodes": [], "SubHealthFaultCodes": [], "SeparateNPUCodes": [],
                                   "PreSeparateNPUCodes": []}
    for check_id in sorted(set(check_ids)):
        if scope_of(check_id) != "node":
            continue
        for status, (_number, level) in _LEVELS.items():
            code = fault_code(check_id, status)
            if code:
                codes[level].append(code)
    return {"publicFaultCode": codes, "publicFaultResource": [RESOURCE]}


def node_name(report: Report) -> str:
    """The Kubernetes node name ClusterD matches: the report's host name in lower case (a pod with
    ``hostNetwork`` sees the node's)."""
    host = str(report.inventory.get("hostname") or report.host.get("hostname") or "").strip().lower()
    if not _NODE_NAME.match(host):
        raise ClusterdError(f"--format clusterd: host name {host[:60]!r} is no Kubernetes node name "
                            f"(lower-case letters, digits, '-' and '.', at most 253)")
    return host


def _node_chips(report: Report, by_bus: Mapping[str, Chip]) -> List[Chip]:
    seen = {(c.npu_id, c.chip_id): c for c in (chip_of(f, by_bus) for f in report.findings) if c is not None}
    return sorted(seen.values(), key=lambda c: (c.npu_id, -1 if c.chip_id is None else c.chip_id))


def _device_ids(chips: Sequence[Chip], all_chips: Sequence[Chip], count: Any) -> Tuple[List[int], bool]:
    """The physical IDs of ``chips``; when one is not known (or the fault is the node's), every chip of the
    node (the API's rule), else ``range(count)`` from the inventory. Second value: the chips were told."""
    told = [c.phy_id for c in chips if c.phy_id is not None]
    if chips and len(told) == len(chips):
        return sorted(set(told)), True
    every = [c.phy_id for c in all_chips if c.phy_id is not None]
    if all_chips and len(every) == len(all_chips):
        return sorted(set(every)), False
    total = count if isinstance(count, int) and not isinstance(count, bool) else len(all_chips)
    return list(range(min(total, MAX_DEVICE_ID))), False


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:128]


def document(report: Report, now_ms: Optional[int] = None) -> Dict[str, Any]:
    """The ``PublicFault`` document for ``report``'s node-scope FAILs and WARNs, one fault per check and chip
    (per check when that would pass 100 faults). An empty ``faults`` is not allowed by ClusterD: a report
    with nothing to send gives None instead (:func:`render` says so)."""
    stamp = int(now_ms if now_ms is not None else (report.started or time.time()) * 1000)
    node = node_name(report)
    by_bus = chips_by_bus(report.findings)
    all_chips = _node_chips(report, by_bus)
    count = report.inventory.get("chips", {}).get("count") if isinstance(report.inventory.get("chips"), dict) \
        else None
    sent = [f for f in report.findings if f.status in _LEVELS and scope_of(f.id) == "node"]
    groups: Dict[Tuple[str, Status, str], List[Tuple[Finding, Optional[Chip]]]] = {}
    for finding in sent:
        chip = chip_of(finding, by_bus)
        where = "node" if chip is None else f"npu{chip.npu_id}-chip{'x' if chip.chip_id is None else chip.chip_id}"
        groups.setdefault((finding.id, finding.status, where), []).append((finding, chip))
    if len(groups) > MAX_FAULTS:
        merged: Dict[Tuple[str, Status, str], List[Tuple[Finding, Optional[Chip]]]] = {}
        for (check_id, status, _where), members in groups.items():
            merged.setdefault((check_id, status, "chips"), []).extend(members)
        groups = merged
    faults: List[Dict[str, Any]] = []
    for (check_id, status, where), members in groups.items():
        chips = [chip for _f, chip in members if chip is not None]
        node_wide = len(chips) < len(members)
        ids, told = _device_ids([] if node_wide else chips, all_chips, count)
        if not ids:
            raise ClusterdError(f"--format clusterd: {check_id} failed but the report names no chip of this "
                                "node (deviceIds must name at least one)")
        first = members[0][0]
        subject = ", ".join(dict.fromkeys(f.subject for f, _c in members if f.subject))
        note = "" if told or node_wide else " (physical chip ID not in the report: every chip named)"
        description = " ".join(f"{check_id} {subject}: {first.detail or first.title}{note}".split())
        faults.append({
            "faultId": _safe_id(f"npudoctor.{node}.{check_id}.{where}"),
            "faultType": "Network" if check_id.startswith("HCCL") else "NPU" if chips and not node_wide else "Node",
            "faultCode": fault_code(check_id, status),
            "faultTime": stamp,
            "assertion": "occur",
            "influence": [{"nodeName": node, "deviceIds": ids}],
            "description": description[:MAX_DESCRIPTION],
        })
    faults.sort(key=lambda fault: str(fault["faultId"]))
    return {"id": _safe_id(f"npudoctor.{node}.{stamp}"), "timestamp": stamp, "version": VERSION,
            "resource": RESOURCE, "faults": faults}


def recovered(previous: Mapping[str, Any], current: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """``recover`` events for the faults ``previous`` raised that ``current`` no longer has: ClusterD clears a
    public fault only on its recover event (deleting the ConfigMap does not)."""
    still = {fault["faultId"] for fault in current.get("faults", [])}
    return [{**fault, "assertion": "recover"} for fault in previous.get("faults", [])
            if fault.get("assertion") == "occur" and fault.get("faultId") not in still]


def validate(doc: Mapping[str, Any]) -> List[str]:
    """What in ``doc`` breaks ClusterD's published constraints (empty: ClusterD accepts it)."""
    problems: List[str] = []

    def need(ok: bool, text: str) -> None:
        if not ok:
            problems.append(text)

    def stamp_ok(value: Any) -> bool:
        return type(value) is int and len(str(value)) == 13 and value >= EARLIEST_MS

    need(isinstance(doc.get("id"), str) and bool(_ID.match(doc["id"])), "id: 8-128 of [A-Za-z0-9._-]")
    need(stamp_ok(doc.get("timestamp")), "timestamp: 13-digit ms after 2025-01-01")
    need(doc.get("version") == VERSION, "version: 1.0")
    need(isinstance(doc.get("resource"), str) and bool(doc.get("resource")), "resource: a sender")
    faults = doc.get("faults")
    need(isinstance(faults, list) and 0 < len(faults) <= MAX_FAULTS, "faults: 1-100")
    for index, fault in enumerate(faults if isinstance(faults, list) else []):
        where = f"faults[{index}]"
        need(isinstance(fault.get("faultId"), str) and bool(_ID.match(fault["faultId"])), f"{where}.faultId")
        need(fault.get("faultType") in FAULT_TYPES, f"{where}.faultType")
        code = fault.get("faultCode")
        need(isinstance(code, str) and len(code) == 9 and code.isdigit(), f"{where}.faultCode: 9 digits")
        need(stamp_ok(fault.get("faultTime")), f"{where}.faultTime")
        need(fault.get("assertion") in ASSERTIONS, f"{where}.assertion")
        description = fault.get("description", "")
        need(isinstance(description, str) and len(description) <= MAX_DESCRIPTION, f"{where}.description")
        influence = fault.get("influence")
        need(isinstance(influence, list) and 0 < len(influence) <= MAX_INFLUENCE, f"{where}.influence")
        for entry in influence if isinstance(influence, list) else []:
            name = entry.get("nodeName")
            need(isinstance(name, str) and bool(_NODE_NAME.match(name)), f"{where}.influence.nodeName")
            ids = entry.get("deviceIds")
            need(isinstance(ids, list) and 0 < len(ids) <= MAX_DEVICE_ID and len(set(ids)) == len(ids)
                 and all(type(i) is int and 0 <= i < MAX_DEVICE_ID for i in ids), f"{where}.influence.deviceIds")
    need(len(json.dumps(doc).encode()) <= MAX_DOCUMENT_BYTES, "document over 1 MB")
    return problems


def render(report: Report, fail_on: str = "fail", previous: Optional[Report] = None) -> str:
    """The JSON text of :func:`document` (``fail_on`` is accepted like every writer's; WARNs are always sent,
    at the SubHealth level that isolates nothing), plus a ``recover`` for each fault ``previous`` (the run
    before) raised that this run no longer has. Nothing to send: ``{}``, which is not written to the
    ConfigMap."""
    del fail_on
    doc = document(report)
    if previous is not None:
        try:
            before = document(previous)
        except ClusterdError:  # the run before cannot be said (another host name): nothing to recover
            before = {"faults": []}
        doc["faults"] = (doc["faults"] + recovered(before, doc))[:MAX_FAULTS]
    if not doc["faults"]:
        return "{}\n"
    problems = validate(doc)
    if problems:
        raise ClusterdError(f"--format clusterd: the document would be dropped by ClusterD: {problems[0]}")
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"  # one line: the ConfigMap's value
