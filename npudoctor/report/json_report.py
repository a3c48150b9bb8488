"""``--format json``: the versioned ``npudoctor.report/1`` document."""

from __future__ import annotations

import json
import math
import sys
from typing import IO, Any, Optional

from npudoctor.model.finding import Report
from npudoctor.report import terminal


def render(report: Report, ascii_only: bool = False) -> str:
    """The document; ``ascii_only`` writes characters beyond ASCII as ``\\uXXXX`` escapes (same data)."""
    return dumps(report.to_dict(), ascii_only)


def dumps(document: Any, ascii_only: bool = False) -> str:
    """Always valid JSON: a number that is not finite (a sum over an odd table) is written as null."""
    try:
        return json.dumps(document, indent=2, ensure_ascii=ascii_only, default=str, allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(_finite(document), indent=2, ensure_ascii=ascii_only, default=str) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def document_text(document: Any, stream: Optional[IO[str]] = None) -> str:
    """Any command's JSON document as written to ``stream`` (stdout): UTF-8 where the stream can carry every
    character, else ``\\uXXXX`` escapes (``LANG=C``, ``PYTHONIOENCODING=ascii``): the same data, never ``?``.
    The same bytes on a terminal and in a pipe."""
    text = dumps(document)
    return text if terminal.can_encode(text, stream) else dumps(document, ascii_only=True)


def emit(document: Any, stream: Optional[IO[str]] = None) -> None:
    """Write :func:`document_text` to ``stream`` (stdout)."""
    stream = stream or sys.stdout
    stream.write(document_text(document, stream))
    stream.flush()
