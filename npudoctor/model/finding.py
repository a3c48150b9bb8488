"""Findings and reports: the contract every check, renderer and script relies on."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence


class Status(str, enum.Enum):
    """Outcome of one check on one subject.

    SKIP means the check could not apply (with the reason in ``detail``); ERROR means the check itself broke.
    Neither ever reads as passed.
    """

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"


STATUS_ORDER: Sequence[Status] = (Status.PASS, Status.WARN, Status.FAIL, Status.SKIP, Status.ERROR)


@dataclass(frozen=True)
class Finding:
    """One verdict: which check (``id``), on what (``subject``), what was seen, and how to fix it.

    ``evidence`` holds numbers and strings with units in the keys (``temp_c``, ``link_width``).
    ``fix`` is a command or a step for a person; npudoctor never runs it on its own.
    """

    id: str
    status: Status
    title: str
    subject: str = ""
    detail: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: str = ""
    stage: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "stage": self.stage,
            "title": self.title,
            "subject": self.subject,
            "detail": self.detail,
            "evidence": dict(self.evidence),
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Summary:
    counts: Mapping[Status, int]

    @classmethod
    def of(cls, findings: Sequence[Finding]) -> Summary:
        counts = {status: 0 for status in STATUS_ORDER}
        for finding in findings:
            counts[finding.status] += 1
        return cls(counts)

    def to_dict(self) -> Dict[str, int]:
        return {status.value: self.counts.get(status, 0) for status in STATUS_ORDER}


@dataclass
class Report:
    """The findings of one run, in stage order, plus where they came from."""

    findings: List[Finding]
    tool: Dict[str, Any] = field(default_factory=dict)
    host: Dict[str, Any] = field(default_factory=dict)
    source: Optional[str] = None  # "live", "root:/mnt/img", "bundle:node.tar.gz"
    # What the node is: chips, driver/firmware/CANN/Python/torch versions, kernel, OS, host name
    # (npudoctor.probes.inventory); the fleet view compares it across nodes.
    inventory: Dict[str, Any] = field(default_factory=dict)
    # When the run started (ISO 8601, UTC) and how long it took: {"started": ..., "duration_s": ...}.
    run: Dict[str, Any] = field(default_factory=dict)

    SCHEMA = "npudoctor.report/1"

    @property
    def summary(self) -> Summary:
        return Summary.of(self.findings)

    def exit_code(self, fail_on: str = "fail") -> int:
        """0 nothing failed; 1 a FAIL or ERROR (or a WARN under ``fail_on="warn"``)."""
        statuses = {f.status for f in self.findings}
        if statuses & {Status.FAIL, Status.ERROR}:
            return 1
        if fail_on == "warn" and Status.WARN in statuses:
            return 1
        return 0

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema": self.SCHEMA,
            "tool": dict(self.tool),
            "host": dict(self.host),
            "source": self.source,
            "run": dict(self.run),
            "inventory": dict(self.inventory),
            "findings": [f.to_dict() for f in self.findings],
            "summary": self.summary.to_dict(),
        }
