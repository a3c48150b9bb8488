"""Findings and reports: the contract every check, renderer and script relies on."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor.untrusted import clean, clean_value


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
    # Why a SKIP could not apply, shared by every finding with that root cause ("not an Ascend node"); the
    # text output folds skips by it. Empty: the detail speaks for itself.
    cause: str = ""

    def __post_init__(self) -> None:
        """Whatever a finding quotes (a plog line, a process name with its arguments, a path) reaches every
        output through here: secrets are redacted and control characters removed once, for every format."""
        for name in ("title", "subject", "detail", "fix", "cause"):
            value = getattr(self, name)
            if value and isinstance(value, str):
                object.__setattr__(self, name, clean(value))
        if self.evidence:
            object.__setattr__(self, "evidence", clean_value(dict(self.evidence)))

    def to_dict(self) -> Dict[str, Any]:
        data = {
            "id": self.id,
            "status": self.status.value,
            "stage": self.stage,
            "title": self.title,
            "subject": self.subject,
            "detail": self.detail,
            "evidence": dict(self.evidence),
            "fix": self.fix,
        }
        if self.cause:  # added in npudoctor.report/1 without a version bump: readers ignore unknown keys
            data["cause"] = self.cause
        return data


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


def failing(fail_on: str = "fail") -> Tuple[Status, ...]:
    """The statuses ``--fail-on`` (``fail`` or ``warn``) fails on, in every command and format (an ERROR fails
    a run as well, as an outcome of its own: a JUnit error, NPD's "could not tell")."""
    return (Status.FAIL, Status.WARN) if fail_on == "warn" else (Status.FAIL,)


@dataclass
class Report:
    """The findings of one run, in stage order, plus where they came from."""

    findings: List[Finding]
    tool: Dict[str, Any] = field(default_factory=dict)
    host: Dict[str, Any] = field(default_factory=dict)
    source: Optional[str] = None  # "live", "root:/mnt/img", "bundle:node.tar.gz"
    # What the node is: chips, driver/firmware/CANN/Python/torch versions, kernel, OS, host name
    # (npudoctor.probes.inventory); the fleet view compares it across nodes. Deterministic for a replay.
    inventory: Dict[str, Any] = field(default_factory=dict)
    # For the text header only (not in the JSON document, whose bytes must not change between runs):
    started: Optional[float] = None  # time.time() when the run began
    expects: str = ""  # what the profile expects of the node, "8x 910B"; empty when nothing
    duration_s: Optional[float] = None  # how long the run took (the Prometheus textfile reports it)
    recorded: str = ""  # when a replayed bundle was collected ("2026-12-01T10:30:47+0000"); empty when live

    SCHEMA = "npudoctor.report/1"

    @property
    def summary(self) -> Summary:
        return Summary.of(self.findings)

    @property
    def nothing_checked(self) -> bool:
        """Every finding is a SKIP: the run could not check anything, which is not "no problems"."""
        return bool(self.findings) and all(f.status is Status.SKIP for f in self.findings)

    def exit_code(self, fail_on: str = "fail") -> int:
        """0 nothing failed; 1 a FAIL or ERROR (or a WARN under ``fail_on="warn"``)."""
        return 1 if {f.status for f in self.findings} & {Status.ERROR, *failing(fail_on)} else 0

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema": self.SCHEMA,
            "tool": dict(self.tool),
            "host": clean_value(dict(self.host)),
            "source": self.source,
            "inventory": clean_value(dict(self.inventory)),  # the node's text, cleaned as the findings are
            "findings": [f.to_dict() for f in self.findings],
            "summary": self.summary.to_dict(),
        }
