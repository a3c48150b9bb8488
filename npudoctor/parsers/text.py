"""Text decoding shared by every reader of recorded or user-supplied bytes.

>>> decode_text("HCCL 初始化失败".encode("gb18030"))
'HCCL 初始化失败'
>>> decode_text(b"ok\\xff")
'ok\\ufffd'
"""

from __future__ import annotations

import re


def decode_text(data: bytes) -> str:
    """Bytes to text without ever failing: UTF-8, then GB18030 (Chinese CANN messages), then replacement."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("gb18030")
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace")


def strip_header(text: str) -> str:
    """The verbatim part of a captured sample: everything after its ``# source:`` ... ``# ---`` header (the
    text itself when it has no header in its first 40 lines)."""
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines[:40]):
        if line.rstrip() == "# ---":
            return "".join(lines[index + 1:])
    return text


# Terminal escape sequences (OSC title changes, CSI clear-screen and colours, other ESC sequences) and the
# control characters left: log text is someone else's text, printed on our user's terminal and in XML.
_CONTROL = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b\[[0-?]*[ -/]*[@-~]?|\x1b[@-_]?|"
                      r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (tabs kept)."""
    return _CONTROL.sub("", text) if not text.isprintable() else text
