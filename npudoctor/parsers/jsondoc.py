"""The one loader for small untrusted JSON documents: reports, manifests, memlog lines, profiler info files.

``json.loads`` recurses once per level of nesting, so a 5 KB document of ``[[[[...`` is a ``RecursionError``
(and a document just under the interpreter's limit parses, then breaks whatever walks it recursively next).
:func:`loads` first measures the nesting without recursion and refuses anything deeper than ``max_depth``,
then parses; every failure is a :class:`JsonDocumentError` (a ``ValueError``) whose text fits on one line.

The measure runs in C: strings are cut out with one linear regular expression, everything but brackets is
deleted, and innermost ``[]``/``{}`` pairs are removed level by level, so a document of depth *d* costs *d*
passes over its brackets (at most ``max_depth + 1``).

Streamed readers of big files (the profiler's ``trace_view.json``) do not come here: this is for documents
held whole in memory.
"""

from __future__ import annotations

import json
import re
from typing import Any, Union

from npudoctor.errors import InputError

#: Deeper than any document npudoctor reads (a report is 4-5 levels, a trace event 3-4).
MAX_DEPTH = 64

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRING_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


_TYPE_NAMES = {type(None): "null", dict: "an object", list: "a list", str: "a string", bool: "a boolean",
               int: "an integer", float: "a number"}


def type_name(value: Any) -> str:
    """How a JSON value's type is named in error messages ("an object", "a list", "null", ...)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


class JsonDocumentError(InputError, ValueError):
    """Not valid JSON, nested too deeply, or not text: one line for the user."""


def nesting_depth(text: Union[str, bytes], limit: int = MAX_DEPTH) -> int:
    """How deeply ``text`` nests arrays and objects, counted up to ``limit + 1`` (more is not measured).

    Brackets inside strings do not count; unbalanced brackets are measured as far as they pair up.

    >>> nesting_depth('{"a": [1, {"b": "[[["}]}'), nesting_depth("[" * 10000 + "]" * 10000, limit=64)
    (3, 65)
    """
    if isinstance(text, str):
        data = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    else:
        data = _STRING_BYTES.sub(b"", text)
    brackets = data.translate(None, _NOT_BRACKETS)
    depth = 0
    while brackets and depth <= limit:
        reduced = _INNERMOST.sub(b"", brackets)
        if len(reduced) == len(brackets):  # unbalanced from here on: the parser will say where
            return depth + (1 if depth < limit else 0)
        brackets = reduced
        depth += 1
    return depth


def loads(text: Union[str, bytes], what: str = "document", max_depth: int = MAX_DEPTH) -> Any:
    """``text`` parsed; :class:`JsonDocumentError` (``what`` names the input) when it cannot be.

    >>> loads('{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> try:
    ...     loads("[" * 5000 + "]" * 5000, "x.json")
    ... except JsonDocumentError as exc:
    ...     print(exc)
    x.json: nested deeper than 64 levels
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonDocumentError(f"{what}: not UTF-8 text (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if nesting_depth(text, max_depth) > max_depth:
        raise JsonDocumentError(f"{what}: nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonDocumentError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") \
            from None
    except RecursionError:  # unbalanced brackets, deep: the measure stopped where they stopped pairing
        raise JsonDocumentError(f"{what}: nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # an integer over the interpreter's digit limit
        raise JsonDocumentError(f"{what}: not valid JSON ({str(exc).splitlines()[0][:80]})") from None
