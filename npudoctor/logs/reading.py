"""Reading a line as people paste it and as frameworks print it, after the scanner's prefilter picked it.

Pure functions over one decoded line; the scanner calls them once per message shape, never per raw line:

- :func:`paste_pieces`: the line as the writer meant it. Slips of text typed from a screenshot (``IERROR] ME
  (26748,...) :2023-10-26-09:51 : 54.833`` for ``[ERROR] ME(26748,...):2023-10-26-09:51:54.833``, ``1ibascendcl.so``
  for ``libascendcl.so``) are mended, and an error JSON-escaped into one line (an HTTP 500 body:
  ``{"detail": "...\\nEZ9999: Inner Error!\\n..."}``) is cut back into its lines.
- :func:`is_error_line`: whether a line that is no record reports an error in words (``Acl open device 0
  failed.``, ``RuntimeError: ...``, ``ERROR 03-20 ...``), and :func:`best_reading`: what it most likely means.

    >>> paste_pieces("IERROR] ME (26748,7f6c, benchmark) :2023-10-26-09:51 : 54.833.515 [a.cc:59] Init] x")
    ['[ERROR] ME(26748,7f6c, benchmark):2023-10-26-09:51:54.833.515 [a.cc:59] Init] x']
    >>> paste_pieces('{"detail":"run failed\\\\nEZ9999: Inner Error!\\\\n  TraceBack"}')
    ['{"detail":"run failed', 'EZ9999: Inner Error!', '  TraceBack"}']
    >>> is_error_line("Acl open device 0 failed."), is_error_line("[W compiler_depend.ts:51] Warning: failed")
    (True, False)
    >>> best_reading("Malloc device memory failed, may be other processes occupying this card")
    'device busy or held'
"""

from __future__ import annotations

import re
from typing import List, Tuple

# Literals one of which every error line holds (the scanner's prefilter looks for them in free text).
ERROR_LINE_LITERALS: Tuple[bytes, ...] = (b"RROR", b"rror", b"ailed", b"AILED", b"xception", b"XCEPTION", b"CRITICAL",
                                          b"atal", b"ATAL", b"core dumped", b"Aborted", b"No such file",
                                          b"ommand not found", b"ermission denied", b"egmentation fault",
                                          b"[E ")
# Words that make a line of free text an error line: a level word in capitals used as one (`[ERROR]`,
# `ERROR:`, `ERROR 03-20 ...`, `- ERROR -`, `| ERROR |`, MindSpore Lite's `ERROR [file:line] ...`; not
# `3 ERROR级别` in a comment), a Python exception with its message, a failure in words, a crash.
ERROR_WORDS = re.compile(
    r"(?<![A-Za-z_])(?:ERROR|ERR|CRITICAL|FATAL|EXCEPTION)(?=[\]):|]|\s+-|\s+\d|\s*\||\s+\[)"
    r"|\b[A-Z]\w*(?:Error|Exception)\s*[:\uff1a]"
    r"|(?<![A-Za-z_])(?:[Ff]ailed|FAILED|[Ff]atal)(?![A-Za-z_])"
    r"|core dumped|(?<![A-Za-z_])Aborted(?![A-Za-z_])"
    r"|No such file or directory|command not found|Permission denied|Segmentation fault"
    r"|^\s*\[E [^\]\n]{1,80}\]")  # c10's error lines: `[E ProcessGroupHCCL.cpp:1021] ...`
# A line that says it is no error: a record or a logger line of a lower level, a Python warning, a success,
# a line of source code a traceback quotes (`    raise RuntimeError("init failed")`).
QUIET_LINE = re.compile(
    r"\s*(?:\[(?:WARNING|WARN|INFO|DEBUG|EVENT|TRACE|W|I|D)[\]\s]"
    r"|(?:\(\w+ pid=\d+\)\s+)?(?:INFO|WARNING|WARN|DEBUG)\b"
    r"|\S*Warning:|\d+ failed, \d+ passed|0 failed"
    r"|(?:raise|return|if|elif|assert|except|print|logger\.\w+|logging\.\w+|log\.\w+|self\.\w+)\b[ (])")

# Typed from a screenshot: `[` read as I, l, | or 1 before a level word; spaces put into the record header.
OCR_RECORD_HEAD = re.compile(
    r"^(\s*)[Il|1\[](ERROR|WARNING|INFO|DEBUG|CRITICAL|EXCEPTION)[\]\)] ?([A-Z][A-Z0-9_]*) ?"
    r"\((-?\d+(?::\d+)?),([^)\n]{0,80})\) ?: ?(\d{4}-\d\d-\d\d-\d\d:\d\d) ?: ?(\d\d)")
OCR_LIB = re.compile(r"(?<![\w.])1ib(?=[A-Za-z_][\w.+-]*\.so\b)")
# An error JSON-escaped into one line: `\n` as two characters, at least this many times.
ESCAPED_NEWLINES = 2

# What an error line with no rule of its own most likely means, first match wins; else GENERIC_READING.
READINGS: Tuple[Tuple[str, re.Pattern[str]], ...] = (
    ("device busy or held", re.compile(
        r"(?i)occupying|occupied|in use by|(?:device|resource) (?:or resource )?busy|held by another"
        r"|less than half of total")),
    ("open device failed", re.compile(r"(?i)open device|set ?device|device retain|no (?:npu )?device")),
    ("out of memory", re.compile(r"(?i)out of memory|\bOOM\b|malloc[^\n]{0,60}fail|alloc[^\n]{0,30}fail")),
)
GENERIC_READING = "error line"


# The device a line names, as torch_npu (`(PID:17481, Device:0, RankID:-1)`), the runtime (`device_id=0`,
# `deviceId=6`) and MindSpore (`device_id: 0`) print it; torch_npu's RankID when it is one (not -1).
DEVICE_OF_LINE = re.compile(
    r"\(PID: ?\d+, Device: ?(?P<device>\d+), RankID: ?(?P<rank>\d+|-1)\)"
    r"|\bdevice_?id(?:=| ?: ?)(?P<device__2>\d+)\b|\bdeviceId=(?P<device__3>\d+)\b")


def device_of(text: str) -> Tuple[Tuple[str, str], ...]:
    """(("device", N), and ("rank", R) where torch_npu names one) of the first device ``text`` names; ()."""
    if "evice" not in text:
        return ()
    match = DEVICE_OF_LINE.search(text)
    if match is None:
        return ()
    device = match.group("device") or match.group("device__2") or match.group("device__3")
    rank = match.group("rank")
    return (("device", device), ("rank", rank)) if rank and rank != "-1" else (("device", device),)


# A TBE implementation's name (`strided_slice_grad_d`, a kernel `transpose_d_4779120815397556904_6`): the
# operator type in snake case, a kernel hash after it.
TBE_IMPL_NAME = re.compile(r"([a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)*?)(?:_\d{6,}(?:_\d+)*)?")
CONV_DIMENSION = re.compile(r"(\d)d$")


def tbe_op_type(name: str) -> str:
    """The operator type a TBE implementation name stands for, "" when ``name`` is no such name:
    ``strided_slice_grad_d`` StridedSliceGradD, ``conv2d_backprop_input`` Conv2DBackpropInput."""
    match = TBE_IMPL_NAME.fullmatch(name)
    if match is None:
        return ""
    return "".join(CONV_DIMENSION.sub(r"\1D", part[:1].upper() + part[1:]) for part in match.group(1).split("_"))


def paste_pieces(text: str) -> List[str]:
    """``text`` as its writer meant it, as one or more lines (see the module's doc)."""
    if "ERROR]" in text or "WARNING]" in text or "INFO]" in text:
        text = OCR_RECORD_HEAD.sub(r"\1[\2] \3(\4,\5):\6:\7", text, count=1)
    if "1ib" in text:
        text = OCR_LIB.sub("lib", text)
    if text.count("\\n") >= ESCAPED_NEWLINES:
        return [piece for piece in text.replace("\\r\\n", "\\n").split("\\n") if piece.strip()] or [text]
    return [text]


def is_error_line(text: str) -> bool:
    """Whether ``text`` (a line that is no ERROR/WARNING record) reports an error in words."""
    return ERROR_WORDS.search(text) is not None and QUIET_LINE.match(text) is None


def best_reading(text: str) -> str:
    """What an error line most likely means, in a few words ("device busy or held", "open device failed",
    "out of memory"; GENERIC_READING when the text says nothing more)."""
    return next((name for name, pattern in READINGS if pattern.search(text)), GENERIC_READING)
