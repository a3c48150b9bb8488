"""Strings from someone else (a log line, a process name, an op name, a host name in a report) are data.

One place decides what such a string may carry into any output:

* :func:`printable`: no terminal escape sequence (OSC 52 clipboard writes, OSC 0 titles, CSI ``ESC[2J``), no
  other C0/C1 control character, no bidi override (the "trojan source" reordering); tabs and newlines stay;
* :func:`one_line`: the same, and line breaks and tabs become spaces (a host name, a YAML comment, a table cell);
* :func:`clean`: secrets redacted (:mod:`npudoctor.untrusted.redact`, the bundles' redaction), then printable;
  :class:`npudoctor.model.finding.Finding` cleans every string it carries this way, so every format of every
  command that renders findings shows no secret and no control character;
* :func:`shorten`: :func:`clean` and :func:`one_line`, *then* cut to a width: a secret cut in half no longer
  looks like one, so redaction always comes before the cut;
* :func:`csv_cell`: a text cell that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, tab, CR)
  starts with ``'`` instead (OWASP's advice for CSV injection).

Markup is the renderers' part: rich consoles are made with ``markup=False``, textual widgets with
``markup=False``, HTML escapes after :func:`printable`.

>>> printable("op\\x1b]52;c;aGVsbG8=\\x07Name\\x1b[2J\\u202e")
'opName'
>>> one_line("node-1\\nsite: evil")
'node-1 site: evil'
>>> csv_cell("=HYPERLINK(\\"http://x\\")")
'\\'=HYPERLINK("http://x")'
>>> clean("python train.py --hf_token=hf_abcdefghijklmnopqrstuvwxyz0123456789")
'python train.py --hf_token=<redacted>'
"""

from __future__ import annotations

import functools
import re
from typing import Any

from npudoctor.untrusted.redact import redact_text

# Escape sequences whole (OSC to its BEL or ST, only its introducer when it has none; CSI to its final
# byte; any other ESC and the byte after it; the same for 8-bit CSI and OSC), then every control character
# left but tab and newline, the C1 controls, the bidi embeddings, overrides and isolates (U+202A-U+202E,
# U+2066-U+2069) and the line and paragraph separators.
_CONTROL = re.compile(r"\x1b\][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)|\x1b\][0-9;]*|\x1b\[[0-?]*[ -/]*[@-~]?|\x1b[@-_]?|"
                      r"\x9d[^\x07\x1b\x9c\n]{0,4096}(?:\x07|\x9c)|\x9b[0-?]*[ -/]*[@-~]?|"
                      r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_BREAKS = re.compile(r"[\t\n]+")
# A lone surrogate (bytes decoded with surrogateescape) cannot be encoded for any output: U+FFFD instead.
_SURROGATE = re.compile("[\ud800-\udfff]")
# What a spreadsheet takes for the start of a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences, control characters (tabs and newlines kept) and bidi
    controls. Cheap when there is nothing to remove (``str.isprintable``)."""
    if text.isprintable():
        return text
    return _SURROGATE.sub("\ufffd", _CONTROL.sub("", text))


def one_line(text: str) -> str:
    """:func:`printable`, on one line: tabs and line breaks become one space each run."""
    if text.isprintable():
        return text
    text = _CONTROL.sub(lambda m: " " if m.group(0) in "\r\u2028\u2029" else "", text)
    return _BREAKS.sub(" ", _SURROGATE.sub("\ufffd", text))


def clean(text: str) -> str:
    """``text`` with its secrets redacted, then :func:`printable`."""
    if len(text) <= _CACHED_CHARS:
        return _clean_short(text)
    return printable(redact_text(text))


# Reports repeat their short strings (a version on 10,000 nodes, a check title per subject): each is
# cleaned once.
_CACHED_CHARS = 256


@functools.lru_cache(maxsize=4096)  # at most ~2 MiB of short strings
def _clean_short(text: str) -> str:
    return printable(redact_text(text)) if text else text


def shorten(text: str, width: int, ellipsis: str = "...") -> str:
    """``text`` cleaned, on one line, cut to ``width`` characters (ending in ``ellipsis`` when cut).

    >>> shorten("op hf_abcdefghijklmnopqrstuvwxyz0123456789 more", 20)
    'op <redacted> mor...'
    """
    text = one_line(clean(text))
    if len(text) <= width:
        return text
    return text[:max(width - len(ellipsis), 0)] + ellipsis if width > len(ellipsis) else text[:width]


def clean_value(value: Any) -> Any:
    """:func:`clean` applied to every string inside ``value`` (dicts, keys included, lists and tuples)."""
    kind = type(value)
    if kind is int or kind is float or kind is bool or value is None:  # most of a report: nothing to do
        return value
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(k) if type(k) is str else clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(item) for item in value]
    if isinstance(value, tuple):
        items = [clean_value(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)  # a NamedTuple stays one
    return value


def csv_cell(value: Any) -> Any:
    """A CSV cell that no spreadsheet runs: text starting like a formula gets a leading ``'``; the text is
    also :func:`one_line`. Numbers and other values pass as they are."""
    if not isinstance(value, str):
        return value
    value = one_line(value)
    return "'" + value if value.startswith(_FORMULA_START) else value
