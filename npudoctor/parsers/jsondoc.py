"""The one loader for small untrusted JSON documents: reports, manifests, memlog lines, profiler info files.

``json.loads`` recurses once per level of nesting, so a 5 KB document of ``[[[[...`` is a ``RecursionError``
(and a document just under the interpreter's limit parses, then breaks whatever walks it recursively next).
:func:`loads` parses (CPython's C scanner raises a clean ``RecursionError`` at the interpreter's limit), then
makes sure what it got nests at most ``max_depth`` deep: the brackets of the text alone, innermost pairs
removed level by level in C (a report: ~5 passes over a few hundred bytes), and only when that cannot tell
(brackets inside strings that do not pair up) a walk of the parsed containers without recursion. Every
failure is a :class:`JsonDocumentError` whose text fits on one line. (Cutting the strings out of the text
first, or walking every parsed report, cost 1.7x and 0.6x the parse itself.)

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

_TYPE_NAMES = {type(None): "null", dict: "an object", list: "a list", str: "a string", bool: "a boolean",
               int: "an integer", float: "a number"}


def type_name(value: Any) -> str:
    """How a JSON value's type is named in error messages ("an object", "a list", "null", ...)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


class JsonDocumentError(InputError, ValueError):
    """Not valid JSON, nested too deeply, or not text: one line for the user."""


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


def _surely_shallow(data: bytes, limit: int) -> bool:
    """True when the brackets of ``data`` cannot nest deeper than ``limit`` (in C: the brackets alone, innermost
    pairs removed level by level); False means "measure the parsed value" (deep, or brackets inside strings
    that do not pair up)."""
    brackets = data.translate(None, _NOT_BRACKETS)
    if len(brackets) <= limit:
        return True
    for _ in range(limit):
        reduced = _INNERMOST.sub(b"", brackets)
        if not reduced:
            return True
        if len(reduced) == len(brackets):
            return False
        brackets = reduced
    return False


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests arrays and objects more than ``limit`` deep; walked without
    recursion, looking only at containers.

    >>> deeper_than({"a": [1, {"b": "[[["}]}, 3), deeper_than({"a": [1, {"b": [2]}]}, 3)
    (False, True)
    """
    stack = [(value, 1)] if type(value) in (dict, list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for child in (node.values() if type(node) is dict else node):
            if type(child) in (dict, list):
                stack.append((child, depth + 1))
    return False


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
    if isinstance(text, str):
        document, raw = text, text.encode("utf-8", "surrogatepass")
    else:
        raw = bytes(text)
        try:
            document = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonDocumentError(f"{what}: not UTF-8 text (byte {exc.start})") from None
    if document.startswith("\ufeff"):
        document = document[1:]
    try:
        value = json.loads(document)
        if not _surely_shallow(raw, max_depth) and deeper_than(value, max_depth):
            raise RecursionError
        return value
    except json.JSONDecodeError as exc:
        raise JsonDocumentError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") \
            from None
    except RecursionError:  # deeper than the interpreter's limit, or parsed and measured deeper than max_depth
        raise JsonDocumentError(f"{what}: nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # an integer over the interpreter's digit limit
        raise JsonDocumentError(f"{what}: not valid JSON ({str(exc).splitlines()[0][:80]})") from None
