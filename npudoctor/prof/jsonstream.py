"""Streaming reads of the big profiler JSON files (trace_view.json, msprof_*.json, communication.json).

A 250 MB trace decoded whole holds ~4 GB of Python objects. These readers decode one event (or one
communication operator's record) at a time from a sliding buffer, so memory stays at the buffer plus what the
caller keeps. Every element is bounded (``MAX_ITEM_BYTES``), nesting inside an element past the decoder's
recursion limit is an error for that file, and the number of elements read is capped (the rest is not read,
and said). Errors are :class:`JsonStreamError` with one line; what was read before stays usable.
"""

from __future__ import annotations

import codecs
import json
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence, Tuple

MAX_ITEM_BYTES = 1 << 20          # one trace event / one operator record
MAX_ITEMS = 10_000_000            # events of one trace file
MAX_KEYS = 1_000_000              # object keys walked one by one in one communication file
MAX_DEPTH = 8                     # object levels walked in a communication file
READ_BYTES = 1 << 20
WHITESPACE = " \t\r\n"


class JsonStreamError(Exception):
    """The file could not be read on (one line; elements before it were delivered)."""


class _Buffer:
    def __init__(self, handle: IO[bytes], max_item: int) -> None:
        self.handle = handle
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.text = ""
        self.pos = 0
        self.eof = False
        self.max_item = max_item
        self.json = json.JSONDecoder()

    def fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.handle.read(READ_BYTES)
        self.eof = not chunk
        self.text = self.text[self.pos:] + self.decoder.decode(chunk, final=self.eof)
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            text, pos = self.text, self.pos
            while pos < len(text) and text[pos] in WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(text):
                return text[pos]
            if not self.fill():
                return ""

    def expect(self, chars: str) -> str:
        char = self.peek()
        if not char or char not in chars:
            found = repr(char) if char else "the end of the file"
            raise JsonStreamError(f"not valid JSON (expected {' or '.join(repr(c) for c in chars)}, found {found})")
        self.pos += 1
        return char

    def value(self) -> Any:
        """Decode the value at the position (bounded by ``max_item``)."""
        found, value = self.try_value()
        if not found:
            raise JsonStreamError(f"an element larger than {self.max_item >> 10} KiB")
        return value

    def try_value(self) -> Tuple[bool, Any]:
        """(True, value) for the value at the position, or (False, None) when it is larger than ``max_item``
        (the position is left on it)."""
        self.peek()
        while True:
            try:
                value, end = self.json.raw_decode(self.text, self.pos)
            except RecursionError:
                raise JsonStreamError("nested too deep (an element thousands of levels deep)") from None
            except ValueError as exc:
                if len(self.text) - self.pos > self.max_item:
                    return False, None
                if not self.fill():
                    raise JsonStreamError(f"not valid JSON ({str(exc).splitlines()[0][:100]})") from None
                continue
            if end >= len(self.text) and not self.eof:  # a number cut at the buffer's end: read on, decode again
                if len(self.text) - self.pos > self.max_item:
                    return False, None
                self.fill()
                continue
            self.pos = end
            return True, value


def iter_array(handle: IO[bytes], max_items: int = MAX_ITEMS, max_item: int = MAX_ITEM_BYTES,
               notes: Optional[List[str]] = None) -> Iterator[Any]:
    """The elements of a top-level JSON array, or of the ``traceEvents`` array of a top-level object."""
    buffer = _Buffer(handle, max_item)
    opening = buffer.expect("[{")
    if opening == "{":
        if not _seek_key(buffer, "traceEvents"):
            return
        buffer.expect("[")
    if buffer.peek() == "]":
        return
    count = 0
    while True:
        if count >= max_items:
            if notes is not None:
                notes.append(f"more than {max_items:,} events: the rest not read")
            return
        yield buffer.value()
        count += 1
        if buffer.expect(",]") == "]":
            return


def _seek_key(buffer: _Buffer, wanted: str) -> bool:
    """In an object just opened, skip members up to the value of ``wanted``; False when it is not there."""
    if buffer.peek() == "}":
        return False
    while True:
        if buffer.peek() != '"':
            buffer.expect('"')
        key = buffer.value()
        buffer.expect(":")
        if key == wanted:
            return True
        buffer.value()
        if buffer.expect(",}") == "}":
            return False


def iter_members(handle: IO[bytes], wanted: Sequence[str], max_depth: int = MAX_DEPTH,
                 max_keys: int = MAX_KEYS, max_item: int = MAX_ITEM_BYTES,
                 notes: Optional[List[str]] = None) -> Iterator[Tuple[Tuple[str, ...], Dict[str, Any]]]:
    """Walk nested objects without decoding them whole; for each object holding members named in ``wanted``,
    yield (the keys leading to it, {wanted key: decoded value}) when the object closes.

    Objects are walked ``max_depth`` levels deep; other values (arrays, numbers, deeper objects) are decoded
    one at a time and dropped. After ``max_keys`` keys the walk stops (said in ``notes``).
    """
    buffer = _Buffer(handle, max_item)
    buffer.expect("{")
    trail: List[str] = []
    found: List[Dict[str, Any]] = [{}]
    keys = 0
    while True:
        char = buffer.peek()
        if char == "}":
            buffer.pos += 1
            members = found.pop()
            if members:
                yield tuple(trail), members
            if not trail:
                return
            trail.pop()
            if buffer.expect(",}") == "}":
                buffer.pos -= 1  # closes the parent object next round
            continue
        if char != '"':
            buffer.expect('"')
        keys += 1
        if keys > max_keys:
            if notes is not None:
                notes.append(f"more than {max_keys:,} keys: the rest not read")
            return
        key = buffer.value()
        buffer.expect(":")
        if key in wanted:
            found[-1][key] = buffer.value()
        elif buffer.peek() == "{" and len(trail) < max_depth:
            small, value = buffer.try_value()  # most objects are small: decoded in C, walked in memory
            if not small:
                buffer.pos += 1
                trail.append(str(key)[:200])
                found.append({})
                continue
            yield from _walk_decoded(value, [*trail, str(key)[:200]], wanted, max_depth)
        else:
            buffer.value()
        if buffer.expect(",}") == "}":
            buffer.pos -= 1


def _walk_decoded(node: Any, trail: List[str], wanted: Sequence[str], max_depth: int
                  ) -> Iterator[Tuple[Tuple[str, ...], Dict[str, Any]]]:
    """:func:`iter_members` over an object already decoded (small), children before their parent."""
    stack: List[Tuple[Any, List[str], bool]] = [(node, trail, False)]
    while stack:
        current, path, visited = stack.pop()
        if not isinstance(current, dict):
            continue
        if visited:
            members = {key: current[key] for key in wanted if key in current}
            if members:
                yield tuple(path), members
            continue
        stack.append((current, path, True))
        if len(path) < max_depth:
            for key, value in reversed(list(current.items())):
                if key not in wanted and isinstance(value, dict):
                    stack.append((value, [*path, str(key)[:200]], False))
