"""Column maps: the spellings of each profiling table's columns, mapped to one canonical vocabulary.

The maps are data (``checks/prof_columns/<table>.yaml``), versioned by their ``schema`` and ``version`` keys;
this module only matches a file's header row against them. Matching ignores case and surrounding spaces; a
header cell no map names is kept in the file and ignored.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from npudoctor.knowledge import KnowledgeError, load

SCHEMA = "npudoctor.prof_columns/1"
TABLES = ("kernel_details", "op_statistic", "step_trace_time", "memory_record", "operator_memory",
          "api_statistic", "task_time", "ai_core_utilization")


class ColumnMap(NamedTuple):
    table: str
    version: int
    files: Tuple[str, ...]                 # file-name stems this table is written under
    spellings: Mapping[str, Tuple[str, ...]]  # canonical -> spellings
    scale: Mapping[str, float]             # spelling -> factor to the canonical unit
    groups: Mapping[str, Tuple[str, ...]]
    values: Mapping[str, Mapping[str, str]]  # canonical column -> {cell spelling: canonical value}


class Resolved(NamedTuple):
    """One file's header matched against a map: canonical -> the file's own header cell."""

    found: Mapping[str, str]
    extra: Tuple[str, ...]  # header cells no canonical name claims (kept, ignored)

    def has(self, *names: str) -> bool:
        return all(name in self.found for name in names)

    def missing(self, names: Sequence[str]) -> List[str]:
        return [name for name in names if name not in self.found]


def _key(text: str) -> str:
    return text.strip().lower()


@functools.cache
def column_map(table: str) -> ColumnMap:
    """The shipped map of ``table`` (``checks/prof_columns/<table>.yaml``)."""
    data: Any = load(f"prof_columns/{table}")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("columns"), dict):
        raise KnowledgeError(f"checks/prof_columns/{table}.yaml: expected schema {SCHEMA} with a columns mapping")
    spellings = {str(k): tuple(str(s) for s in v) for k, v in data["columns"].items()}
    return ColumnMap(
        table=table,
        version=int(data.get("version", 1)),
        files=tuple(str(f) for f in data.get("files", [table])),
        spellings=spellings,
        scale={str(k): float(v) for k, v in (data.get("scale") or {}).items()},
        groups={str(k): tuple(str(c) for c in v) for k, v in (data.get("groups") or {}).items()},
        values={str(k): {str(a): str(b) for a, b in v.items()} for k, v in (data.get("values") or {}).items()},
    )


def resolve(header: Sequence[str], cmap: ColumnMap) -> Resolved:
    """Match a header row against ``cmap``: the first spelling (in map order) present in the header wins."""
    by_key: Dict[str, str] = {}
    for cell in header:
        by_key.setdefault(_key(cell), cell)
    found: Dict[str, str] = {}
    claimed = set()
    for canonical, spellings in cmap.spellings.items():
        for spelling in spellings:
            match = by_key.get(_key(spelling))
            if match is not None and match not in claimed:
                found[canonical] = match
                claimed.add(match)
                break
    extra = tuple(cell for cell in header if cell not in claimed)
    return Resolved(found, extra)


def scale_of(cmap: ColumnMap, cell: str) -> Optional[float]:
    for spelling, factor in cmap.scale.items():
        if _key(spelling) == _key(cell):
            return factor
    return None
