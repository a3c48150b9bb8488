"""From findings to incidents, from incidents to a diagnosis: one incident per failure, the rank that broke first.

Built on top of the scanner's findings, never inside its hot loop. A scan unit is what one rank (or one file)
logged; the findings of one unit fold into incidents by structure: the same process (pid), a short time
window between their first lines (or, without timestamps, a few lines apart). Each finding is a cause, a
consequence or context (``checks/incident_kinds.yaml``, knowledge as data); an incident takes its kind and
title from its most specific finding, and keeps the codes, operator, device, pid, first time and sources as
evidence. :func:`diagnose` then orders the incidents of a whole job: the root cause is the earliest cause;
consequences (HCCL timeouts, the watchdog) point at it (``caused_by``); with no cause logged, the rank the
waiting ranks name, or the one whose log stopped while the others waited, is named instead.

Pure: functions over findings and small records; the job layer (:mod:`npudoctor.logs.job`) reads the files.

    >>> from npudoctor.logs.scanner import Scanner
    >>> scanner = Scanner()
    >>> _ = scanner.scan_bytes("plog-1.log",
    ...     b"[ERROR] RUNTIME(7,python):2025-01-01-00:00:00.000.001 [a.cc:9]7 there is an aivec error exception\\n"
    ...     b"[ERROR] RUNTIME(7,python):2025-01-01-00:00:00.000.002 [a.cc:9]7 rtStreamSynchronize:ErrCode=507035\\n")
    >>> found, left = incidents_of(scanner.result().findings, Unit("plog-1.log"))
    >>> [(i.kind, i.codes, i.first_time) for i in found], left
    ([('aicore_exception', ['507035'], '2025-01-01T00:00:00.000001')], [])
"""

from __future__ import annotations

import collections
import datetime
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from npudoctor.logs.model import LogFinding

# Incidents the diagnosis makes for a rank no log shows failing (named by the others, or silent).
INFERRED_KINDS = ("silent_rank", "named_rank")
# Findings of one unit whose first lines lie this close in time (or, without times, in lines) are one event.
WINDOW_S = 10.0
LINE_GAP = 60
# Sources kept per incident (path:line), codes and remote ranks listed.
MAX_SOURCES = 12
# Causes on different nodes closer than this are ordered only as far as the clocks agree.
CLOCK_DOUBT_S = 5.0
# At least this share of the ranks seen failing alike (and two or more) is a common cause, not one culprit.
COMMON_SHARE = 0.5
# ... all within this many seconds of each other (every rank failing at once: start-up, a bad env).
COMMON_WINDOW_S = 120.0

# -- what a line says about where it comes from ---------------------------------------------------------
# Timestamps as CANN (`2025-05-08-09:56:18.526.761`), torch_npu (`2025-04-08-18:07:20`) and Python
# logging / ISO writers (`2024-07-04 13:26:26,123`, `2024-07-04T13:26:26.123`) print them.
TIME = re.compile(r"(?<!\d)(\d{4})-(\d\d)-(\d\d)[-T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6})(?:\.(\d{3}))?)?")
PID = re.compile(r"\[[A-Z]+\] ?[A-Z][A-Z0-9_]*\((\d+),|\[PID: ?(\d+)\]|\(PID: ?(\d+)|\bpid[=: ](\d+)")
DEVICE = re.compile(r"(?i)\b(?:device[_ ]?id|dev[_ ]?id|chip[_ ]?id|logic[_ ]?devid)\s*[=:\[(]\s*(\d+)"
                    r"|\(Device: ?(\d+)|\bdevice\((?:chipId:)?(\d+)|\bDevice ?(\d+)\b")
# This process's own rank: torch_npu's `RankID:8`, the watchdog's `[Rank 1]`, HCCL's `userRank[3]`, `rank[10]`
# (`role[1] rank[10]`, `hcom init ... rank[76]`; never a remote rank).
RANK = re.compile(r"RankID: ?(\d+)|\[Rank (\d+)\]|\buserRank\s*[=:\[]\s*(\d+)|\brank[_ ]?id\s*[=:\[]\s*(\d+)"
                  r"|(?<![Rr]emote )(?<![Rr]emote_)\brank\[(\d+)\]")
# `remote rank [6]`, `remote rank: [24]`, `remote rank:[24]`, `remoteRank=6`, `remote_rank_id(6)`.
# HCCL's LINK_ERROR_INFO table names the peer a link waited for in its row: `|  192.168.2.199(8)  | 16666 |
# 192.168.2.197(10) | 0 | client | time out |` (dest_ip(user_rank) first).
REMOTE_RANK = re.compile(r"(?i)remote[ _]?rank(?:[ _]?id)?\s*[=:]?\s*[\[(]?\s*(\d+)"
                         r"|\|\s*\d{1,3}(?:\.\d{1,3}){3}\((\d+)\)\s*\|[^\n]{0,200}?\|\s*(?:time out|no connect)\s*\|")
OP = re.compile(r"kernel[_ ]name\s*[=:]\s*([\w.-]+)|node_name:([\w.-]+)|op name is ([\w.-]+)"
                r"|origin_op_name\s*[=:]\s*([\w.-]+)|OpType=(\w+)")
# The details a rule (or the scanner, issue 31) reads out that name the operator or the device.
OP_DETAILS = ("op", "operator", "op_type", "node")
DEVICE_DETAILS = ("device", "device_id")
# Rules whose subject is the operator or kernel itself.
OP_SUBJECT_RULES = ("aicore-kernel-failed", "ge-aicore-exception-dump", "op-compile-failed", "op-compile-failed-te",
                    "ge-generate-task-failed", "op-binary-missing", "npu-function-error")


def first_match(pattern: re.Pattern[str], text: str) -> Optional[str]:
    match = pattern.search(text)
    if match is None:
        return None
    return next(group for group in match.groups() if group is not None)


def parse_time(text: str) -> Optional[datetime.datetime]:
    """The first timestamp in ``text`` (naive: the node's clock), or None."""
    match = TIME.search(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, frac, micro = match.groups()
    if frac and micro:  # CANN: seconds.milli.micro
        us = int(frac[:3].ljust(3, "0")) * 1000 + int(micro)
    else:
        us = int((frac or "0")[:6].ljust(6, "0"))
    try:
        return datetime.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), us)
    except ValueError:
        return None


def own_rank(text: str) -> Optional[int]:
    """The one rank ``text`` (a log's end) says it is, or None when it says none or several (a device
    log that several processes write)."""
    found = set()
    for match in RANK.finditer(text):
        found.add(int(next(group for group in match.groups() if group is not None)))
        if len(found) > 1:
            return None
    return found.pop() if found else None


def named_ranks(text: str) -> List[int]:
    """The remote ranks ``text`` names (``remote rank: [24]``, ``remoteRank:2``), at most MAX_SOURCES."""
    found: List[int] = []
    for match in REMOTE_RANK.finditer(text):
        rank = int(match.group(1) or match.group(2))
        if rank not in found:
            found.append(rank)
            if len(found) >= MAX_SOURCES:
                break
    return found


def last_time(text: str, lines: int = 2000) -> Optional[datetime.datetime]:
    """The last timestamp in ``text`` (the tail of a log) within its last ``lines`` lines, or None."""
    for line in reversed(text.rsplit("\n", lines)):
        moment = parse_time(line) if TIME.search(line) else None
        if moment is not None:
            return moment
    return None


def iso(moment: Optional[datetime.datetime]) -> Optional[str]:
    return moment.isoformat() if moment else None


def from_iso(text: Optional[str]) -> Optional[datetime.datetime]:
    if not text or not isinstance(text, str):  # a document's field may hold anything
        return None
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def shown_time(text: Optional[str]) -> str:
    moment = from_iso(text)
    if moment is None:
        return "an unknown time"
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


# -- knowledge --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Role:
    """What one finding means for an incident (``checks/incident_kinds.yaml``)."""

    cls: str  # cause, consequence, context
    kind: str
    specificity: int
    label: str
    named: bool = False  # the finding's subject completes the label (the missing module's name)


@dataclass(frozen=True)
class Kinds:
    kinds: Mapping[str, Role]
    rules: Mapping[str, Role]
    codes: Mapping[str, Role]
    generic_codes: frozenset
    hccl_results: Mapping[int, Role]
    default: Role

    def role(self, finding: LogFinding) -> Role:
        if finding.rule and finding.rule in self.rules:
            role = self.rules[finding.rule]
            return role if role.kind else Role(role.cls, finding.kind, role.specificity, role.label, role.named)
        if finding.kind == "error_code":
            if finding.subject in self.codes:
                return self.codes[finding.subject]
            result = hccl_result(finding.subject)
            if result is not None:  # an HCCL errNo or Hccl* result: timeouts wait, memory fails, the rest explain
                return self.hccl_results.get(result, self.kinds["error_code"])
            if finding.subject in self.generic_codes or finding.severity != "error":
                return self.kinds["error_code"]
            return Role(self.default.cls, self.default.kind, self.default.specificity, code_label(finding))
        if finding.kind in self.kinds:
            return self.kinds[finding.kind]
        # A kind the shipped table does not know (a site rule): an error is a failure of its own.
        if finding.severity == "error":
            return Role("cause", finding.kind, self.default.specificity, finding.kind.replace("_", " "))
        return Role("none", finding.kind, 0, finding.kind)


def _role(entry: Mapping[str, Any], kind: str) -> Role:
    return Role(str(entry["class"]), str(entry.get("kind", kind)), int(entry.get("specificity", 0)),
                str(entry.get("label", kind.replace("_", " "))), bool(entry.get("named", False)))


@functools.lru_cache(maxsize=1)
def load_kinds() -> Kinds:
    """The shipped ``checks/incident_kinds.yaml``."""
    from npudoctor import knowledge

    data = knowledge.load("incident_kinds")
    return Kinds(kinds={k: _role(v, k) for k, v in data["kinds"].items()},
                 rules={k: _role(v, "") for k, v in data.get("rules", {}).items()},
                 codes={str(k): _role(v, "") for k, v in data.get("codes", {}).items()},
                 generic_codes=frozenset(str(c) for c in data.get("generic_codes", ())),
                 hccl_results={int(k): _role(v, "") for k, v in data.get("hccl_results", {}).items()},
                 default=_role(data["default"], "error"))


# -- the records ------------------------------------------------------------------------------------------
@dataclass
class Unit:
    """What one rank (or one file) logged: where it comes from and when its log stopped."""

    source: str
    node: str = ""
    rank: Optional[int] = None
    device: Optional[int] = None
    pid: Optional[int] = None
    last_time: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"source": self.source, "node": self.node or None, "rank": self.rank, "device": self.device,
                "pid": self.pid, "last_time": self.last_time}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Unit:
        return cls(str(data["source"]), str(data.get("node") or ""), _int(data.get("rank")),
                   _int(data.get("device")), _int(data.get("pid")), data.get("last_time"))


@dataclass
class Incident:
    """One failure: the findings of one event, with the evidence that places it."""

    kind: str
    cls: str  # cause or consequence (from its most specific finding)
    title: str
    label: str
    fix: str
    severity: str
    node: str = ""
    rank: Optional[int] = None
    device: Optional[int] = None
    pid: Optional[int] = None
    first_time: Optional[str] = None
    codes: List[str] = field(default_factory=list)
    op: Optional[str] = None
    sources: List[str] = field(default_factory=list)
    count: int = 0
    remote_ranks: List[int] = field(default_factory=list)
    findings: List[str] = field(default_factory=list)  # "kind subject" of what it holds
    unit: str = ""
    order: int = 0  # line of its first finding in its unit (orders incidents without times)
    id: str = ""
    role: str = "independent"
    caused_by: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "role": self.role, "class": self.cls, "title": self.title,
                "node": self.node or None, "rank": self.rank, "device": self.device, "pid": self.pid,
                "first_time": self.first_time, "codes": list(self.codes), "op": self.op,
                "sources": list(self.sources), "caused_by": self.caused_by, "count": self.count,
                "remote_ranks": list(self.remote_ranks), "label": self.label, "fix": self.fix,
                "severity": self.severity, "findings": list(self.findings), "unit": self.unit,
                "order": self.order}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Incident:
        return cls(kind=str(data["kind"]), cls=str(data.get("class") or "cause"), title=str(data.get("title") or ""),
                   label=str(data.get("label") or data["kind"]), fix=str(data.get("fix") or ""),
                   severity=str(data.get("severity") or "error"), node=str(data.get("node") or ""),
                   rank=_int(data.get("rank")), device=_int(data.get("device")), pid=_int(data.get("pid")),
                   first_time=data.get("first_time"), codes=[str(c) for c in data.get("codes") or ()],
                   op=data.get("op"), sources=[str(s) for s in data.get("sources") or ()],
                   count=int(data.get("count") or 0), remote_ranks=[int(r) for r in data.get("remote_ranks") or ()],
                   findings=[str(f) for f in data.get("findings") or ()], unit=str(data.get("unit") or ""),
                   order=int(data.get("order") or 0))


def _int(value: Any) -> Optional[int]:
    try:
        return None if value is None or value == "" else int(value)
    except (TypeError, ValueError):
        return None


# -- one unit's findings -> incidents ---------------------------------------------------------------------
@dataclass
class _Member:
    finding: LogFinding
    role: Role
    time: Optional[datetime.datetime]
    pid: Optional[int]


def _details(finding: LogFinding, names: Sequence[str]) -> Optional[str]:
    for name in names:
        value = getattr(finding, name, None)  # a field the scanner may carry itself (issue 31)
        if isinstance(value, (str, int)) and str(value):
            return str(value)
        values = finding.details.get(name)
        if values:
            return sorted(values)[0]
    return None


def incidents_of(findings: Sequence[LogFinding], unit: Unit, kinds: Optional[Kinds] = None,
                 named: Sequence[int] = ()) -> Tuple[List[Incident], List[LogFinding]]:
    """(incidents, findings left over) of one unit's findings.

    Members are ordered by their first line; a new event starts where the process changes, or the time
    (else the line) gap to the previous member is wider than :data:`WINDOW_S` (:data:`LINE_GAP`). In one
    event, the causes and their context make one incident and the consequences another (a stream timeout
    right after an exception is its consequence); context alone makes none (left over). ``named``: the
    remote ranks the unit's own lines name (read by the job layer from its end), given to its consequences
    that name none in their first lines."""
    kinds = kinds or load_kinds()
    members: List[_Member] = []
    left: List[LogFinding] = []
    for finding in findings:
        role = kinds.role(finding)
        if role.cls == "none" or finding.severity != "error":
            left.append(finding)
            continue
        # the unit's pid (plog-PID_, a Ray actor's pid=) first: one process, whatever pid namespace it prints
        pid = unit.pid if unit.pid is not None else _int(first_match(PID, finding.sample))
        members.append(_Member(finding, role, parse_time(finding.sample), pid))
    members.sort(key=lambda m: (m.finding.first.file, m.finding.first.line))
    events: List[List[_Member]] = []
    for member in members:
        if events and _same_event(events[-1][-1], member):
            events[-1].append(member)
        else:
            events.append([member])
    incidents: List[Incident] = []
    for event in events:
        causes = [m for m in event if m.role.cls == "cause"]
        consequences = [m for m in event if m.role.cls == "consequence"]
        context = [m for m in event if m.role.cls == "context"]
        if causes:
            incidents.append(_incident(causes + context, unit))
            if consequences:
                incidents.append(_incident(consequences, unit))
        elif consequences:
            incidents.append(_incident(consequences + context, unit))
        elif any(m.finding.kind == "error_code" for m in context):
            # a failure only generic codes tell (507011 model execute failed): a cause, named by its code
            lead = max((m for m in context if m.finding.kind == "error_code"), key=lambda m: m.finding.count)
            lead.role = Role("cause", kinds.default.kind, kinds.default.specificity, code_label(lead.finding))
            incidents.append(_incident(context, unit))
            incidents[-1].cls = "cause"
        else:
            left.extend(m.finding for m in context)
    for incident in incidents:
        if incident.cls == "consequence" and not incident.remote_ranks:
            incident.remote_ranks = sorted(set(named))[:MAX_SOURCES]
    return incidents, left


def code_label(finding: LogFinding) -> str:
    """How an incident that only a code names is called: the code's own name (ACL_ERROR_RT_MODEL_EXECUTE,
    an HCCL errNo by its HcclResult: ``HCCL errNo 0x05000001 (HCCL_E_PARA)``)."""
    code = finding.code
    if code is not None and code.title and code.exact:
        return code.title
    result = hccl_result(finding.subject)
    if result is not None:
        from npudoctor.logs.codes import explain

        named = explain(f"HCCL {result}")
        return f"HCCL errNo {finding.subject}" + (f" ({named.title})" if named is not None and named.exact else "")
    return f"error {finding.subject}"


HCCL_ERRNO = re.compile(r"0x05[0-9a-fA-F]{2}([0-9a-fA-F]{4})$|HCCL (\d+)$")


def hccl_result(code: str) -> Optional[int]:
    """The HcclResult an HCCL errNo (0x05XXNNNN) or a failed Hccl* call's code (``HCCL 9``) carries."""
    match = HCCL_ERRNO.match(code)
    if match is None:
        return None
    return int(match.group(1), 16) if match.group(1) else int(match.group(2))


def _same_event(previous: _Member, member: _Member) -> bool:
    if previous.finding.first.file != member.finding.first.file:
        return False
    if previous.pid is not None and member.pid is not None and previous.pid != member.pid:
        return False
    if previous.time is not None and member.time is not None:
        return abs((member.time - previous.time).total_seconds()) <= WINDOW_S
    return member.finding.first.line - previous.finding.last.line <= LINE_GAP or \
        member.finding.first.line - previous.finding.first.line <= LINE_GAP


def _incident(members: List[_Member], unit: Unit) -> Incident:
    # kind, class and name from the most specific cause or consequence; context only explains it
    deciding = [m for m in members if m.role.cls in ("cause", "consequence")] or members
    lead = max(deciding, key=lambda m: (m.role.specificity, m.finding.count))
    samples = [m.finding.sample for m in sorted(members, key=lambda m: -m.role.specificity)]
    op = None
    for member in sorted(members, key=lambda m: -m.role.specificity):
        op = _details(member.finding, OP_DETAILS) or (
            member.finding.subject if member.finding.rule in OP_SUBJECT_RULES else None)
        if op:
            break
    op = op or next((value for value in (first_match(OP, s) for s in samples) if value), None)
    device = unit.device
    if device is None:
        found = next((_details(m.finding, DEVICE_DETAILS) for m in members if _details(m.finding, DEVICE_DETAILS)),
                     None) or next((value for value in (first_match(DEVICE, s) for s in samples) if value), None)
        device = _int(found)
    rank = unit.rank
    if rank is None:
        rank = _int(next((value for value in (first_match(RANK, s) for s in samples) if value), None))
        rank = rank if rank is not None and rank >= 0 else None
    times = [m.time for m in members if m.time is not None]
    codes = sorted({m.finding.subject for m in members if m.finding.kind == "error_code"},
                   key=lambda c: (_code_weight(c, members), c), reverse=True)
    remote = sorted({int(r) for r in (first_match(REMOTE_RANK, s) for s in samples) if r is not None}
                    | {int(v) for m in members for v in m.finding.details.get("remote_rank", ()) if v.isdigit()})
    first = min(members, key=lambda m: m.finding.first.line).finding
    sources = sorted({str(m.finding.first) for m in members}, key=_source_order)[:MAX_SOURCES]
    label = lead.role.label + (f": {lead.finding.subject}" if lead.role.named else "")
    title = label + (f" in {op}" if op else "") + (f" on device {device}" if device is not None else "")
    fix = lead.finding.fix or next(
        (m.finding.fix for m in sorted(members, key=lambda m: -m.role.specificity) if m.finding.fix), "")
    return Incident(kind=lead.role.kind, cls=lead.role.cls, title=title, label=label, fix=fix,
                    severity="error", node=unit.node, rank=rank, device=device,
                    pid=lead.pid if lead.pid is not None else next((m.pid for m in members if m.pid), None),
                    first_time=iso(min(times)) if times else None, codes=codes, op=op, sources=sources,
                    count=sum(m.finding.count for m in members), remote_ranks=remote,
                    findings=[f"{m.finding.kind} {m.finding.subject}" for m in members], unit=unit.source,
                    order=first.first.line)


def _code_weight(code: str, members: Sequence[_Member]) -> Tuple[bool, int]:
    """Codes that decide the incident (a cause's, a consequence's) before those that only explain it."""
    return max((m.role.cls in ("cause", "consequence"), m.role.specificity) for m in members
               if m.finding.subject == code)


def _source_order(source: str) -> Tuple[str, int]:
    path, _, line = source.rpartition(":")
    return path, int(line) if line.isdigit() else 0


# -- a job's incidents -> its diagnosis -------------------------------------------------------------------
@dataclass
class Diagnosis:
    root_cause: Optional[str]
    verdict: str
    seen: int
    failed: List[str]
    waiting: List[str]
    silent: List[str]
    confidence: str
    why: List[str]
    common: bool = False

    def to_dict(self) -> Dict[str, Any]:
        return {"root_cause": self.root_cause, "verdict": self.verdict,
                "ranks": {"seen": self.seen, "failed": self.failed, "waiting": self.waiting, "silent": self.silent},
                "confidence": self.confidence, "why": list(self.why), "common_cause": self.common}


def rank_key(node: str, rank: Optional[int], device: Optional[int], source: str, pid: Optional[int] = None) -> str:
    """How one rank is named: ``rank 3`` (``node-a rank 3`` for a node's local rank), ``node-a NPU 2``,
    ``node-a pid 1234``, else the log it comes from."""
    where = f"{node} " if node else ""
    if rank is not None:
        return f"{where}rank {rank}"
    if device is not None:
        return f"{where}NPU {device}"
    if node and pid is not None:
        return f"{where}pid {pid}"
    return source


def who(incident: Incident) -> str:
    """``rank 37 (node-05, NPU 5)``, ``node-05 NPU 5``, or the log's path when nothing places it."""
    if incident.rank is not None:
        extra = [part for part in (incident.node, f"NPU {incident.device}" if incident.device is not None else "")
                 if part]
        return f"rank {incident.rank}" + (f" ({', '.join(extra)})" if extra else "")
    if incident.device is not None:
        return f"{incident.node + ' ' if incident.node else ''}NPU {incident.device}"
    if incident.node:
        return incident.node
    return ""


def headline(incident: Incident) -> str:
    """``rank 3 (node-a, NPU 3): AI Core exception in Add_718``: the place, then the title without the
    device the place already names (a rank named for its silence is its title alone)."""
    if incident.kind in INFERRED_KINDS:
        return incident.title
    place = who(incident)
    title = incident.title
    suffix = f" on device {incident.device}"
    if place and incident.device is not None and "NPU" in place and title.endswith(suffix):
        title = title[:-len(suffix)]
    return f"{place} {title}" if place else title


def sources_text(sources: Sequence[str], shown: int = 6) -> str:
    """``a.log:6,7,12 (+3)``: the sources per file, lines joined."""
    by_file: Dict[str, List[str]] = {}
    for source in sources:
        path, _, line = source.rpartition(":")
        if not line.isdigit():  # a whole log (a rank named for its silence), not a line of it
            path, line = source, ""
        by_file.setdefault(path, []).append(line)
    parts = []
    for path, lines in by_file.items():
        more = f" (+{len(lines) - shown})" if len(lines) > shown else ""
        numbers = ",".join(line for line in lines[:shown] if line)
        parts.append(f"{path}:{numbers}{more}" if numbers else path)
    return "; ".join(parts)


def _key(incident: Incident) -> str:
    return rank_key(incident.node, incident.rank, incident.device, incident.unit, incident.pid)


def _order(incident: Incident) -> Tuple[Any, ...]:
    moment = from_iso(incident.first_time)
    return (moment is None, moment or datetime.datetime.min, incident.node, incident.unit, incident.order,
            incident.kind)


def diagnose(incidents: List[Incident], units: Sequence[Unit]) -> Tuple[List[Incident], Diagnosis]:
    """Order ``incidents`` (ids I1.., roles, ``caused_by``) and name the root cause of the job.

    The same incidents and units give the same diagnosis in any order (per-node documents merged give
    what one scan of every log gives)."""
    units = _unified(units, incidents)
    incidents = _coalesced(sorted(incidents, key=lambda i: (_order(i), i.sources)))
    for number, incident in enumerate(incidents, 1):
        incident.id, incident.role, incident.caused_by = f"I{number}", "independent", None
    unit_keys = {rank_key(u.node, u.rank, u.device, u.source, u.pid) for u in units if u.rank is not None or
                 u.device is not None}
    causes = [i for i in incidents if i.cls == "cause"]
    consequences = [i for i in incidents if i.cls == "consequence"]
    failed = sorted({_key(i) for i in causes}, key=_natural)
    waiting = sorted({_key(i) for i in consequences} - set(failed), key=_natural)
    seen = len(unit_keys | set(failed) | set(waiting)) or len({u.source for u in units})
    why: List[str] = []
    silent = _silent(units, consequences, set(failed) | set(waiting)) if consequences else []
    root: Optional[Incident] = None
    confidence = "high"
    common = False
    if causes:
        root = causes[0]
        why.append(f"{_named(root)} is the earliest failure of its own (a cause, not a timeout waiting for "
                   f"another rank) at {shown_time(root.first_time)}")
        rivals = [c for c in causes[1:] if c.node != root.node and (_gap(root, c) or CLOCK_DOUBT_S) < CLOCK_DOUBT_S
                  and _key(c) != _key(root)]
        if rivals:
            confidence = "medium"
            why.append(f"{_named(rivals[0])} failed {_gap(root, rivals[0]):.1f} s later on another node: "
                       f"within what a clock offset between nodes can turn round; compare the nodes' clocks")
        common = _common(causes, seen)
        if common:
            why.append(f"{len(failed)} of {seen} ranks failed alike ({root.label}): a common cause (the "
                       f"environment, the code, the data), not one culprit")
        early = [c for c in consequences if c.node != root.node and (_gap(c, root) or 0.0) > 0]
        if early:
            confidence = "medium"
            why.append(f"{_named(early[0])} timed out {_gap(early[0], root):.1f} s before the root cause "
                       f"on another node: only a clock offset between the nodes explains that order")
    elif consequences:
        root = _inferred_root(consequences, silent, units, why)
        confidence = "medium" if root is not None else "low"
        if root is not None and root.rank is not None and root.rank in _named_ranks(consequences) and silent:
            confidence = "high"
        if root is not None:
            incidents.append(root)
            root.id = f"I{len(incidents)}"
    if root is not None:
        root.role = "root"
    by_key: Dict[str, List[Incident]] = collections.defaultdict(list)  # causes per rank, earliest first
    by_rank: Dict[int, Incident] = {}
    for cause in causes:
        by_key[_key(cause)].append(cause)
        if cause.rank is not None:
            by_rank.setdefault(cause.rank, cause)
    for incident in incidents:
        if incident is root or incident.role == "root":
            continue
        if incident.cls == "consequence":
            incident.role = "consequence"
            incident.caused_by = _cause_of(incident, by_key, by_rank, root)
    if consequences and root is None:
        why.append(f"{len(waiting)} rank(s) timed out waiting for a peer, but no log names a failure of its "
                   f"own and no rank stopped logging early: look at the ranks whose logs are missing")
    diagnosis = Diagnosis(root.id if root else None, _verdict(root, incidents, seen, common, failed), seen, failed,
                          waiting, silent, confidence if incidents else "high", why, common)
    return incidents, diagnosis


def _unified(units: Sequence[Unit], incidents: Sequence[Incident]) -> List[Unit]:
    """One process, one rank: a rank one log of a process (node and pid) tells (the run plog's
    ``rank[0]``) is the rank of its other logs (the debug plog) and of their incidents; the process's
    log stopped when the last of its logs did."""
    rank_of: Dict[Tuple[str, int], int] = {}
    device_of: Dict[Tuple[str, int], int] = {}
    stopped: Dict[Tuple[str, int], str] = {}
    for unit in units:
        if unit.pid is None:
            continue
        process = (unit.node, unit.pid)
        if unit.rank is not None:
            rank_of.setdefault(process, unit.rank)
        if unit.device is not None:
            device_of.setdefault(process, unit.device)
        if unit.last_time and (process not in stopped or
                               (from_iso(unit.last_time) or datetime.datetime.min)
                               > (from_iso(stopped[process]) or datetime.datetime.min)):
            stopped[process] = unit.last_time
    out = []
    for unit in units:
        key = (unit.node, unit.pid) if unit.pid is not None else None
        if key is not None and (key in rank_of or key in device_of or key in stopped):
            unit = Unit(unit.source, unit.node, unit.rank if unit.rank is not None else rank_of.get(key),
                        unit.device if unit.device is not None else device_of.get(key), unit.pid,
                        stopped.get(key, unit.last_time))
        out.append(unit)
    for incident in incidents:
        if incident.pid is not None:
            process = (incident.node, incident.pid)
            if incident.rank is None:
                incident.rank = rank_of.get(process)
            if incident.device is None:
                incident.device = device_of.get(process)
    return out


def _coalesced(incidents: Sequence[Incident]) -> List[Incident]:
    """One event seen in two logs of one process (the host plog and the device log of its pid): the same
    kind within :data:`WINDOW_S` is one incident, its evidence joined (``incidents`` in order)."""
    out: List[Incident] = []
    open_events: Dict[Tuple[str, int, str, str], Incident] = {}
    for incident in incidents:
        moment = from_iso(incident.first_time)
        key = (incident.node, incident.pid, incident.kind, incident.cls) if incident.pid is not None else None
        kept = open_events.get(key) if key is not None else None
        kept_at = from_iso(kept.first_time) if kept is not None else None
        if kept is None or moment is None or kept_at is None or (moment - kept_at).total_seconds() > WINDOW_S \
                or kept.unit == incident.unit or _apart(kept, incident):
            out.append(incident)
            if key is not None:
                open_events[key] = incident
            continue
        kept.codes += [c for c in incident.codes if c not in kept.codes]
        kept.sources = (kept.sources + [s for s in incident.sources if s not in kept.sources])[:MAX_SOURCES]
        kept.findings += [f for f in incident.findings if f not in kept.findings]
        kept.remote_ranks = sorted(set(kept.remote_ranks) | set(incident.remote_ranks))[:MAX_SOURCES]
        kept.count += incident.count
        if kept.op is None and incident.op is not None:
            kept.op, kept.title = incident.op, incident.title
        for name in ("rank", "device"):
            if getattr(kept, name) is None:
                setattr(kept, name, getattr(incident, name))
    return out


def _apart(one: Incident, other: Incident) -> bool:
    """Two ranks or two NPUs for certain (a pid printed alike in two ranks' logs is no process)."""
    return any(a is not None and b is not None and a != b
               for a, b in ((one.rank, other.rank), (one.device, other.device)))


def _natural(key: str) -> Tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key))


def _named(incident: Incident) -> str:
    place = who(incident)
    return f"{place}: {incident.title}" if place else incident.title


def _gap(first: Incident, later: Incident) -> Optional[float]:
    a, b = from_iso(first.first_time), from_iso(later.first_time)
    return None if a is None or b is None else (b - a).total_seconds()


def _common(causes: Sequence[Incident], seen: int) -> bool:
    by_rank: Dict[str, Incident] = {}
    for cause in causes:
        by_rank.setdefault(_key(cause), cause)
    if len(by_rank) < 2 or len(by_rank) < COMMON_SHARE * seen:
        return False
    times = sorted(t for t in (from_iso(c.first_time) for c in by_rank.values()) if t is not None)
    if times and (times[-1] - times[0]).total_seconds() > COMMON_WINDOW_S:
        return False  # alike but apart in time: one after the other, the first is the root
    return len({(c.kind, c.label, c.op, tuple(c.codes[:1])) for c in by_rank.values()}) == 1


def _named_ranks(consequences: Sequence[Incident]) -> collections.Counter:
    named: collections.Counter = collections.Counter()
    for incident in consequences:
        named.update(set(incident.remote_ranks))
    return named


def _silent(units: Sequence[Unit], consequences: Sequence[Incident], reporting: Iterable[str]) -> List[str]:
    """Ranks (known by rank or NPU) that logged, reported nothing while the others waited, and whose log
    stopped before the first of those timeouts on their node (or carries no time to tell)."""
    reporting = set(reporting)
    first_wait: Dict[str, datetime.datetime] = {}
    for incident in consequences:
        moment = from_iso(incident.first_time)
        if moment is not None and (incident.node not in first_wait or moment < first_wait[incident.node]):
            first_wait[incident.node] = moment
    silent = set()
    for unit in units:
        if unit.rank is None and unit.device is None:
            continue
        key = rank_key(unit.node, unit.rank, unit.device, unit.source, unit.pid)
        if key in reporting:
            continue
        stopped, waited = from_iso(unit.last_time), first_wait.get(unit.node)
        if stopped is not None and waited is not None and stopped >= waited:
            continue  # it was still logging when the others timed out: not silent
        silent.add(key)
    return sorted(silent, key=_natural)


def _inferred_root(consequences: Sequence[Incident], silent: Sequence[str], units: Sequence[Unit],
                   why: List[str]) -> Optional[Incident]:
    """No cause logged: the rank the waiting ranks name, else the one rank that went silent."""
    waiting = len({_key(i) for i in consequences})
    named = _named_ranks(consequences)
    if named:
        rank, votes = named.most_common(1)[0]
        why.append(f"{votes} of {waiting} waiting rank(s) name rank {rank} as the remote rank they waited for")
        own = sorted((i for i in consequences if i.rank == rank), key=_order)
        if not own:
            return _named_root(rank, consequences, units)
        # the named rank itself only waited: the first failure is further down the chain, not in these logs
        further = sorted({r for i in own for r in i.remote_ranks} - {rank})
        why.append(f"rank {rank} itself only timed out (first at {shown_time(own[0].first_time)}"
                   + (f", waiting for rank {_range(further)}" if further else "") + ")")
    if len(silent) == 1:
        unit = next(u for u in units if rank_key(u.node, u.rank, u.device, u.source, u.pid) == silent[0])
        where = f" on {unit.node}" if unit.node else ""
        when = f"stopped logging at {shown_time(unit.last_time)}" if unit.last_time else "stopped logging"
        title = (f"{silent[0]} {when} and never reported the timeout the other {waiting} rank(s) reported: "
                 f"it was probably killed; check dmesg / the OOM killer{where}")
        why.append(f"{silent[0]} is the only rank that reported nothing while {waiting} rank(s) waited")
        return Incident(kind="silent_rank", cls="cause", title=title, label=silent[0], fix=(
            f"Check dmesg and the OOM killer{where} (dmesg -T | grep -i -e oom -e killed), and the job "
            f"scheduler's record of that process."), severity="error", node=unit.node, rank=unit.rank,
            device=unit.device, first_time=unit.last_time, sources=[unit.source], unit=unit.source)
    if len(silent) > 1:
        why.append(f"{len(silent)} ranks reported nothing while the others waited ({', '.join(silent[:8])}): "
                   f"one of them failed first")
    return None


def _named_root(rank: int, consequences: Sequence[Incident], units: Sequence[Unit]) -> Incident:
    """The rank the waiting ranks name, which logged no failure and no timeout of its own: what its log
    says of it (still logging: it hung; stopped early: probably killed; absent: read its node's logs)."""
    unit = next((u for u in units if u.rank == rank), None)
    first_wait = min((t for t in (from_iso(i.first_time) for i in consequences) if t is not None), default=None)
    stopped = from_iso(unit.last_time) if unit is not None else None
    if unit is not None and stopped is not None and first_wait is not None and stopped >= first_wait:
        title = (f"rank {rank}, named by the waiting ranks, reported no error of its own and was still logging "
                 f"at {shown_time(unit.last_time)}: it hung or fell behind (py-spy dump its process)")
    elif unit is not None and unit.last_time:
        title = (f"rank {rank}, named by the waiting ranks, stopped logging at {shown_time(unit.last_time)} "
                 f"and reported no error of its own: it was probably killed; check dmesg / the OOM killer"
                 + (f" on {unit.node}" if unit.node else ""))
    elif unit is not None:
        title = f"rank {rank}, named by the waiting ranks, logged no error of its own"
    else:
        title = f"rank {rank}, named by the waiting ranks, left no log among the inputs: read its node's logs"
    return Incident(kind="named_rank", cls="cause", title=title, label=f"rank {rank}", fix=(
        "Read that rank's own logs (plog, stderr, dmesg on its node): it failed or was killed first."),
        severity="error", node=unit.node if unit else "", rank=rank, device=unit.device if unit else None,
        first_time=unit.last_time if unit else None, sources=[unit.source] if unit else [],
        unit=unit.source if unit else "")


def _cause_of(incident: Incident, by_key: Mapping[str, Sequence[Incident]], by_rank: Mapping[int, Incident],
              root: Optional[Incident]) -> Optional[str]:
    """The cause a consequence follows: an earlier one on its own rank, else one on a rank it waits for,
    else the job's root cause (causes indexed per rank: linear in the job's size)."""
    moment = from_iso(incident.first_time)
    for cause in by_key.get(_key(incident), ()):
        at = from_iso(cause.first_time)
        if at is None or moment is None or at <= moment:
            return cause.id
    for rank in incident.remote_ranks:
        if rank in by_rank:
            return by_rank[rank].id
    return root.id if root is not None else None


def _range(values: Sequence[int]) -> str:
    """``0-5,7,9-12``."""
    values = sorted(set(values))
    parts: List[str] = []
    start = prev = values[0] if values else 0
    value: Optional[int]
    for value in [*values[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
        if value is not None:
            start = prev = value
    return ",".join(parts)


def fold(incidents: Sequence[Incident]) -> List[Tuple[str, List[Incident]]]:
    """Incidents of one role folded per kind and label: [(label, incidents)], biggest first."""
    groups: Dict[str, List[Incident]] = collections.defaultdict(list)
    for incident in incidents:
        groups[incident.label].append(incident)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


def ranks_text(incidents: Sequence[Incident]) -> str:
    """``ranks 0-5,7`` / ``node-a NPU 0-7, node-b NPU 0-3`` / the sources, for a folded line."""
    ranks = [i.rank for i in incidents if i.rank is not None]
    if ranks and len(ranks) == len(incidents):
        unique = sorted(set(ranks))
        return f"rank{'s' if len(unique) > 1 else ''} {_range(unique)}"
    by_node: Dict[str, List[int]] = collections.defaultdict(list)
    loose = []
    for incident in incidents:
        if incident.device is not None:
            by_node[incident.node].append(incident.device)
        elif incident.rank is not None:
            loose.append(f"rank {incident.rank}")
        else:
            loose.append(_key(incident))
    parts = [f"{node + ' ' if node else ''}NPU {_range(devices)}" for node, devices in sorted(by_node.items())]
    unique_loose = sorted(set(loose), key=_natural)
    parts += unique_loose[:4] + ([f"+{len(unique_loose) - 4} more"] if len(unique_loose) > 4 else [])
    return ", ".join(parts)


def codes_text(incidents: Sequence[Incident]) -> str:
    """``EI0002 x63, ERR02005 x63`` (per incident, not per line)."""
    counts: collections.Counter = collections.Counter()
    for incident in incidents:
        counts.update(incident.codes[:3])
    return ", ".join(f"{code} x{n}" if n > 1 else code for code, n in counts.most_common(4))


def span_text(incidents: Sequence[Incident]) -> str:
    times = sorted(t for t in (from_iso(i.first_time) for i in incidents) if t is not None)
    if not times:
        return ""
    first, last = times[0], times[-1]
    if first == last:
        return _clock(first)
    return f"{_clock(first)}-{_clock(last)}"


def _clock(moment: datetime.datetime) -> str:
    return moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def _verdict(root: Optional[Incident], incidents: Sequence[Incident], seen: int, common: bool,
             failed: Sequence[str]) -> str:
    if not incidents:
        return f"No failure found in {seen} log{'s' if seen != 1 else ''} (no error that stops a job)."
    consequences = [i for i in incidents if i.role == "consequence"]
    if root is None and not consequences:
        return f"{len(incidents)} independent incident(s), none a consequence of another: {incidents[0].title}."
    if root is None:
        detail = ", ".join(part for part in (codes_text(consequences) or consequences[0].label,
                                             span_text(consequences)) if part)
        return (f"No root cause logged: {len({_key(i) for i in consequences})} rank(s) timed out waiting for a "
                f"peer ({detail}) but no log says which failed first.")
    codes = f" ({', '.join(root.codes[:4])})" if root.codes else ""
    when = f" at {shown_time(root.first_time)}" if root.first_time else ""
    if common:
        text = f"Common cause: {len(failed)} ranks failed alike: {root.title}{when}{codes}; not one culprit."
    elif root.kind in INFERRED_KINDS:
        text = f"Root cause: {root.title}."
    else:
        text = f"Root cause: {headline(root)}{when}{codes}."
    waiters = {_key(i) for i in consequences if _key(i) != _key(root)}
    if waiters:
        detail = ", ".join(part for part in (codes_text(consequences), span_text(consequences)) if part)
        how = "timed out in HCCL" if {i.kind for i in consequences} == {"hccl_timeout"} else "timed out"
        text = text[:-1] + (f"; {len(waiters)} rank{'s' if len(waiters) != 1 else ''} then {how} waiting for it"
                            + (f" ({detail})" if detail else "") + ".")
    return text
