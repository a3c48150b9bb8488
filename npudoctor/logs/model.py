"""The log doctor's data: what a scan finds (findings, file summaries, results) and the severities rules use.

The scanner makes these, the rules name severities and kinds, the renderers read them: none of them needs the
others' code to know the shapes.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Counter, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from npudoctor.logs import codes as codebase
from npudoctor.model.finding import Status
from npudoctor.untrusted import clean

SEVERITIES: Sequence[str] = ("error", "warn", "fallback", "info")
# How a finding's severity reads, in the statuses people already know from `npudoctor check`.
SEVERITY_STATUS: Mapping[str, Status] = {
    "error": Status.FAIL, "warn": Status.WARN, "fallback": Status.WARN, "info": Status.PASS}
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}  # error=0 is the worst
# The finding kinds the scanner gives itself (see _code_hit, _bare_record) and `--expect-success` adds
# (npudoctor.logs.finished); the rules give all the others.
BUILTIN_KINDS: Tuple[str, ...] = ("error_code", "error_record", "warning_record", "unfinished_run")


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int

    def __str__(self) -> str:
        return clean(f"{self.file}:{self.line}")  # a path is shown like any text it quotes: cleaned


@dataclass
class LogFinding:
    """One cause, merged over every line (and file) that shows it."""

    kind: str
    subject: str
    severity: str
    title: str
    count: int
    first: Evidence
    last: Evidence
    sample: str
    fix: str = ""
    rule: str = ""
    code: Optional[codebase.CodeInfo] = None
    details: Dict[str, Set[str]] = field(default_factory=dict)  # other named groups (engine, node, port)

    def to_dict(self) -> Dict[str, Any]:
        evidence: Dict[str, Any] = {"first": str(self.first), "last": str(self.last), "sample": self.sample}
        for key, values in sorted(self.details.items()):
            evidence[key] = sorted(values)[:20]
        return {"kind": self.kind, "subject": self.subject, "severity": self.severity, "title": self.title,
                "count": self.count, "rule": self.rule, "evidence": evidence, "fix": self.fix,
                "explain": self.code.to_dict() if self.code else None}


@dataclass(frozen=True)
class ErrorLine:
    """The first error line of a file that no rule, code or record header explains (``times`` lines of its
    shape, the last at ``last``), its best reading, and the title and sample that quote it."""

    line: int
    last: int
    times: int
    reading: str
    title: str
    sample: str


@dataclass
class FileSummary:
    """What one input was: its format, how many lines and records, and whether it could be read."""

    path: str
    status: str = "ok"  # "ok", "unreadable", "partial" (a read error after some data)
    rank: str = ""  # N of the rank_N folder the file lies in (its findings carry it as `rank`)
    error: Optional[str] = None
    format: str = "unknown"
    lines: int = 0
    records: int = 0
    bytes: int = 0
    cut_lines: int = 0  # over-long lines that were cut at scanner.LONG_LINE_PIECE
    examined_lines: int = 0  # lines the prefilter passed on to the full grammar
    # error-level lines no finding of their own covers: error lines in words no rule knows, and ERROR records
    # only counted per module (error_record)
    unexplained_error_lines: int = 0
    first_error_line: Optional[ErrorLine] = None  # the first of those error lines in words
    error_lines: int = 0  # how many error lines in words
    last_error_line: int = 0
    causes: Counter[Tuple[str, str]] = field(default_factory=collections.Counter)  # (kind, subject) -> lines
    _votes: Counter[str] = field(default_factory=collections.Counter)
    _binary: bool = False
    _in_long_line: bool = False  # the line being read has been cut into pieces already

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"path": self.path, "status": self.status, "format": self.format,
                               "records": self.records, "lines": self.lines, "bytes": self.bytes}
        if self.error:
            out["error"] = self.error
        if self.cut_lines:
            out["cut_lines"] = self.cut_lines
        out["examined_lines"] = self.examined_lines
        out["unexplained_error_lines"] = self.unexplained_error_lines
        if self.rank:
            out["rank"] = self.rank
        return out

    def note_error_line(self, error_line: ErrorLine) -> None:
        """Count ``error_line.times`` error lines in words; keep the first one met (lines come in order)."""
        if self.first_error_line is None or error_line.line < self.first_error_line.line:
            self.first_error_line = error_line
        self.error_lines += error_line.times
        self.last_error_line = max(self.last_error_line, error_line.last)


@dataclass
class ScanResult:
    files: List[FileSummary]
    levels: Counter[str]
    modules: Counter[str]
    codes: Counter[str]
    findings: List[LogFinding]
    # (path, reason) of what a folder walk passed over: "not logs", "not a regular file (fifo)", ...
    skipped: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def readable_files(self) -> List[FileSummary]:
        return [f for f in self.files if f.status != "unreadable"]

    def severity_counts(self) -> Dict[str, int]:
        counts = {name: 0 for name in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return counts


@dataclass
class ScanPart:
    """What one byte range of an input holds, line numbers counted from the range's first line.

    Ranges of one big file can be scanned in separate processes (:meth:`Scanner.export_part`) and put
    together in order (:meth:`Scanner.add_parts`); the result is the same as one scan of the whole file.
    """

    summary: FileSummary
    levels: Counter[str]
    modules: Counter[str]
    codes: Counter[str]
    findings: List[LogFinding]


@dataclass(frozen=True)
class LineHit:
    kind: str
    subject: str
    severity: str
    title: str = ""
    fix: str = ""
    rule: str = ""
    code: Optional[codebase.CodeInfo] = None
    details: Tuple[Tuple[str, str], ...] = ()
