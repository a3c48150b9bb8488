"""An ``npudoctor.report/1`` document read back from a file (``fleet``, ``profile derive``) is untrusted input.

It is checked field by field, as bundle manifests are (``probes.bundle.parse_manifest``), for the fields the
readers use, and capped in what one report may bring: a report of a real node has ~60 findings and ~30
inventory fields, so 500,000 distinct inventory keys or 400,000 failing IDs are refused, not kept.
:class:`ReportShapeError` names the field; unknown fields are ignored (a newer minor version may add some).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping

from npudoctor.errors import InputError
from npudoctor.parsers.jsondoc import type_name

REPORT_SCHEMA = "npudoctor.report/1"
# A report is 10-50 KiB; anything far bigger is not one, and must not be parsed whole: 4 MiB of tiny findings
# parse into ~60 MiB of objects (16 MiB into 210 MiB).
MAX_REPORT_BYTES = 4 * 1024 * 1024
MAX_FINDINGS = 20_000
MAX_INVENTORY_FIELDS = 1_000
MAX_ID_CHARS = 64
MAX_TEXT_CHARS = 4096  # a title, host name, profile name or time
MAX_LIST_ITEMS = 1_024  # an inventory list (bus ids of the chips)
MAX_ROW_FIELDS = 64  # a chip's row in inventory.chips.devices
SUMMARY_KEYS = ("pass", "warn", "fail", "skip", "error")
_OBJECTS = ("tool", "summary", "inventory", "host", "run")
_TEXTS = (("tool", "profile"), ("tool", "command"), ("host", "hostname"), ("inventory", "hostname"),
          ("run", "started"))
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
_TEXT_OR_NULL = frozenset({str, type(None)})


def _values_or_rows(items: Any) -> bool:
    """Scalars, or flat objects of at most MAX_ROW_FIELDS scalars."""
    kinds = {type(item) for item in items}
    if kinds <= _SCALAR_TYPES:
        return True
    if kinds - _SCALAR_TYPES - {dict}:
        return False
    rows = [item for item in items if type(item) is dict]
    return all(len(row) <= MAX_ROW_FIELDS for row in rows) and \
        {type(value) for row in rows for value in row.values()} <= _SCALAR_TYPES


class ReportShapeError(InputError, ValueError):
    """Not a report, or a field of the wrong type or size: one line naming the field."""


def _bad(field: str, expected: str, value: Any) -> ReportShapeError:
    return ReportShapeError(f"{field}: expected {expected}, got {type_name(value)}")


def check_report(document: Any) -> Dict[str, Any]:
    """``document`` when it has the shape of an ``npudoctor.report/1`` document, else :class:`ReportShapeError`.

    >>> check_report({"schema": "npudoctor.report/1", "summary": {"fail": "many"}})
    Traceback (most recent call last):
    ...
    npudoctor.fleet.reportdoc.ReportShapeError: summary.fail: expected a count, got a string
    """
    if not isinstance(document, dict) or document.get("schema") != REPORT_SCHEMA:
        schema = document.get("schema") if isinstance(document, dict) else None
        shown = repr(schema)[:60] if isinstance(schema, (str, type(None))) else type_name(schema)
        raise ReportShapeError(f"not an {REPORT_SCHEMA} document (schema {shown})")
    for key in _OBJECTS:
        value = document.get(key)
        if value is not None and type(value) is not dict:
            raise _bad(key, "an object", value)
    for section, key in _TEXTS:
        value = (document.get(section) or {}).get(key)
        if value is not None and (type(value) is not str or len(value) > MAX_TEXT_CHARS):
            raise _bad(f"{section}.{key}", f"a string of at most {MAX_TEXT_CHARS} characters", value)
    summary: Mapping[str, Any] = document.get("summary") or {}
    for key in SUMMARY_KEYS:
        value = summary.get(key)
        if value is not None and (type(value) is not int or not 0 <= value <= MAX_FINDINGS):
            raise _bad(f"summary.{key}", "a count", value)
    _check_findings(document.get("findings"))
    _check_inventory(document.get("inventory") or {})
    return document


def _check_findings(findings: Any) -> None:
    if findings is None:
        return
    if type(findings) is not list:
        raise _bad("findings", "a list", findings)
    if len(findings) > MAX_FINDINGS:
        raise ReportShapeError(f"findings: more than {MAX_FINDINGS}")
    # The fleet reads 50,000 reports of ~60 findings: one pass over the types first, details only on a miss.
    if {type(finding) for finding in findings} - {dict}:
        index = next(i for i, finding in enumerate(findings) if type(finding) is not dict)
        raise _bad(f"findings[{index}]", "an object", findings[index])
    for key, limit in (("id", MAX_ID_CHARS), ("status", MAX_ID_CHARS), ("title", MAX_TEXT_CHARS)):
        values = [finding.get(key) for finding in findings]
        if {type(value) for value in values} - _TEXT_OR_NULL or max(map(len, filter(None, values)), default=0) > limit:
            index, value = next((i, v) for i, v in enumerate(values)
                                if v is not None and (type(v) is not str or len(v) > limit))
            raise _bad(f"findings[{index}].{key}", f"a string of at most {limit} characters", value)


def _check_inventory(inventory: Mapping[str, Any]) -> None:
    count = 0
    stack = [("inventory", inventory)]
    while stack:
        where, node = stack.pop()
        count += len(node)
        if count > MAX_INVENTORY_FIELDS:
            raise ReportShapeError(f"inventory: more than {MAX_INVENTORY_FIELDS} fields")
        for key, value in node.items():
            kind = type(value)
            if kind is dict:
                stack.append((f"{where}.{key}", value))
            elif kind is list:  # values (bus ids), or flat rows (chips.devices: one per chip)
                if len(value) > MAX_LIST_ITEMS or not _values_or_rows(value):
                    raise _bad(f"{where}.{key}", f"a list of at most {MAX_LIST_ITEMS} values or rows", value)
            elif kind not in _SCALAR_TYPES or (kind is float and not math.isfinite(value)):
                raise _bad(f"{where}.{key}", "a value", value)  # NaN/Infinity: JSON has no such number
            elif kind is str and len(value) > MAX_TEXT_CHARS:
                raise _bad(f"{where}.{key}", f"a string of at most {MAX_TEXT_CHARS} characters", value)
    chips = inventory.get("chips")
    if chips is not None and type(chips) is not dict:
        raise _bad("inventory.chips", "an object", chips)
