"""Numbers derived from a rank's grouped kernel table and step trace (shared by the checks and the outputs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

if TYPE_CHECKING:
    from npudoctor.prof.model import Rank

AI_CPU = "AI_CPU"


def by_core(groups: Any) -> Dict[str, int]:
    """Task count per accelerator core type (AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, HCCL, ...)."""
    if groups is None or not len(groups):
        return {}
    counts = groups.groupby("core", sort=True)["n"].sum()
    return {str(k): int(v) for k, v in counts.items()}


def device_time_us(groups: Any) -> float:
    if groups is None or not len(groups):
        return 0.0
    return float(groups["dur_sum"].sum())


def aicpu_ops(groups: Any, long_only: bool = False) -> Dict[str, Dict[str, float]]:
    """Per operator type of AI CPU tasks: ``{count, total_us, max_us}`` (``long_only``: tasks >= min_task_us)."""
    if groups is None or not len(groups):
        return {}
    rows = groups[groups["core"] == AI_CPU]
    if long_only:
        rows = rows[rows["long"].astype(bool)]
    out: Dict[str, Dict[str, float]] = {}
    for op_type, part in rows.groupby("op_type", sort=False):
        out[str(op_type)] = {"count": int(part["n"].sum()), "total_us": round(float(part["dur_sum"].sum()), 3),
                             "max_us": round(float(part["dur_max"].max()), 3)}
    return dict(sorted(out.items(), key=lambda item: -item[1]["total_us"]))


def aicpu_dtypes(groups: Any, op_type: str) -> List[str]:
    rows = groups[(groups["core"] == AI_CPU) & (groups["op_type"] == op_type)]
    return sorted({str(d) for d in rows["dtypes"] if d})[:5]


def top_ops(groups: Any, limit: int) -> Dict[str, List[Dict[str, Any]]]:
    """The ``limit`` operator types taking most device time, per core type."""
    if groups is None or not len(groups):
        return {}
    totals = groups.groupby(["core", "op_type"], sort=False).agg(
        count=("n", "sum"), total_us=("dur_sum", "sum"), max_us=("dur_max", "max")).reset_index()
    out: Dict[str, List[Dict[str, Any]]] = {}
    for core, part in totals.groupby("core", sort=True):
        best = part.nlargest(limit, "total_us")
        out[str(core)] = [{"op_type": str(r.op_type), "count": int(r.count), "total_us": round(float(r.total_us), 3),
                           "max_us": round(float(r.max_us), 3)} for r in best.itertuples()]
    return out


def step_shares(step_trace: Any) -> Optional[List[Dict[str, Any]]]:
    """Per step: step time (computing + not-overlapped communication + free) and the share of each part."""
    if step_trace is None or not len(step_trace):
        return None
    needed = ("computing_us", "free_us")
    if not all(c in step_trace.columns for c in needed):
        return None
    rows = []
    for record in step_trace.to_dict("records"):
        computing = _number(record.get("computing_us"))
        free = _number(record.get("free_us"))
        comm = _number(record.get("comm_not_overlapped_us"))
        total = computing + free + comm
        if total <= 0:
            continue
        step = record.get("step")
        label = record.get("row_index") if record.get("row_index") not in (None, "") else step
        rows.append({"step": "" if label is None or label != label else str(label), "step_us": round(total, 3),
                     "free_share": round(free / total, 4), "comm_share": round(comm / total, 4),
                     "computing_share": round(computing / total, 4)})
    return rows


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if number == number else 0.0


def rank_dict(rank: Rank) -> Dict[str, Any]:
    groups = rank.groups
    shares = step_shares(rank.step_trace)
    return {
        "label": rank.label,
        "layout": rank.source.layout,
        "root": rank.source.root,
        "device": rank.device or None,
        "rank": rank.source.rank,
        "tables": {table: list(paths) for table, paths in rank.tables_read.items()},
        "kernel_rows": rank.kernel.rows if rank.kernel else 0,
        "device_time_us": round(device_time_us(groups), 3),
        "by_core": by_core(groups),
        "aicpu_ops": aicpu_ops(groups),
        "ai_core_num": rank.core_count()[0],
        "aiv_num": rank.core_count()[1],
        "steps": shares or [],
        "memory": rank.memory,
        "problems": list(rank.problems),
    }


def aicpu_ops_all(ranks: Sequence[Rank]) -> Dict[str, Dict[str, Any]]:
    """AI CPU operator types over all ranks: ``{count, total_us, max_us, ranks}``."""
    out: Dict[str, Dict[str, Any]] = {}
    for rank in ranks:
        for op_type, numbers in aicpu_ops(rank.groups).items():
            entry = out.setdefault(op_type, {"count": 0, "total_us": 0.0, "max_us": 0.0, "ranks": []})
            entry["count"] += numbers["count"]
            entry["total_us"] = round(entry["total_us"] + numbers["total_us"], 3)
            entry["max_us"] = max(entry["max_us"], numbers["max_us"])
            entry["ranks"].append(rank.label)
    return dict(sorted(out.items(), key=lambda item: -item[1]["total_us"]))
