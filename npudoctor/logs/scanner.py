"""The scan engine: bytes in, record counts and merged findings out. Pure: it never opens a file.

Speed comes from doing almost nothing per uninteresting line. Input is taken in big chunks cut at the last
newline. Per chunk, one ``findall`` over the bytes counts plog/slog records per (level, module). A chunk that
is (nearly) all plog records is searched only for ``[ERROR]``/``[WARNING]`` and the few literals of
``any_level`` rules (one C-speed pass per group of literals, :func:`_searchers`); any other text (console
output, ATC, torch_npu) is searched for ~30 anchor literals that cover every rule hint, and for the E/W/ERR
code pattern. Only the lines found that way are decoded (UTF-8, then GB18030) and matched, all at once,
against the full grammar, once per message shape (pid and timestamp blanked). An error-dense plog chunk (a
job looping on an error) takes its ERROR/WARNING record lines apart by shape in one ``sub`` pass instead,
so that no Python step is paid per line (:meth:`Scanner._scan_dense_plog`). Byte ranges of one big file
can be scanned in separate processes and put together (:class:`ScanPart`).

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

import bisect
import collections
import dataclasses
import functools
import re
import zlib
from typing import Any, Callable, Counter, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

from npudoctor.elf.compiled import compiled_module
from npudoctor.logs import codes as codebase
from npudoctor.logs import reading
from npudoctor.logs.model import (
    SEVERITY_RANK,
    ErrorLine,
    Evidence,
    FileSummary,
    LineHit,
    LogFinding,
    ScanPart,
    ScanResult,
)
from npudoctor.logs.rules import Rule, RuleSet, default_rules
from npudoctor.parsers.text import decode_text
from npudoctor.untrusted import clean

CHUNK_BYTES = 8 * 1024 * 1024
# A "line" without a newline for this long (binary junk, one-line dumps, a log whose newlines were lost) is
# scanned in pieces of this size, each with the line's own number: memory stays constant, every byte is read.
LONG_LINE_PIECE = 16 * 1024
# Only this much of one line is decoded and matched (the interesting part of a record is at its start).
MAX_MATCH_CHARS = 16 * 1024
SAMPLE_CHARS = 300
# Distinct subjects kept per finding kind (and distinct codes); the rest are counted under OTHER_SUBJECT, so
# that a log with millions of distinct kernel names still scans in bounded memory.
MAX_SUBJECTS_PER_KIND = 500
OTHER_SUBJECT = "(other subjects)"
# Distinct values kept per detail of a finding (engines, nodes, ports), for the same reason.
MAX_DETAIL_VALUES = 100
# A chunk counts as plog when at least this share of its lines are plog/slog records.
PLOG_SHARE = 0.9

# plog/slog record header, as bytes: `[LEVEL] MODULE(PID,`. Counting records is the one thing done for every
# line, so the common case (a record at the start of a line) has its own pattern with a `\n[` prefix and one
# group (LEVEL] MODULE): about twice as fast as the general pattern, which finds records anywhere in a line
# (console output where another logger prefixes or indents them).
# Level words as CANN writes them, and as other writers mangle them (`[ERRO]`, `[WARN]`, `[error]`): see LEVELS.
# MindSpore writes the same grammar with its own levels (CRITICAL, EXCEPTION) and `(pid,tid,process)` or
# `(pid:tid,process)` in the brackets: `[ERROR] ME(26748,7f6c73867fc0,benchmark):2023-10-26-09:51:54.833.573`.
RECORD_FIRST_LINE = re.compile(
    rb"\[((?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE|CRITICAL|EXCEPTION|NULL|ERRO|ERR|WARN|error|warning|info|debug|"
    rb"event|\d{1,2})\] ?(?:[A-Z][A-Z0-9_]*|\d+))\(")
RECORD_AT_LINE_START = re.compile(b"\n" + RECORD_FIRST_LINE.pattern)
RECORD_ANYWHERE = re.compile(RECORD_FIRST_LINE.pattern + rb"-?\d+(?::\d+)?,")
# The opening bracket of a record header (replaced by a newline and itself: a literal replacement is C-fast).
RECORD_BRACKET = re.compile(rb"\[(?=" + RECORD_ANYWHERE.pattern[2:] + rb")")
# slogd's own log: `2025-05-07 19:54:54.608[INFO] log_path_mgr.c:123: msg`.
SLOGD_FIRST_LINE = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\[(ERROR|WARNING|INFO|DEBUG|EVENT)\] ")
SLOGD_AT_LINE_START = re.compile(b"\n" + SLOGD_FIRST_LINE.pattern)
PLOG_MARKERS: Tuple[bytes, ...] = (b"[ERROR]", b"[WARNING]", b"[ERRO]", b"[ERR]", b"[WARN]", b"[error]", b"[warning]",
                                   b"[CRITICAL]", b"[EXCEPTION]")
# A level word as counted and reported: the mangled spellings RECORD_FIRST_LINE accepts, as CANN's own.
# (MindSpore's CRITICAL and EXCEPTION are counted as they are; they are error-level: ERROR_LEVELS.)
LEVELS = {"ERRO": "ERROR", "ERR": "ERROR", "WARN": "WARNING", "error": "ERROR", "warning": "WARNING",
          "info": "INFO", "debug": "DEBUG", "event": "EVENT"}
ERROR_LEVELS = frozenset(("ERROR", "CRITICAL", "EXCEPTION"))
# A plog chunk with more ERROR markers than this share of its lines is error-dense (measured: below it the
# usual path, which pays per line examined, is the faster one; above it the shape pass).
DENSE_SHARE = 0.12
# ... judged on this much of its start.
DENSE_PROBE_BYTES = 512 * 1024

# The same grammar on decoded text, with all fields.
RECORD = re.compile(
    r"\[(?P<level>[A-Za-z]+|\d{1,2})\] ?(?P<module>[A-Z][A-Z0-9_]*|\d+)\((?P<pid>-?\d+(?::\d+)?),(?P<pname>[^)]*)\): ?"
    r"(?P<ts>\d{4}-\d\d-\d\d[- ]\d\d:\d\d:\d\d(?:\.\d{1,3}\.\d{1,3})?)")
SLOGD_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\[(?P<level>[A-Z]+)\] ")
# Error codes: CANN error-message codes (EZ9999, EI0006, E19010, W11001), torch_npu ERR codes, numeric
# AscendCL/runtime results after the words that introduce them, HCCL errNo.
# (Each pattern starts with a literal or a small class so that the regex engine can skip ahead.)
# How codes look in text (CODE, NUMERIC_CODE, HCCL_ERRNO) is defined once, in npudoctor.logs.codes.
# Lower-cased literals in front of every NUMERIC_CODE and HCCL_ERRNO match.
NUMERIC_CODE_GUARDS = ("ode is", "ode=", "esult", "rrorno", "errno[", "_error_", "hccl_e_", "_err_code_",
                       # codes.LOOSE_CODE, TS_CODE, HCCL_RESULT: `failed: N`, `(N)`, `ret=N`, `code: N`, ...
                       "ailed", "rror ", "ret", "code", "hccl function error", "(1", "(2", "(5")
# The bytes twin of codes.CODE, for the prefilter over raw chunks (which only needs where each match starts).
CODE_BYTES = re.compile(codebase.CODE.pattern.encode())
# Literals that put a line of free text (console output) in front of the full grammar, besides the rules'
# hints and the E/W/ERR code pattern: record levels and the words before numeric codes.
TEXT_MARKERS: Tuple[bytes, ...] = (
    b"[ERROR]", b"[WARNING]", b"rror code is", b"rror Code", b"RROR CODE", b"rrorCode", b"rrCode", b"rrcode",
    b"RRCODE", b"RRORCODE", b"esult[", b"esult = ", b"rrorNo: ", b"errNo[",
    # the looser contexts of codes.find_codes (an application's `failed: 507034`, `(507035)`, `ret=`, ...)
    b"ailed: ", b"ailed, ", b"ode=", b"ode =", b"ode: ", b"ret=", b"ret =", b"ret: ", b"etCode=",
    b"HCCL function error", b"(1", b"(2", b"(5", b"rror 1", b"rror 2", b"rror 5", b"ret[", b"ret is -",
    b"HCCL_E_", b"ERR_CODE_",  # codes by their vendor names (ACL_ERROR_ and DRV_ERROR_ hold the error literals)
    # error lines in words (reading.ERROR_WORDS): a line holding none of these is no error line
    *reading.ERROR_LINE_LITERALS)

# What changes between repeats of one record: the pid, process name and timestamp of its header.
# (A space may stand between the date and the time, and after the comma: `(123, python):2024-07-04 13:26:26`.)
RECORD_VARYING = re.compile(r"\(-?\d+(?::\d+)?,[^)\n]*\): ?\d{4}-\d\d-\d\d[- ]\d\d:\d\d:\d\d(?:\.\d{1,3}\.\d{1,3})?")
# Distinct message shapes whose analysis is kept (then the cache starts over).
MAX_SHAPES = 8192
# The error-dense path keeps the analysis of messages up to this long by their bytes (a few MiB at most).
MAX_KEPT_MESSAGE_BYTES = 1024
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# A second record glued onto a line by a concurrent writer that lost a newline: `...ret[9][ERROR] HCCL(...`.
RECORD_HEADER = re.compile(r"\[(?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE|CRITICAL|EXCEPTION)\] ?[A-Z][A-Z0-9_]*"
                           r"\(-?\d+(?::\d+)?,")

# An error-dense plog chunk's record lines that start with a standard ERROR/WARNING header: (level and
# module, message after the timestamp), the newline before the line included (RECORD_AT_LINE_START's trick).
DENSE_RECORD_LINE = re.compile(
    rb"\n(\[(?:ERROR|WARNING)\] ?[A-Z][A-Z0-9_]*)" + RECORD_VARYING.pattern.encode()
    + rb"([^\n]*)")
# (level and module, message) of one of its matches (the unbound method: twice as fast as a methodcaller).
_SHAPE_OF_MATCH = re.Match.groups

# A line of a plog chunk that is no record (it does not open with `[`) and holds an error word, the literals of
# reading.ERROR_WORDS: a traceback's `RuntimeError: ...` between records.
TEXT_ERROR_LINE = re.compile(rb"\n(?![\[\n])[^\n]{0,4096}?(?:Error:|Error\xef\xbc\x9a|Exception:|ERROR|CRITICAL|FATAL"
                             rb"|[Ff]ailed|FAILED|Aborted|core dumped|No such file or directory)")

# A folder of one rank's logs: `rank_0/logs/mindspore.log.1`, `log/rank.3/...`.
RANK_FOLDER = re.compile(r"(?:^|[/\\])rank[_.-]?(\d{1,5})[/\\]")

# What one line says, worked out once per message shape: its hits, and (level, module) of records glued
# after its first one.
Analysis = Tuple[List[LineHit], Tuple[Tuple[str, str], ...]]
# Lines of one shape in one chunk: (first line number, last line number, lines, first line's text, analysis).
LineGroup = Tuple[int, int, int, str, Analysis]


# The compiled pass over a plog chunk (npudoctor/logs/_plogscan.c): (data, begin, end, literals, line_base,
# forms, dense_order) -> ({b"LEVEL] MODULE": records}, records, newlines, [(first line, last line, lines, start,
# stop) per shape]).
PlogPass = Callable[[bytes, int, int, Tuple[bytes, ...], int, int, bool],
                    Tuple[Dict[bytes, int], int, int, List[Tuple[int, int, int, int, int]]]]
# The forms of a header's varying part beyond CANN's `(pid,process):date time.ms.us` that RECORD_VARYING
# takes, asked of it (the grammar is said once): the compiled pass leaves them out of a line's shape too.
VARYING_FORMS = ((RECORD_VARYING.fullmatch("(1:2,p):2025-01-01-00:00:00") is not None)
                 | (RECORD_VARYING.fullmatch("(1,p):2025-01-01-00:00:00.5.12") is not None) << 1)


def compiled_plog_pass() -> Optional[PlogPass]:
    """The compiled pass, or None where it is not built or NPUDOCTOR_PURE_PYTHON is set (read at every
    call: tests compare both in one process); the pure-Python pass gives the same findings."""
    module = compiled_module("npudoctor.logs._plogscan")
    return None if module is None else module.plog_pass


@functools.lru_cache(maxsize=4096)
def _is_record_header(header: bytes) -> bool:
    """Whether a header the compiled pass found (``LEVEL] MODULE``, any level word) is one RECORD_FIRST_LINE
    takes: the level words are said once, here."""
    return RECORD_FIRST_LINE.fullmatch(b"[" + header + b"(") is not None


class Scanner:
    """Scan any number of inputs; findings merge across all of them (per kind and subject)."""

    def __init__(self, rules: Optional[RuleSet] = None,
                 installed: Optional[codebase.Installed] = None) -> None:
        self.rules = rules if rules is not None else default_rules()
        # CANN's own registry texts read on the node (probes.cann_codes): the code findings then read as
        # `explain` shows them there. Applied once in result(), so worker processes never carry it.
        self.installed = installed or {}
        self.levels: Counter[str] = collections.Counter()
        self.modules: Counter[str] = collections.Counter()
        self.codes: Counter[str] = collections.Counter()
        self.files: List[FileSummary] = []
        self._merged: Dict[Tuple[str, str], LogFinding] = {}
        self._subjects_per_kind: Counter[str] = collections.Counter()
        self._plog_finds = PLOG_MARKERS + _shared_prefixes(self.rules.any_level_hints)
        self._plog_searchers = _searchers(self._plog_finds)
        self._text_anchors: Optional[Tuple[bytes, ...]] = None  # worked out when free text is first met
        self._rules_by_hint: Dict[str, List[int]] = {}
        for index, rule in enumerate(self.rules.rules):
            for hint in rule.hints:
                self._rules_by_hint.setdefault(hint, []).append(index)
        self._rule_format = {r.id: r.format for r in self.rules.rules if r.format}
        self._shape_hits: Dict[str, Analysis] = {}
        self._raw_shape_hits: Dict[Tuple[bytes, ...], Analysis] = {}
        # Line groups of the compiled pass not merged yet, over the chunks of one input (id(analysis) ->
        # [first line, last line, lines, text, analysis]): merged once per input, not once per chunk, at the
        # latest when scan_stream returns (none are left outside it).
        self._pending: Dict[int, List[Any]] = {}
        self._pending_summary = FileSummary("")
        self._pending_chars = 0  # the length of their texts (bounded like a chunk)

    @property
    def plog_markers(self) -> Tuple[bytes, ...]:
        """The literals searched in plog text: a line holding none of them is never decoded."""
        return self._plog_finds

    # ---- inputs -----------------------------------------------------------------------------------------
    def scan_bytes(self, name: str, data: bytes) -> FileSummary:
        return self.scan_stream(name, iter((data,)))

    def scan_stream(self, name: str, chunks: Iterable[bytes]) -> FileSummary:
        """Scan one input given as a stream of byte chunks of any size (memory stays bounded).

        A read error raised by ``chunks`` (OSError, EOFError of a cut .gz) marks the file "partial" or
        "unreadable" and the scan goes on with the next input.
        """
        summary = FileSummary(name, rank=_rank_of(name))
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
            begin = 0
            if carry:  # complete the line left over from the previous chunk
                newline = chunk.find(b"\n")
                if newline < 0:
                    carry = self._scan_long_line(summary, carry + chunk, line_base)
                    continue
                line_base = self.scan_lines(summary, carry + chunk[:newline + 1], line_base)
                begin = newline + 1
                summary._in_long_line = False
            cut = chunk.rfind(b"\n", begin) + 1
            if cut > begin:
                summary._in_long_line = False
                line_base = self.scan_lines(summary, chunk, line_base, begin, cut)
            carry = self._scan_long_line(summary, chunk[max(cut, begin):], line_base)
            del chunk  # hold at most one chunk while the next one is read
        if carry:  # a last line without its newline (truncated file)
            line_base = self.scan_lines(summary, carry + b"\n", line_base)
        self._merge_pending()
        summary.lines = line_base
        summary.format = _file_format(summary)
        return summary

    def _scan_long_line(self, summary: FileSummary, carry: bytes, line_base: int) -> bytes:
        """Scan the start of a line that has no newline yet in pieces of LONG_LINE_PIECE bytes, all with
        the line's own number (a 1 GB log without newlines is read in full, at the speed of normal lines,
        in bounded memory); return the rest, shorter than a piece, to be completed by the next chunk."""
        if len(carry) <= LONG_LINE_PIECE:
            return carry
        if not summary._in_long_line:
            summary._in_long_line = True
            summary.cut_lines += 1
        # Records whose newlines were lost start a piece each (the plog fast path applies again), cut before
        # the last record header so that none is split; text without headers is cut every LONG_LINE_PIECE.
        headers = [m.start() for m in RECORD_BRACKET.finditer(carry, max(0, len(carry) - 4 * LONG_LINE_PIECE))]
        if headers and headers[-1] > 0:
            stop = headers[-1]
            pieces = RECORD_BRACKET.sub(b"\n[", carry[:stop]) + b"\n"
        else:
            stop = len(carry) - len(carry) % LONG_LINE_PIECE
            pieces = b"\n".join(carry[at:at + LONG_LINE_PIECE] for at in range(0, stop, LONG_LINE_PIECE)) + b"\n"
        self.scan_lines(summary, pieces, line_base, one_line=True)  # one call: pieces cost like lines
        return carry[stop:]

    def export_part(self) -> ScanPart:
        """This scanner's state after scanning exactly one input (a byte range of a file)."""
        (summary,) = self.files
        self._merge_pending()
        return ScanPart(summary, self.levels, self.modules, self.codes, list(self._merged.values()))

    def add_parts(self, parts: Sequence[ScanPart]) -> FileSummary:
        """Put the parts of one input, in file order, into this scan as if it had been scanned whole."""
        summary = FileSummary(parts[0].summary.path, rank=parts[0].summary.rank)
        summary._binary = parts[0].summary._binary
        line_base = 0
        for part in parts:
            piece = part.summary
            if piece.status != "ok" and summary.status == "ok":
                summary.status = "partial" if summary.bytes or piece.bytes else "unreadable"
                summary.error = piece.error
            summary.bytes += piece.bytes
            summary.records += piece.records
            summary.cut_lines += piece.cut_lines
            summary.examined_lines += piece.examined_lines
            summary._votes.update(piece._votes)
            summary.unexplained_error_lines += piece.unexplained_error_lines
            if piece.first_error_line is not None:
                first = piece.first_error_line
                summary.note_error_line(dataclasses.replace(
                    first, line=first.line + line_base, last=piece.last_error_line + line_base,
                    times=piece.error_lines))
            for (kind, subject), n in piece.causes.items():
                summary.causes[self._capped_key(kind, subject)] += n
            self.levels.update(part.levels)
            self.modules.update(part.modules)
            for code, n in part.codes.items():
                self.codes[self._capped_code(code)] += n
            for finding in part.findings:
                self._merge_finding(dataclasses.replace(
                    finding, first=Evidence(summary.path, finding.first.line + line_base),
                    last=Evidence(summary.path, finding.last.line + line_base)), _add_part_values)
            line_base += piece.lines
        summary.lines = line_base
        summary.format = _file_format(summary)
        self.files.append(summary)
        return summary

    def add_unreadable(self, name: str, error: str) -> FileSummary:
        """Report an input that could not be opened at all; the scan of the others goes on."""
        summary = FileSummary(name, status="unreadable", error=error)
        self.files.append(summary)
        return summary

    # ---- the engine ---------------------------------------------------------------------------------------
    def scan_lines(self, summary: FileSummary, data: bytes, line_base: int, begin: int = 0,
                   end: Optional[int] = None, one_line: bool = False) -> int:
        """Scan the complete lines ``data[begin:end]`` (ending with a newline) of the input ``summary``,
        whose first line is line ``line_base + 1``; return the line count after them. With ``one_line``
        the "lines" are pieces of one over-long line: all of them are line ``line_base + 1``."""
        end = len(data) if end is None else end
        if not one_line:
            plog_pass = compiled_plog_pass()
            if plog_pass is not None:
                after = self._scan_plog_compiled(plog_pass, summary, data, begin, end, line_base)
                if after is not None:
                    return after
        self._merge_pending()  # what comes before these lines is merged before them
        if not one_line and _looks_error_dense(data, begin, end):
            after = self._scan_dense_plog(summary, data, begin, end, line_base)
            if after is not None:
                return after
        first = RECORD_FIRST_LINE.match(data, begin, end)
        headers = RECORD_AT_LINE_START.findall(data, begin, end)
        if first:
            headers.append(first.group(1))
        records = len(headers)
        plog_mode = False
        if records:
            # Assume plog; the exact line count comes out of locating the candidates (one pass over the
            # newlines), and if fewer than PLOG_SHARE of the lines are records the chunk is redone as text.
            candidates = self._plog_candidates(data, begin, end)
            located, newlines = _locate(data, begin, end, candidates, line_base)
            plog_mode = records >= PLOG_SHARE * newlines
        if plog_mode:
            if records < newlines:  # a few lines are no records (a traceback between them): their error lines
                more = _text_error_lines(data, begin, end) - candidates
                if more:
                    located, newlines = _locate(data, begin, end, candidates | more, line_base)
            raws, linenos = _line_texts(data, end, located)
        else:
            # Not (only) plog records at line starts: console output, prefixed or indented records, slogd.
            if data.startswith(b">", begin) or data.count(b"\n>", begin, end) * 3 > data.count(b"\n", begin, end):
                data, begin, end = unwrap_paste(data[begin:end]), 0, None  # a paste from an issue tracker
                end = len(data)
            if any(data.find(fragment, begin, end) >= 0 for fragment in FALLBACK_FRAGMENTS):
                data, begin, end = rejoin_wrapped_fallbacks(data[begin:end]), 0, None
                end = len(data)
            headers = RECORD_ANYWHERE.findall(data, begin, end)
            slogd = SLOGD_AT_LINE_START.findall(data, begin, end)
            first_slogd = SLOGD_FIRST_LINE.match(data, begin, end)
            if first_slogd:
                slogd.append(first_slogd.group(1))
            headers.extend(level + b"] SLOGD" for level in slogd)
            summary._votes["slogd"] += len(slogd)
            records = len(headers)
            located, newlines = _locate(data, begin, end, self._text_candidates(data, begin, end), line_base)
            raws, linenos = _line_texts(data, end, located)
        if one_line:
            linenos = [line_base + 1] * len(raws)
        self._count_and_merge(summary, collections.Counter(headers), records, len(raws),
                              self._line_groups(raws, linenos), plog_mode)
        return line_base + newlines

    def _scan_plog_compiled(self, plog_pass: PlogPass, summary: FileSummary, data: bytes, begin: int, end: int,
                            line_base: int) -> Optional[int]:
        """:meth:`scan_lines` of a plog chunk by the compiled pass (``_plogscan.plog_pass``): records counted,
        lines to examine found and grouped by message shape in C, so that Python works per shape, not per
        line; None (nothing counted) when the chunk is not plog."""
        # (headers in the order the pure-Python passes count them: the error-dense one has its own)
        headers, records, newlines, found = plog_pass(data, begin, end, self._plog_finds, line_base, VARYING_FORMS,
                                                      _looks_error_dense(data, begin, end))
        for header in [header for header in headers if not _is_record_header(header)]:
            records -= headers.pop(header)  # a level word RECORD_FIRST_LINE does not take
        if not records or records < PLOG_SHARE * newlines:
            return None
        if records < newlines and _text_error_lines(data, begin, end):
            return None  # error lines between the records (a traceback): the Python pass reads them too
        limit = MAX_MATCH_CHARS * 2
        texts = _decode_lines([data[start:min(stop, start + limit)] for _, _, _, start, stop in found])
        groups: List[LineGroup] = [(first, last, times, text, analysis) for (first, last, times, _, _), text, analysis
                                   in zip(found, texts, self._analyze_shapes(texts)) if analysis[0] or analysis[1]]
        if summary is not self._pending_summary:
            self._merge_pending()
            self._pending_summary = summary
        self._count_and_merge(summary, headers, records, sum(group[2] for group in found), groups, True,
                              self._pending)
        if len(self._pending) > MAX_SHAPES or self._pending_chars > CHUNK_BYTES:
            self._merge_pending()  # bounded memory
        return line_base + newlines

    def _merge_pending(self) -> None:
        """Merge the line groups the compiled pass left for later, in the order of their first lines (the
        findings are those of merging them chunk by chunk: a group adds its lines' count and last line, and
        what only the first merge sets, sample and first line, comes from its first line either way)."""
        if self._pending:
            pending, self._pending, self._pending_chars = self._pending, {}, 0
            for first, last, times, text, (line_hits, _) in pending.values():
                self._merge(self._pending_summary, text, first, line_hits, times, last)

    def _count_and_merge(self, summary: FileSummary, headers: Dict[bytes, int], records: int, examined: int,
                         groups: List[LineGroup], plog_mode: bool,
                         pending: Optional[Dict[int, List[Any]]] = None) -> None:
        """Count a chunk's records per level and module (``headers``: ``LEVEL] MODULE`` -> records) and
        merge its line groups, in the order of their first lines (into ``pending``, by analysis, when given:
        see :meth:`_merge_pending`)."""
        for header, n in headers.items():
            level, _, module = header.partition(b"]")
            word = level.decode()
            self.levels[LEVELS.get(word, word)] += n
            self.modules[module.strip().decode()] += n
        summary.records += records
        summary.examined_lines += examined
        for first_lineno, last_lineno, times, text, analysis in groups:
            line_hits, glued = analysis
            if glued and plog_mode:  # records glued after the first were not counted yet
                for glued_level, glued_module in glued:
                    self.levels[glued_level] += times
                    self.modules[glued_module] += times
                summary.records += len(glued) * times
            if not line_hits:
                continue
            if pending is None:
                self._merge(summary, text, first_lineno, line_hits, times, last_lineno)
                continue
            known = pending.get(id(analysis))
            if known is None:
                pending[id(analysis)] = [first_lineno, last_lineno, times, text, analysis]
                self._pending_chars += len(text)
            else:
                known[1] = max(known[1], last_lineno)
                known[2] += times

    def _line_groups(self, raws: List[bytes], linenos: List[int]) -> List[LineGroup]:
        """The lines ``raws`` (numbered ``linenos``) decoded, analysed and grouped by message shape, in the
        order of their first lines: lines of one shape share one analysis and are merged once."""
        if not raws:
            return []
        texts = _decode_lines(raws)
        groups: Dict[int, List[Any]] = {}  # id(analysis) -> [first line, last line, lines, text, analysis]
        for index, analysis in enumerate(self._analyze_shapes(texts)):
            if analysis[0] or analysis[1]:
                group = groups.get(id(analysis))
                if group is None:
                    groups[id(analysis)] = [linenos[index], linenos[index], 1, texts[index], analysis]
                else:
                    group[1] = linenos[index]
                    group[2] += 1
        return [(first, last, times, text, analysis) for first, last, times, text, analysis in groups.values()]

    def _scan_dense_plog(self, summary: FileSummary, data: bytes, begin: int, end: int,
                         line_base: int) -> Optional[int]:
        """:meth:`scan_lines` for an error-dense plog chunk (a job looping on an error), without one Python
        step per line; None (nothing counted) when the chunk is not plog after all.

        One ``sub`` pass takes each record line that starts with a standard ERROR/WARNING header out of the
        chunk and keeps its match: (level and module, message after the pid/process/timestamp) is its
        shape. Only the first and last line of each shape get a line number and only each shape's first line
        is decoded. What is left of the chunk (those lines blanked, so the line numbers hold) holds the other
        records, counted the usual way, and the other lines to examine (markers elsewhere in a line,
        any-level hints, the chunk's first line), found the usual way."""
        matches: List[re.Match[bytes]] = []
        keep = matches.append

        def blank(match: re.Match[bytes]) -> bytes:
            keep(match)
            return b"\n"

        with memoryview(data) as view:  # no copy of the chunk; the matches give bytes
            rest = DENSE_RECORD_LINE.sub(blank, view[begin:end])
        if not matches:
            return None
        headers = RECORD_AT_LINE_START.findall(rest)
        first = RECORD_FIRST_LINE.match(rest)
        if first:
            headers.append(first.group(1))
        located, newlines = _locate(rest, 0, len(rest), self._plog_candidates(rest, 0, len(rest)), line_base)
        records = len(headers) + len(matches)
        if records < PLOG_SHARE * newlines:
            return None
        keys = list(map(_SHAPE_OF_MATCH, matches))
        counts = collections.Counter(keys)
        header_counts = collections.Counter(headers)
        for (head, _), n in counts.items():
            header_counts[head[1:]] += n
        last_index = dict(zip(keys, range(len(keys))))
        first_index = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
        # Line numbers of the matches needed, in one pass over the newlines (a match starts at the newline
        # before its line).
        linenos: Dict[int, int] = {}
        position, newlines_before = begin, 0
        for index in sorted({*first_index.values(), *last_index.values()}):
            start = begin + matches[index].start()
            newlines_before += data.count(b"\n", position, start)
            position = start
            linenos[index] = line_base + newlines_before + 2
        texts: Dict[Tuple[bytes, ...], str] = {}
        for key, index in first_index.items():
            match = matches[index]
            raw = data[begin + match.start() + 1:begin + min(match.end(), match.start() + 1 + MAX_MATCH_CHARS * 2)]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = decode_text(raw)
            texts[key] = text[:MAX_MATCH_CHARS].rstrip("\r")
        cache = self._raw_shape_hits
        analyses: Dict[Tuple[bytes, ...], Analysis] = {}
        missing = []
        for key in first_index:
            known = cache.get(key)
            if known is None:
                missing.append(key)
            else:
                analyses[key] = known
        if missing:
            if len(cache) + len(missing) > MAX_SHAPES:
                cache.clear()  # bounded memory, as for the text shapes
            for key, analysis in zip(missing, self._analyze_shapes([texts[key] for key in missing])):
                analyses[key] = analysis
                if len(key[1]) <= MAX_KEPT_MESSAGE_BYTES:  # bounded memory; long ones meet the text cache
                    cache[key] = analysis
        groups: List[LineGroup] = []
        for key, index in first_index.items():
            analysis = analyses[key]
            if analysis[0] or analysis[1]:
                groups.append((linenos[index], linenos[last_index[key]], counts[key], texts[key], analysis))
        raws, other_linenos = _line_texts(rest, len(rest), located)
        groups.extend(self._line_groups(raws, other_linenos))
        groups.sort(key=lambda group: group[0])  # merged in the order of first lines, as line by line
        self._count_and_merge(summary, header_counts, records, len(matches) + len(raws), groups, True)
        return line_base + newlines

    def _analyze_shapes(self, texts: List[str]) -> List[Analysis]:
        """(hits, glued records) of each line, worked out once per message shape: a job looping on an error
        writes the same record again and again with a new pid, timestamp and nothing else. The shape is the
        line with the record header's pid/process and timestamp blanked (rules read the message, not those).

        A line holding records glued after its start (a concurrent writer lost a newline) is read record by
        record; "glued records" are their (level, module) for counting."""
        shapes = RECORD_VARYING.sub("(0,):", "\n".join(texts)).split("\n")
        cache = self._shape_hits
        missing = {shape: index for index, shape in enumerate(shapes) if shape not in cache}
        if missing:
            if len(cache) + len(missing) > MAX_SHAPES:
                cache.clear()  # bounded memory: a log of all-distinct lines gains nothing from the cache
                missing = {shape: index for index, shape in enumerate(shapes)}
            pieces: List[str] = []
            spans: List[Tuple[str, int, int, Tuple[Tuple[str, str], ...]]] = []
            for shape, index in missing.items():
                lines = reading.paste_pieces(texts[index])  # typed slips mended, escaped newlines cut
                text = lines[0]
                cuts = [m.start() for m in RECORD_HEADER.finditer(text, 1)]
                parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])] if cuts else [text]
                glued = tuple(_level_module(part) for part in parts[1:])
                parts.extend(lines[1:])
                spans.append((shape, len(pieces), len(parts), glued))
                pieces.extend(parts)
            analyzed = self.analyze_lines(pieces)
            for shape, start, count, glued in spans:
                hits = analyzed[start] if count == 1 else [hit for part in analyzed[start:start + count]
                                                           for hit in part]
                cache[shape] = (hits, glued)
        return [cache[shape] for shape in shapes]

    def _text_candidates(self, data: bytes, begin: int, end: int) -> Set[int]:
        """Starts of the free-text lines holding an anchor of any marker or hint, or an E/W/ERR code."""
        if self._text_anchors is None:
            self._text_anchors = _anchors(TEXT_MARKERS + self.rules.all_hints)
        starts = self._lines_with(data, begin, end, self._text_anchors)
        starts.update(_line_start(data, begin, m.start()) for m in CODE_BYTES.finditer(data, begin, end))
        return starts

    def _plog_candidates(self, data: bytes, begin: int, end: int) -> Set[int]:
        """Starts of the lines holding an ERROR/WARNING record or an any-level rule's hint."""
        return self._lines_with(data, begin, end, self._plog_searchers)

    @staticmethod
    def _lines_with(data: bytes, begin: int, end: int,
                    searchers: Iterable[Union[bytes, re.Pattern[bytes]]]) -> Set[int]:
        """Starts of the lines of ``data[begin:end]`` holding any of ``searchers`` (literals, or patterns of
        literals from :func:`_searchers`): one pass each."""
        starts: Set[int] = set()
        find, rfind = data.find, data.rfind
        for searcher in searchers:
            if isinstance(searcher, bytes):
                at = find(searcher, begin, end)
                while at >= 0:
                    starts.add(rfind(b"\n", begin, at) + 1 or begin)
                    line_end = find(b"\n", at, end)
                    at = find(searcher, line_end, end) if line_end >= 0 else -1
                continue
            search = searcher.search
            match = search(data, begin, end)
            while match is not None:
                at = match.start()
                starts.add(rfind(b"\n", begin, at) + 1 or begin)
                line_end = find(b"\n", at, end)
                match = search(data, line_end, end) if line_end >= 0 else None
        return starts

    def analyze_line(self, text: str) -> List[LineHit]:
        """Everything one decoded line says: rule hits, error codes, or a bare ERROR/WARNING record."""
        return self.analyze_lines([text])[0]

    def analyze_lines(self, texts: Sequence[str]) -> List[List[LineHit]]:
        """:meth:`analyze_line` for many lines at once: literal hints and code patterns are searched once
        in the joined text, so the per-line Python work is paid only by lines that hold something."""
        block = "\n".join(texts)
        offsets: List[int] = []
        position = 0
        for text in texts:
            offsets.append(position)
            position += len(text) + 1
        hits: List[List[LineHit]] = [[] for _ in texts]

        def lines_with(literal: str) -> Iterator[int]:
            at = block.find(literal)
            while at >= 0:
                index = bisect.bisect_right(offsets, at) - 1
                yield index
                at = block.find(literal, offsets[index + 1]) if index + 1 < len(offsets) else -1

        candidates: Dict[int, Set[int]] = {}
        for hint, rule_indexes in self._rules_by_hint.items():
            for index in lines_with(hint):
                for rule_index in rule_indexes:
                    candidates.setdefault(rule_index, set()).add(index)
        for rule_index in sorted(candidates):
            rule = self.rules.rules[rule_index]
            for index in sorted(candidates[rule_index]):
                text = texts[index]
                match = rule.pattern.search(text, 0, rule.max_chars) if rule.max_chars else \
                    rule.pattern.search(text)
                if match is not None:
                    hits[index].append(_rule_hit(rule, match))

        # Codes are read by codes.find_codes, the one reader (LIB005 uses it too); lines are picked by the
        # E/W/ERR pattern or by a lower-cased literal that every numeric code context holds.
        code_lines: Set[int] = {bisect.bisect_right(offsets, m.start()) - 1 for m in codebase.CODE.finditer(block)}
        lowered = block.translate(_ASCII_LOWER)  # str.lower() may change the length of non-ASCII text
        for guard in NUMERIC_CODE_GUARDS:
            at = lowered.find(guard)
            while at >= 0:
                index = bisect.bisect_right(offsets, at) - 1
                code_lines.add(index)
                at = lowered.find(guard, offsets[index + 1]) if index + 1 < len(offsets) else -1
        for index in sorted(code_lines):
            found = codebase.find_codes(texts[index])
            if found:  # the device (and rank) the line names go with its codes
                where = reading.device_of(texts[index])
                hits[index].extend(dataclasses.replace(_code_hit(code), details=where) if where else _code_hit(code)
                                   for code in found)

        for index, line_hits in enumerate(hits):
            if not line_hits:
                bare = _fallback_hit(texts[index])
                if bare is not None:
                    line_hits.append(bare)
        return hits

    def _merge(self, summary: FileSummary, text: str, lineno: int, line_hits: List[LineHit], times: int = 1,
               last_lineno: int = 0) -> None:
        """Merge the hits of ``times`` lines of one shape: the first at ``lineno`` (its ``text`` is the
        sample), the last at ``last_lineno``."""
        where = Evidence(summary.path, lineno)
        last = Evidence(summary.path, last_lineno) if times > 1 else where
        cleaned = ""
        if not summary._votes["mindspore"] and MINDSPORE_HEADER.search(text):  # once per group until found
            summary._votes["mindspore"] += 1
        if summary.rank:  # a file of a rank_N folder: every finding says which ranks showed it
            line_hits = [dataclasses.replace(hit, details=(*hit.details, ("rank", summary.rank)))
                         for hit in line_hits]
        for hit in line_hits:
            if hit.kind in UNEXPLAINED_KINDS:
                summary.unexplained_error_lines += times
                if hit.kind == ERROR_LINE_KIND:  # quoted in result() if the file has no error finding
                    summary.note_error_line(ErrorLine(lineno, last.line, times, hit.subject, hit.title,
                                                      clean(text).strip()[:SAMPLE_CHARS]))
                    continue
            if hit.kind == "error_code":
                self.codes[self._capped_code(hit.subject)] += times
                if hit.subject.startswith("ERR"):
                    summary._votes["torch_npu"] += times
                else:
                    summary._votes["cann-error"] += times
            elif hit.rule and self._rule_format.get(hit.rule):
                summary._votes[self._rule_format[hit.rule]] += times
            merged = self._merged.get((hit.kind, hit.subject))
            if merged is not None and not hit.details and merged.severity == hit.severity:
                merged.count += times  # the common case of a repeated cause: no new finding to build
                merged.last = _later(merged.last, last)
                summary.causes[hit.kind, hit.subject] += times
                continue
            if not cleaned:  # log text is someone else's: no secret, no control character in any output
                cleaned = clean(text)
            key = self._merge_finding(LogFinding(
                kind=hit.kind, subject=clean(hit.subject), severity=hit.severity, title=hit.title,
                count=times, first=where, last=last, sample=cleaned.strip()[:SAMPLE_CHARS], fix=hit.fix,
                rule=hit.rule, code=hit.code, details={name: {clean(value)} for name, value in hit.details}),
                _add_capped_values)
            summary.causes[key] += times

    def _merge_finding(self, finding: LogFinding,
                       add_values: Callable[[Set[str], Set[str]], None]) -> Tuple[str, str]:
        """Merge ``finding`` into the one of its kind and subject (capped); ``add_values`` adds its details.
        Returns the (kind, subject) it was merged under."""
        key = self._capped_key(finding.kind, finding.subject)
        merged = self._merged.get(key)
        if merged is None:
            self._subjects_per_kind[key[0]] += 1
            details = {name: set(values) for name, values in finding.details.items()}
            self._merged[key] = dataclasses.replace(finding, subject=key[1], details=details)
            return key
        merged.count += finding.count
        merged.last = _later(merged.last, finding.last)
        if SEVERITY_RANK[finding.severity] < SEVERITY_RANK[merged.severity]:
            merged.severity = finding.severity
        for name, values in finding.details.items():
            add_values(merged.details.setdefault(name, set()), values)
        return key

    def _error_line_findings(self) -> List[LogFinding]:
        """The first error line of each file that holds error lines but no error finding: a log that holds an
        error line never reads "nothing found". Files with one reading merge into one finding."""
        found: Dict[str, LogFinding] = {}
        for summary in self.files:
            first = summary.first_error_line
            if first is None or any(self._merged[key].severity == "error" for key in summary.causes
                                    if key in self._merged):
                continue
            where, last = Evidence(summary.path, first.line), Evidence(summary.path, summary.last_error_line)
            summary.causes[ERROR_LINE_KIND, first.reading] = summary.error_lines  # the file shows this cause
            known = found.get(first.reading)
            if known is None:
                found[first.reading] = LogFinding(
                    kind=ERROR_LINE_KIND, subject=first.reading, severity="error", title=first.title,
                    count=summary.error_lines, first=where, last=last, sample=first.sample, fix=ERROR_LINE_FIX)
            else:
                known.count += summary.error_lines
                known.last = _later(known.last, last)
        return list(found.values())

    def _capped_key(self, kind: str, subject: str) -> Tuple[str, str]:
        if (kind, subject) in self._merged or self._subjects_per_kind[kind] < MAX_SUBJECTS_PER_KIND:
            return kind, subject
        return kind, OTHER_SUBJECT

    def _capped_code(self, code: str) -> str:
        return code if code in self.codes or len(self.codes) < MAX_SUBJECTS_PER_KIND else OTHER_SUBJECT

    def result(self) -> ScanResult:
        merged: Iterable[LogFinding] = [*self._merged.values(), *self._error_line_findings()]
        if self.installed:
            merged = [_as_installed(f, self.installed) for f in merged]
        findings = sorted(merged, key=lambda f: (SEVERITY_RANK[f.severity], f.kind, -f.count, f.subject))
        return ScanResult(list(self.files), self.levels, self.modules, self.codes, findings)


# A paste from an issue tracker or a mail: quote prefixes (`> `, `> > `) and lines hard-wrapped at ~72-80
# columns. After a line that long, a line goes on the previous one unless it starts like a line of its own
# (a record, an indented frame, a date, a traceback) or is empty.
QUOTE_PREFIX = re.compile(rb"^(?:[ \t]*>)+ ?", re.MULTILINE)
WRAP_WIDTH = 50
OWN_LINE_START = re.compile(rb"$|\s|\[(?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE)\]|\d{4}-\d\d-\d\d|Traceback|File \"|"
                            rb"During handling|The above exception")


def unwrap_paste(region: bytes) -> bytes:
    """``region`` (whole lines) without quote prefixes, wrapped lines joined again. The newline count stays
    (a joined line is followed by an empty one), so line numbers still point at the paste's lines."""
    logical: List[List[Any]] = []  # [text, extra newlines]
    for line in QUOTE_PREFIX.sub(b"", region).split(b"\n")[:-1]:
        previous = logical[-1] if logical else None
        if previous is not None and len(previous[0]) >= WRAP_WIDTH and not OWN_LINE_START.match(line):
            previous[0] = previous[0].rstrip() + b" " + line
            previous[1] += 1
        else:
            logical.append([line, 0])
    return b"".join(text + b"\n" * (1 + extra) for text, extra in logical)


# torch_npu's CPU-fallback warning, as a terminal or an issue tracker hard-wraps it at a fixed width (split
# mid-word or at a space, with or without its `[W ...]` prefix, glued after other text). A wrap breaks at
# most one of these pieces per line end, and the message spans a few lines: a chunk holding none of
# them holds no wrapped warning.
FALLBACK_FRAGMENTS: Tuple[bytes, ...] = (b"CAUTION: The operator", b"is not currently supported on the NPU",
                                         b"fall back to run on the CPU", b"performance implications",
                                         b"npu_cpu_fallback")
FALLBACK_MESSAGE = re.compile(rb"operator '[^'\n]{1,300}' is not currently supported on the NPU backend and will "
                              rb"fall back to run on the CPU")
FALLBACK_LINES = 6  # a 40-column wrap of the message


def rejoin_wrapped_fallbacks(region: bytes) -> bytes:
    """``region`` (whole lines) with each hard-wrapped CPU-fallback warning joined into one line again (the
    pieces put together as they are, or with a space where the wrap dropped one); a joined line is followed
    by empty ones, so the line count and the line numbers stay."""
    lines = region.split(b"\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if not any(fragment in line for fragment in FALLBACK_FRAGMENTS) or FALLBACK_MESSAGE.search(line):
            index += 1
            continue
        joined = _join_fallback(lines, index)
        if joined is None:
            index += 1
            continue
        start, count, text = joined
        lines[start:start + count] = [text] + [b""] * (count - 1)
        index = start + count
    return b"\n".join(lines)


def _join_fallback(lines: List[bytes], index: int) -> Optional[Tuple[int, int, bytes]]:
    """(first line, lines, joined text) of the wrapped warning that line ``index`` is a piece of, or None."""
    window = lines[max(0, index - FALLBACK_LINES + 1):index + FALLBACK_LINES]
    if not any(FALLBACK_MESSAGE.search(separator.join(window)) for separator in (b"", b" ")):
        return None  # the common miss costs two searches, not one per way of joining
    for start in range(max(0, index - FALLBACK_LINES + 1), index + 1):
        for count in range(max(2, index - start + 1), FALLBACK_LINES + 1):
            pieces = lines[start:start + count]
            if len(pieces) < count or any(not piece.strip() for piece in pieces):
                break
            for separator in (b"", b" "):
                text = separator.join(pieces)
                match = FALLBACK_MESSAGE.search(text)
                # every piece holds some of the message: it starts in the first and ends in the last
                if match and match.start() < len(pieces[0]) and match.end() > len(text) - len(pieces[-1]):
                    return start, count, text
    return None


def _level_module(record: str) -> Tuple[str, str]:
    """(level, module) of a text starting with a record header (``[ERROR] HCCL(``)."""
    level, _, module = record[1:record.index("(")].partition("]")
    return LEVELS.get(level, level), module.strip()


def _later(current: Evidence, new: Evidence) -> Evidence:
    """The later of two evidence lines (inputs are scanned in order, so another file is a later one)."""
    return new if new.file != current.file or new.line > current.line else current


def _add_capped_values(values: Set[str], new: Set[str]) -> None:
    """A scan keeps at most MAX_DETAIL_VALUES values per detail of a finding."""
    for value in new:
        if len(values) < MAX_DETAIL_VALUES:
            values.add(value)


def _add_part_values(values: Set[str], new: Set[str]) -> None:
    """Putting parts together adds at most MAX_DETAIL_VALUES values of each part (a part is capped already)."""
    values.update(list(new)[:MAX_DETAIL_VALUES])


def _rule_hit(rule: Rule, match: re.Match[str]) -> LineHit:
    # `name__2` is another place for `name` (alternatives of one pattern cannot share a group name)
    groups = {k.partition("__")[0]: v.strip() for k, v in match.groupdict().items() if v}
    subject = groups.pop("subject", "") or rule.subject or rule.kind
    groups.pop("code", None)
    if rule.subject_is == TBE_IMPL:  # a TBE implementation's name: the op as written, the type it stands for
        groups.setdefault("op", subject)
        op_type = reading.tbe_op_type(subject)
        if op_type:  # merged with the other findings of that type
            groups.setdefault("op_type", op_type)
            subject = op_type
    elif rule.subject_is:  # readers find the operator (or device) under its own name
        groups.setdefault(rule.subject_is, subject)
    return LineHit(rule.kind, subject, rule.severity, rule.title, rule.fix, rule.id,
                   details=tuple(sorted(groups.items())))


@functools.lru_cache(maxsize=8)  # ~30 ms per rule set: worked out once per process, not once per scanner
def _anchors(literals: Tuple[bytes, ...], shortest: int = 4, longest: int = 8) -> Tuple[bytes, ...]:
    """A small set of substrings such that every literal contains one of them (greedy set cover).

    Free text is searched once per anchor instead of once per literal: about 30 passes instead of 80. A
    line holding an anchor but none of the literals costs only the full grammar's time on that line.
    """
    uncovered = set(literals)
    chosen: List[bytes] = []
    while uncovered:
        counts: Counter[bytes] = collections.Counter()
        for literal in uncovered:
            pieces = {literal[i:i + n] for n in range(shortest, longest + 1)
                      for i in range(len(literal) - n + 1) if b" " not in literal[i:i + n]}
            counts.update(pieces or {literal})
        best = max(counts, key=lambda piece: (counts[piece], len(piece), piece))
        chosen.append(best)
        uncovered = {literal for literal in uncovered if best not in literal}
    return tuple(chosen)


def _searchers(literals: Sequence[bytes]) -> Tuple[Union[bytes, re.Pattern[bytes]], ...]:
    """``literals`` as few passes over the bytes as is fastest: literals that start with the same byte
    (``[ERROR]``, ``[WARNING]``, ``[fault_manager]``) become one pattern, ``[(?:ERROR]|WARNING]|...)``,
    which the regex engine searches by that byte about twice as fast as ``bytes.find`` searches each of
    them; a literal of its own is searched by ``find``. (A pattern of literals cannot backtrack.)"""
    by_first: Dict[bytes, List[bytes]] = {}
    for literal in dict.fromkeys(literals):
        by_first.setdefault(literal[:1], []).append(literal)
    searchers: List[Union[bytes, re.Pattern[bytes]]] = []
    for first, group in by_first.items():
        if len(group) == 1:
            searchers.append(group[0])
        else:
            searchers.append(re.compile(re.escape(first) + b"(?:" + b"|".join(re.escape(literal[1:])
                                                                             for literal in group) + b")"))
    return tuple(searchers)


def _shared_prefixes(hints: Sequence[bytes], least: int = 16) -> Tuple[bytes, ...]:
    """Fewer literals to search: hints that start alike (``Assigning DNNEngine DNN_VM_AICPU`` and
    ``..._HOST_CPU``) are searched by their common prefix, one pass over the bytes instead of two."""
    groups: Dict[bytes, List[bytes]] = {}
    for hint in dict.fromkeys(hints):
        groups.setdefault(hint[:least], []).append(hint)
    prefixes = []
    for group in groups.values():
        prefix = group[0]
        for other in group[1:]:
            while not other.startswith(prefix):
                prefix = prefix[:-1]
        prefixes.append(prefix)
    return tuple(prefixes)


def _decode_lines(raws: List[bytes]) -> List[str]:
    """The lines ``raws`` as text, each cut to what is matched."""
    try:  # one decode for the whole lot; a line that is not UTF-8 makes us decode line by line
        decoded = b"\n".join(raws).decode("utf-8")
        return [t[:MAX_MATCH_CHARS].rstrip("\r") for t in decoded.split("\n")]
    except UnicodeDecodeError:
        return [decode_text(raw)[:MAX_MATCH_CHARS].rstrip("\r\n") for raw in raws]


def _text_error_lines(data: bytes, begin: int, end: int) -> Set[int]:
    """Starts of the lines of a plog chunk that are no record and hold an error word (one C-speed pass that
    looks at each line's first byte; only for the few chunks that have such lines)."""
    starts = {m.start() + 1 for m in TEXT_ERROR_LINE.finditer(data, max(begin - 1, 0), end)}
    if begin == 0 and TEXT_ERROR_LINE.match(b"\n" + data[:MAX_MATCH_CHARS * 2].split(b"\n", 1)[0]):
        starts.add(0)
    return {start for start in starts if begin <= start < end}


def _line_start(data: bytes, begin: int, at: int) -> int:
    return data.rfind(b"\n", begin, at) + 1 or begin


def _line_texts(data: bytes, end: int, located: List[Tuple[int, int]]) -> Tuple[List[bytes], List[int]]:
    """The bytes (at most what is matched, twice over) and line numbers of the ``located`` lines."""
    raws = []
    find = data.find
    limit = MAX_MATCH_CHARS * 2
    for start, _ in located:
        stop = find(b"\n", start, end)
        raws.append(data[start:min(stop, start + limit)])
    return raws, [lineno for _, lineno in located]


def _locate(data: bytes, begin: int, end: int, starts: Iterable[int],
            line_base: int) -> Tuple[List[Tuple[int, int]], int]:
    """(line start, line number) for each of ``starts``, and the newline count of ``data[begin:end]``, in
    one pass over the newlines."""
    located: List[Tuple[int, int]] = []
    position, lineno = begin, line_base
    for start in sorted(starts):
        lineno += data.count(b"\n", position, start)
        position = start
        located.append((start, lineno + 1))
    return located, lineno - line_base + data.count(b"\n", position, end)


def code_hit(code: str, installed: Optional[codebase.Installed] = None) -> LineHit:
    """What a line holding ``code`` reports: the code's entry as :func:`npudoctor.logs.codes.explain` gives it
    (the one lookup `explain` uses too), in the text of the node's registry where ``installed`` has it."""
    info = codebase.explain(code, installed)
    severity = info.severity if info else codebase.default_severity(code)
    title = f"{code} {info.title}" if info else f"error code {code}"
    return LineHit("error_code", code, severity, title, info.fix if info else "", "", info)


_code_hit = functools.lru_cache(maxsize=4096)(code_hit)  # the shipped texts, per code, for every line

# A rule's `subject_is` for a TBE implementation's name (`strided_slice_grad_d`): kept as `op`, and the operator
# type it stands for (StridedSliceGradD) as `op_type`.
TBE_IMPL = "tbe_impl"
# An error line no rule, code or record header explains (see _fallback_hit).
ERROR_LINE_KIND = "error_line"
ERROR_LINE_FIX = ("No rule knows this message: read the lines around it (the first error of a run is usually "
                  "the cause), and the framework's own log at a more detailed level.")
# The hits that count as "no finding covers it": an error line, a bare ERROR record of a module.
UNEXPLAINED_KINDS = frozenset((ERROR_LINE_KIND, "error_record"))
# A MindSpore record header: `(pid,tid,process)` or `(pid:tid,process)` (CANN's plog has `(pid,process)`).
MINDSPORE_HEADER = re.compile(r"\] ?[A-Z][A-Z0-9_]*\(\d+(?::\d+,|,\s*[0-9a-f]+,)[^)]*\): ?\d{4}-")


def _as_installed(finding: LogFinding, installed: codebase.Installed) -> LogFinding:
    """A code finding in the text of the node's registry (its title, fix and entry); any other as it is."""
    if finding.kind != "error_code" or finding.subject == OTHER_SUBJECT:
        return finding
    hit = code_hit(finding.subject, installed)
    if hit.code is None or hit.code == finding.code:
        return finding
    return dataclasses.replace(finding, title=clean(hit.title), fix=clean(hit.fix), code=hit.code,
                               severity=hit.severity)


# What to do with records no rule and no code explains (they have no cause of their own to name).
_RECORD_FIX = ("No rule knows these records: read the first one and the lines just before it (-v shows its "
               "place), which usually name the call that failed; an error code there is explained by "
               "`npudoctor explain CODE`. A cause found once can be taught to the scan with --rules FILE.")


def _fallback_hit(text: str) -> Optional[LineHit]:
    """What a line no rule and no code explained says: an ERROR/WARNING record, reported per module; else an
    error in words (:func:`npudoctor.logs.reading.is_error_line`), an ``error_line`` hit whose subject is
    the best reading of it. Error lines are counted per file and quoted only where the file has no error
    finding of its own (:meth:`Scanner.result`)."""
    record = RECORD.search(text)
    if record is not None:
        level, module = LEVELS.get(record.group("level"), record.group("level")), record.group("module")
    else:
        slogd = SLOGD_RECORD.match(text)
        if slogd is None:
            if not reading.is_error_line(text):
                return None
            line = clean(text.strip())[:SAMPLE_CHARS]
            return LineHit(ERROR_LINE_KIND, reading.best_reading(text), "error", f"first error line: {line}",
                           ERROR_LINE_FIX)
        level, module = slogd.group("level"), "SLOGD"
    if level in ERROR_LEVELS:
        return LineHit("error_record", module, "error", f"ERROR records of {module}", fix=_RECORD_FIX)
    if level == "WARNING":
        return LineHit("warning_record", module, "warn", f"WARNING records of {module}", fix=_RECORD_FIX)
    return None


def _looks_error_dense(data: bytes, begin: int, end: int) -> bool:
    """Whether the lines ``data[begin:end]`` look like a job looping on an error, judged on their start (the
    choice of method only: both give the same result)."""
    stop = min(end, begin + DENSE_PROBE_BYTES)
    return data.count(PLOG_MARKERS[0], begin, stop) > data.count(b"\n", begin, stop) * DENSE_SHARE


def _file_format(summary: FileSummary) -> str:
    votes = summary._votes
    if summary.lines == 0:
        return "empty"
    if summary._binary:
        return "binary"
    if votes["slogd"] >= PLOG_SHARE * summary.lines / 2:
        return "slogd"
    if summary.records >= summary.lines / 2:
        return "mindspore" if votes["mindspore"] else "plog"
    for name in ("atc", "torch_npu", "mindspore", "cann-error"):
        if votes[name]:
            return name
    return "text"


def _rank_of(path: str) -> str:
    """The N of a ``rank_N`` (``rank.N``, ``rank-N``) folder the file lies in, as MindSpore and msrun lay
    out a job's logs; "" when it lies in none."""
    match = RANK_FOLDER.search(path)
    return match.group(1) if match else ""


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__
    return text.splitlines()[0] if text else exc.__class__.__name__
