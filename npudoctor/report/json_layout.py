"""JSON documents laid out for people and programs alike: one top-level key per line, and one line per item
of a top-level list.

``json.dumps(indent=2)`` encodes in Python (CPython's C encoder writes only unindented JSON); for a report
of hundreds of rows that was most of ``npudoctor libs --format json``'s run time. Here every value is
encoded by the C encoder, and the layout still reads (and greps) row by row.
"""

from __future__ import annotations

import json
from typing import Any, List, Mapping

_encode = json.JSONEncoder(ensure_ascii=False).encode


def dumps(document: Mapping[str, Any]) -> str:
    """``document`` as JSON text; ``json.loads`` gives it back.

    >>> print(dumps({"schema": "x/1", "rows": [{"a": 1}, {"a": 2}], "empty": [], "ok": True}))
    {
      "schema": "x/1",
      "rows": [
        {"a": 1},
        {"a": 2}
      ],
      "empty": [],
      "ok": true
    }
    """
    lines: List[str] = []
    for key, value in document.items():
        if isinstance(value, (list, tuple)) and value:
            rows = ",\n".join(f"    {_encode(item)}" for item in value)
            lines.append(f"  {_encode(key)}: [\n{rows}\n  ]")
        else:
            lines.append(f"  {_encode(key)}: {_encode(value)}")
    return "{\n" + ",\n".join(lines) + "\n}" if lines else "{}"
