"""The scan engine: bytes in, record counts and merged findings out. Pure: it never opens a file.

Speed comes from doing almost nothing per uninteresting line. Input is taken in big chunks cut at the last
newline. Per chunk, one ``findall`` over the bytes counts plog/slog records per (level, module). A chunk that
is (nearly) all plog records is searched only for ``[ERROR]``/``[WARNING]`` and the few literals of
``any_level`` rules, with ``bytes.find`` (C speed); any other text (console output, ATC, torch_npu) goes
through one compiled prefilter of every rule's hint literals and the error-code grammar. Only the lines found
that way are decoded (UTF-8, then GB18030) and matched against the full rule patterns.

    >>> scanner = Scanner()
    >>> _ = scanner.scan_bytes("plog-1.log",
    ...     b"[INFO] GE(1,python):2025-01-01-00:00:00.000.000 [a.cc:1]1 ok\\n"
    ...     b"[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.001 [api_c.cc:9]1 "
    ...     b"rtModelExecute:ErrCode=507011\\n")
    >>> result = scanner.result()
    >>> sorted(result.levels.items()), [(f.kind, f.subject, f.count) for f in result.findings]
    ([('ERROR', 1), ('INFO', 1)], [('error_code', '507011', 1)])
"""

from __future__ import annotations

import collections
import functools
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Counter, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from npudoctor.logs import codes as codebase
from npudoctor.logs.rules import SEVERITIES, Rule, RuleSet, default_rules
from npudoctor.probes.runner import decode_text

CHUNK_BYTES = 8 * 1024 * 1024
# A "line" without a newline for this long (binary junk, one-line dumps) is cut, to keep memory constant.
MAX_LINE_BYTES = 4 * 1024 * 1024
# Only this much of one line is decoded and matched (the interesting part of a record is at its start).
MAX_MATCH_CHARS = 16 * 1024
SAMPLE_CHARS = 300
# A chunk counts as plog when at least this share of its lines are plog/slog records.
PLOG_SHARE = 0.9

# plog/slog record header, as bytes: `[LEVEL] MODULE(PID,`. Counting records is the one thing done for every
# line, so the common case (a record at the start of a line) has its own pattern with a `\n[` prefix and one
# group (LEVEL] MODULE): about twice as fast as the general pattern, which finds records anywhere in a line
# (console output where another logger prefixes or indents them).
RECORD_AT_LINE_START = re.compile(
    rb"\n\[((?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE|NULL|\d{1,2})\] ?(?:[A-Z][A-Z0-9_]*|\d+))\(")
RECORD_FIRST_LINE = re.compile(
    rb"\[((?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE|NULL|\d{1,2})\] ?(?:[A-Z][A-Z0-9_]*|\d+))\(")
RECORD_ANYWHERE = re.compile(
    rb"\[((?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE|NULL|\d{1,2})\] ?(?:[A-Z][A-Z0-9_]*|\d+))\(-?\d+,")
# slogd's own log: `2025-05-07 19:54:54.608[INFO] log_path_mgr.c:123: msg`.
SLOGD_HEADER = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\[(ERROR|WARNING|INFO|DEBUG|EVENT)\] ")
PLOG_MARKERS: Tuple[bytes, ...] = (b"[ERROR]", b"[WARNING]")

# The same grammar on decoded text, with all fields.
RECORD = re.compile(
    r"\[(?P<level>[A-Z]+|\d{1,2})\] ?(?P<module>[A-Z][A-Z0-9_]*|\d+)\((?P<pid>-?\d+),(?P<pname>[^)]*)\):"
    r"(?P<ts>\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d(?:\.\d{3}\.\d{3})?)")
SLOGD_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\[(?P<level>[A-Z]+)\] ")
# Error codes: CANN error-message codes (EZ9999, EI0006, E19010, W11001), torch_npu ERR codes, numeric
# AscendCL/runtime results after the words that introduce them, HCCL errNo.
# (Each pattern starts with a literal or a small class so that the regex engine can skip ahead.)
CODE = re.compile(r"([EW])(?<![A-Za-z0-9_][EW])([0-9A-Z]\d{4}|RR\d{5})(?!\d)")
NUMERIC_CODE = re.compile(r"(?i:error ?code is|errcode=|errorcode=|ge result\[|result\[|runtime result = |"
                          r"result = |ErrorNo: )\s*(\d{5,10})(?!\d)")
NUMERIC_CODE_GUARDS = ("ode is", "ode=", "esult", "rrorNo")
HCCL_ERRNO = re.compile(r"errNo\[(0x[0-9a-fA-F]{1,16})\]")
CODE_BYTES = (rb"(?<![A-Za-z0-9_])(?:[EW][0-9A-Z]\d{4}|ERR\d{5})(?!\d)"
              rb"|(?i:error ?code is|errcode=|errorcode=|result\[|result = |ErrorNo: )\s*\d{5}|errNo\[0x")
TEXT_LEVEL_MARKERS: Tuple[bytes, ...] = (b"[ERROR]", b"[WARNING]", b"[Error]", b"Inner Error",
                                         b"Internal Error", b"Traceback")

SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}  # error=0 is the worst


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


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


@dataclass
class FileSummary:
    """What one input was: its format, how many lines and records, and whether it could be read."""

    path: str
    status: str = "ok"  # "ok", "unreadable", "partial" (a read error after some data)
    error: Optional[str] = None
    format: str = "unknown"
    lines: int = 0
    records: int = 0
    bytes: int = 0
    cut_lines: int = 0  # over-long lines that were cut at MAX_LINE_BYTES
    _votes: Counter[str] = field(default_factory=collections.Counter)
    _binary: bool = False

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"path": self.path, "status": self.status, "format": self.format,
                               "records": self.records, "lines": self.lines, "bytes": self.bytes}
        if self.error:
            out["error"] = self.error
        if self.cut_lines:
            out["cut_lines"] = self.cut_lines
        return out


@dataclass
class ScanResult:
    files: List[FileSummary]
    levels: Counter[str]
    modules: Counter[str]
    codes: Counter[str]
    findings: List[LogFinding]

    @property
    def readable_files(self) -> List[FileSummary]:
        return [f for f in self.files if f.status != "unreadable"]

    def severity_counts(self) -> Dict[str, int]:
        counts = {name: 0 for name in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return counts


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


class Scanner:
    """Scan any number of inputs; findings merge across all of them (per kind and subject)."""

    def __init__(self, rules: Optional[RuleSet] = None) -> None:
        self.rules = rules if rules is not None else default_rules()
        self.levels: Counter[str] = collections.Counter()
        self.modules: Counter[str] = collections.Counter()
        self.codes: Counter[str] = collections.Counter()
        self.files: List[FileSummary] = []
        self._merged: Dict[Tuple[str, str], LogFinding] = {}
        self._plog_finds = tuple(dict.fromkeys(PLOG_MARKERS + self.rules.any_level_hints))
        literals = tuple(dict.fromkeys(TEXT_LEVEL_MARKERS + self.rules.all_hints))
        self._text_prefilter = re.compile(b"|".join(re.escape(lit) for lit in literals) + b"|" + CODE_BYTES)
        self._hints = tuple(dict.fromkeys(h for r in self.rules.rules for h in r.hints))

    # ---- inputs -----------------------------------------------------------------------------------------
    def scan_bytes(self, name: str, data: bytes) -> FileSummary:
        return self.scan_stream(name, iter((data,)))

    def scan_stream(self, name: str, chunks: Iterable[bytes]) -> FileSummary:
        """Scan one input given as a stream of byte chunks of any size (memory stays bounded).

        A read error raised by ``chunks`` (OSError, EOFError of a cut .gz) marks the file "partial" or
        "unreadable" and the scan goes on with the next input.
        """
        summary = FileSummary(name)
        self.files.append(summary)
        carry = b""
        line_base = 0
        first = True
        iterator: Iterator[bytes] = iter(chunks)
        while True:
            try:
                chunk = next(iterator)
            except StopIteration:
                break
            except (OSError, EOFError, ValueError, zlib.error) as exc:
                summary.status = "partial" if summary.bytes else "unreadable"
                summary.error = _one_line(exc)
                break
            if not chunk:
                continue
            summary.bytes += len(chunk)
            if first:
                summary._binary = chunk[:65536].count(b"\x00") > 16
                first = False
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            if len(data) - cut > MAX_LINE_BYTES:  # no newline for too long: cut it, memory stays bounded
                summary.cut_lines += 1
                line_base = self.scan_lines(summary, data + b"\n", line_base)
                carry = b""
            elif cut:
                line_base = self.scan_lines(summary, data, line_base, end=cut)
                carry = data[cut:]
            else:
                carry = data
            del data, chunk  # hold at most one chunk while the next one is read
        if carry:  # a last line without its newline (truncated file)
            line_base = self.scan_lines(summary, carry + b"\n", line_base)
        summary.lines = line_base
        summary.format = _file_format(summary)
        return summary

    def add_unreadable(self, name: str, error: str) -> FileSummary:
        """Report an input that could not be opened at all; the scan of the others goes on."""
        summary = FileSummary(name, status="unreadable", error=error)
        self.files.append(summary)
        return summary

    # ---- the engine ---------------------------------------------------------------------------------------
    def scan_lines(self, summary: FileSummary, data: bytes, line_base: int, end: Optional[int] = None) -> int:
        """Scan the complete lines ``data[:end]`` (ending with a newline) of the input ``summary``, whose
        first line is line ``line_base + 1``; return the line count after them."""
        end = len(data) if end is None else end
        first = RECORD_FIRST_LINE.match(data, 0, end)
        headers = RECORD_AT_LINE_START.findall(data, 0, end)
        if first:
            headers.append(first.group(1))
        records = len(headers)
        if records:
            # Assume plog; the exact line count comes out of locating the candidates (one pass over the
            # newlines), and if fewer than PLOG_SHARE of the lines are records the chunk is redone as text.
            located, newlines = _locate(data, end, self._plog_candidates(data, end), line_base)
            plog_mode = records >= PLOG_SHARE * newlines
        else:
            plog_mode = False
        if not plog_mode:
            # Not (only) plog records at line starts: console output, prefixed or indented records, slogd.
            headers = RECORD_ANYWHERE.findall(data, 0, end)
            slogd = SLOGD_HEADER.findall(data, 0, end)
            headers.extend(level + b"] SLOGD" for level in slogd)
            summary._votes["slogd"] += len(slogd)
            records = len(headers)
            hits = self._text_prefilter.finditer(data, 0, end)
            starts = {data.rfind(b"\n", 0, m.start()) + 1 for m in hits}
            located, newlines = _locate(data, end, starts, line_base)
        for header, n in collections.Counter(headers).items():
            level, _, module = header.partition(b"]")
            self.levels[level.decode()] += n
            self.modules[module.strip().decode()] += n
        summary.records += records
        summary._votes["records"] += records
        for start, lineno in located:
            stop = data.find(b"\n", start, end)
            raw = data[start:min(stop, start + MAX_MATCH_CHARS * 2)]
            self._analyze_line(summary, decode_text(raw)[:MAX_MATCH_CHARS].rstrip("\r\n"), lineno)
        return line_base + newlines

    def _plog_candidates(self, data: bytes, end: int) -> Set[int]:
        """Starts of the lines holding an ERROR/WARNING record or an any-level rule's hint."""
        starts: Set[int] = set()
        find, rfind = data.find, data.rfind
        for marker in self._plog_finds:
            at = find(marker, 0, end)
            while at >= 0:
                starts.add(rfind(b"\n", 0, at) + 1)
                line_end = find(b"\n", at, end)
                at = find(marker, line_end, end) if line_end >= 0 else -1
        return starts

    def analyze_line(self, text: str) -> List[LineHit]:
        """Everything one decoded line says: rule hits, error codes, or a bare ERROR/WARNING record."""
        hits: List[LineHit] = []
        present = {hint for hint in self._hints if hint in text}
        if present:
            for rule in self.rules.rules:
                if present.isdisjoint(rule.hints):
                    continue
                match = rule.pattern.search(text)
                if match is not None:
                    hits.append(_rule_hit(rule, match))
        seen: Set[str] = set()
        for found in _codes_in(text):
            if found in seen:
                continue
            seen.add(found)
            hits.append(_code_hit(found))
        if not hits:
            record = RECORD.search(text)
            level = record.group("level") if record else None
            if level is None:
                slogd = SLOGD_RECORD.match(text)
                level = slogd.group("level") if slogd else None
            module = record.group("module") if record else "SLOGD"
            if level == "ERROR":
                hits.append(LineHit("error_record", module, "error", f"ERROR records of {module}"))
            elif level == "WARNING":
                hits.append(LineHit("warning_record", module, "warn", f"WARNING records of {module}"))
        return hits

    def _analyze_line(self, summary: FileSummary, text: str, lineno: int) -> None:
        where = Evidence(summary.path, lineno)
        for hit in self.analyze_line(text):
            if hit.kind == "error_code":
                self.codes[hit.subject] += 1
                if hit.subject.startswith("ERR"):
                    summary._votes["torch_npu"] += 1
                else:
                    summary._votes["cann-error"] += 1
            elif hit.rule:
                rule_format = next((r.format for r in self.rules.rules if r.id == hit.rule), "")
                if rule_format:
                    summary._votes[rule_format] += 1
            key = (hit.kind, hit.subject)
            merged = self._merged.get(key)
            if merged is None:
                merged = self._merged[key] = LogFinding(
                    kind=hit.kind, subject=hit.subject, severity=hit.severity, title=hit.title, count=0,
                    first=where, last=where, sample=text.strip()[:SAMPLE_CHARS], fix=hit.fix, rule=hit.rule,
                    code=hit.code)
            merged.count += 1
            merged.last = where
            if SEVERITY_RANK[hit.severity] < SEVERITY_RANK[merged.severity]:
                merged.severity = hit.severity
            for name, value in hit.details:
                values = merged.details.setdefault(name, set())
                if len(values) < 100:
                    values.add(value)

    def result(self) -> ScanResult:
        findings = sorted(self._merged.values(),
                          key=lambda f: (SEVERITY_RANK[f.severity], f.kind, -f.count, f.subject))
        return ScanResult(list(self.files), self.levels, self.modules, self.codes, findings)


def _rule_hit(rule: Rule, match: re.Match[str]) -> LineHit:
    groups = {k: v.strip() for k, v in match.groupdict().items() if v}
    subject = groups.pop("subject", "") or rule.subject or rule.kind
    groups.pop("code", None)
    return LineHit(rule.kind, subject, rule.severity, rule.title, rule.fix, rule.id,
                   details=tuple(sorted(groups.items())))


def _locate(data: bytes, end: int, starts: Iterable[int],
            line_base: int) -> Tuple[List[Tuple[int, int]], int]:
    """(line start, line number) for each of ``starts``, and the newline count of ``data[:end]``: one pass."""
    located: List[Tuple[int, int]] = []
    position, lineno = 0, line_base
    for start in sorted(starts):
        lineno += data.count(b"\n", position, start)
        position = start
        located.append((start, lineno + 1))
    return located, lineno - line_base + data.count(b"\n", position, end)


@functools.lru_cache(maxsize=4096)
def _code_hit(code: str) -> LineHit:
    info = codebase.explain(code)
    severity = info.severity if info else ("warn" if code.startswith("W") else "error")
    title = f"{code} {info.title}" if info else f"error code {code}"
    return LineHit("error_code", code, severity, title, info.fix if info else "", "", info)


def _codes_in(text: str) -> Iterator[str]:
    for letter, rest in CODE.findall(text):
        yield letter + rest
    if any(guard in text for guard in NUMERIC_CODE_GUARDS):
        yield from NUMERIC_CODE.findall(text)
    if "errNo[" in text:
        for errno in HCCL_ERRNO.findall(text):
            yield codebase.normalize(errno)


def _file_format(summary: FileSummary) -> str:
    votes = summary._votes
    if summary.lines == 0:
        return "empty"
    if summary._binary:
        return "binary"
    if votes["slogd"] >= PLOG_SHARE * summary.lines / 2:
        return "slogd"
    if votes["records"] >= summary.lines / 2:
        return "plog"
    for name in ("atc", "torch_npu", "cann-error"):
        if votes[name]:
            return name
    return "text"


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__
    return text.splitlines()[0] if text else exc.__class__.__name__
