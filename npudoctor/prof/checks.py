"""The PROF checks: one function per stable ID, its docstring is its documentation (`npudoctor explain PROF001`).

Each check reads the ranks' grouped tables (see :mod:`npudoctor.prof.figures`) and yields Findings. A check that
cannot apply (table or column missing) yields SKIP with the reason, never PASS.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from npudoctor import knowledge
from npudoctor.model import rulebook
from npudoctor.model.finding import Finding, Status
from npudoctor.model.profile import NodeProfile
from npudoctor.model.units import duration_us as _ms  # the room's short names for the one set of formatters
from npudoctor.model.units import percent as _pct
from npudoctor.prof import figures
from npudoctor.prof.model import Rank, status_for

STAGE = "prof"
KERNEL_REQUIRED = ("core_type", "duration_us")
CUBE_CORES = ("AI_CORE", "MIX_AIC")
VECTOR_CORES = ("AI_VECTOR_CORE", "MIX_AIV")
COMMUNICATION_CORES = ("HCCL", "COMMUNICATION")  # collectives: no OP State, not compute


@dataclass
class ProfContext:
    ranks: List[Rank]
    profile: NodeProfile = field(default_factory=lambda: NodeProfile("default"))
    logs_dirs: Tuple[str, ...] = ()
    notes: Dict[str, Any] = field(default_factory=dict)

    def setting(self, key: str) -> Any:
        """The value in force of the profile key ``key`` (one the check declares in its ``settings``): the
        profile's, else the shipped ``profiles/default.yaml``'s. No check writes a default of its own."""
        return knowledge.setting(self.profile, key)

    def limits(self, key: str, transports: Sequence[str]) -> Dict[str, float]:
        """``{TRANSPORT: value}`` of the settings ``<key>.<TRANSPORT>`` that are set (null: not judged)."""
        values = {transport: self.setting(f"{key}.{transport}") for transport in transports}
        return {transport: float(value) for transport, value in values.items() if value is not None}

    @property
    def min_task_us(self) -> float:
        return float(self.setting("prof.min_task_us"))

    @property
    def top_n(self) -> int:
        return int(self.setting("prof.top_n"))

    def with_kernels(self) -> List[Rank]:
        """Ranks whose kernel table says, per task, the core type and the duration (what every check needs)."""
        return [r for r in self.ranks if r.groups is not None and len(r.groups) and r.kernel is not None
                and r.kernel.has(*KERNEL_REQUIRED)]


# The transports PROF010 judges by bandwidth (profile ``prof.link_min_bandwidth_gbps.<transport>``).
TRANSPORTS = ("SDMA", "RDMA", "HCCS", "PCIE", "SIO")
ProfCheckFunc = Callable[[ProfContext], Iterable[Finding]]


def prof_check(check_id: str, title: str, settings: Sequence[str] = ()) -> Callable[[ProfCheckFunc], ProfCheckFunc]:
    """Register a PROF check in the rulebook (room "prof"); ``settings`` are the profile keys it reads."""
    return rulebook.check(check_id, STAGE, title, "prof", settings=settings)


def _finding(check_id: str, status: Status, subject: str = "", detail: str = "",
             evidence: Optional[Mapping[str, Any]] = None, fix: str = "") -> Finding:
    return Finding(id=check_id, status=status, title=rulebook.REGISTRY[check_id].title, subject=subject, detail=detail,
                   evidence=dict(evidence or {}), fix=fix, stage=STAGE)


def _against_bar(check_id: str, over: bool, detail: str, evidence: Mapping[str, Any], fix: str,
                 bar: str) -> Finding:
    """A measure judged against one bar: WARN with the fix when ``over`` it, else PASS saying the bar."""
    if over:
        return _finding(check_id, Status.WARN, detail=detail, evidence=evidence, fix=fix)
    return _finding(check_id, Status.PASS, detail=f"{detail} (bar {bar})", evidence=evidence)


def run_all(ctx: ProfContext) -> List[Finding]:
    findings: List[Finding] = []
    for check in rulebook.specs("prof", by_id=True):
        try:
            findings.extend(check.func(ctx) if check.func is not None else ())
        except Exception as exc:  # a broken check is an ERROR finding, never a lost report
            findings.append(_finding(check.id, Status.ERROR, detail=rulebook.crash_detail(exc)))
    return findings


def _ranks_text(labels: Sequence[str]) -> str:
    labels = list(dict.fromkeys(labels))
    return ", ".join(labels[:6]) + (f" (+{len(labels) - 6} more)" if len(labels) > 6 else "")


def _no_kernels(ctx: ProfContext, check_id: str) -> Optional[Finding]:
    if ctx.with_kernels():
        return None
    incomplete = [r for r in ctx.ranks if r.kernel is not None and not r.kernel.has(*KERNEL_REQUIRED)]
    if incomplete:
        from npudoctor.prof.columns import column_map

        table = incomplete[0].kernel.table if incomplete[0].kernel else "kernel_details"
        spellings = column_map(table if table != "timeline" else "kernel_details").spellings
        missing = [c for c in KERNEL_REQUIRED if incomplete[0].kernel and not incomplete[0].kernel.has(c)]
        names = " / ".join(s for c in missing for s in spellings.get(c, (c,)))
        return _finding(check_id, Status.SKIP, detail=f"the {table} table of {incomplete[0].label} has no "
                        f"{names} column: not judged")
    return _finding(check_id, Status.SKIP, detail="no kernel table read (kernel_details.csv, op_summary_*.csv, "
                    "task_time or op_statistic)")


def _ranks_having(ctx: ProfContext, check_id: str, column: str, missing: str) -> Tuple[List[Rank], Optional[Finding]]:
    """The ranks whose kernel table has ``column``, or the SKIP finding saying why there are none."""
    skip = _no_kernels(ctx, check_id)
    if skip is not None:
        return [], skip
    ranks = [r for r in ctx.with_kernels() if r.kernel and r.kernel.has(column)]
    return ranks, None if ranks else _finding(check_id, Status.SKIP, detail=missing)


# --- AI CPU -------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _hints() -> Mapping[str, Any]:
    from npudoctor.knowledge import load

    data = load("prof_aicpu_hints")
    return data if isinstance(data, dict) else {}


def aicpu_hint(op_type: str, dtypes: Sequence[str]) -> str:
    """The fix for one AI CPU operator type: its op-specific guide and what its input dtypes suggest."""
    hints = _hints()
    parts: List[str] = []
    op_hint = (hints.get("ops") or {}).get(op_type.lower())
    if op_hint:
        parts.append(str(op_hint))
    dtype_hints = {str(k).upper(): str(v) for k, v in (hints.get("dtypes") or {}).items()}
    for dtype in sorted({d.strip().upper() for text in dtypes for d in text.split(";") if d.strip()}):
        hint = dtype_hints.get(dtype)
        if hint and hint not in parts:
            parts.append(hint)
    if not parts:
        parts.append(str(hints.get("default", "Avoid the operator in the training step.")))
    return "\n".join(parts)


def _log_fallbacks(ctx: ProfContext) -> Dict[str, List[Dict[str, Any]]]:
    """The log doctor's CPU-fallback findings under ``--logs`` directories, by operator type (lower case)."""
    if not ctx.logs_dirs:
        return {}
    if "log_fallbacks" in ctx.notes:
        return ctx.notes["log_fallbacks"]
    from npudoctor.prof.logs_bridge import fallback_findings

    found: Dict[str, List[Dict[str, Any]]] = {}
    for item in fallback_findings(ctx.logs_dirs):
        found.setdefault(item["op_type"].lower(), []).append(item)
    ctx.notes["log_fallbacks"] = found
    return found


@prof_check("PROF001", "Operators on the AI CPU / host CPU",
            settings=("prof.aicpu_fail_share", "prof.min_task_us", "prof.top_n"))
def aicpu_operators(ctx: ProfContext) -> Iterable[Finding]:
    """Operators that run on the AI CPU (or fall back to the host CPU) instead of the AI Core.

    An AI CPU task is typically 10-100x slower than the same operator on the AI Core and breaks the
    device pipeline. The check reads the kernel table (``Accelerator Core`` / ``Task Type`` = ``AI_CPU``),
    keeps tasks of at least ``prof.min_task_us`` (20 us, msprof-analyze's convention) and lists the
    ``prof.top_n`` operator types taking the most time, with count, total and max time, share of device
    time and the ranks they were seen on. WARN per operator type; FAIL when one takes
    ``prof.aicpu_fail_share`` of a rank's device time. With ``--logs DIR`` the log doctor's CPU-fallback
    findings (torch_npu "fall back to run on the CPU", GE engine placement) for the same operator are merged
    into the same finding; fallbacks seen only in the logs get their own finding.

    Fix: cast int64/double inputs to int32/float32; replace index/indexput/nonzero patterns with fixed-shape
    operators (the finding prints the hint for the operator and its input dtypes).
    """
    skip = _no_kernels(ctx, "PROF001")
    logs = _log_fallbacks(ctx)
    if skip is not None and not logs:
        yield skip
        return
    merged: Dict[str, Dict[str, Any]] = {}
    short = 0.0
    for rank in ctx.with_kernels():
        total_time = figures.device_time_us(rank.groups) or 1.0
        long_ops = figures.aicpu_ops(rank.groups, long_only=True)
        short += sum(v["count"] for v in figures.aicpu_ops(rank.groups).values()) - sum(
            v["count"] for v in long_ops.values())
        for op_type, numbers in long_ops.items():
            entry = merged.setdefault(op_type, {"count": 0, "total_us": 0.0, "max_us": 0.0, "ranks": {},
                                                "dtypes": set(), "max_share": 0.0})
            share = numbers["total_us"] / total_time
            entry["count"] += numbers["count"]
            entry["total_us"] += numbers["total_us"]
            entry["max_us"] = max(entry["max_us"], numbers["max_us"])
            entry["max_share"] = max(entry["max_share"], share)
            entry["ranks"][rank.label] = {**numbers, "share": round(share, 4)}
            entry["dtypes"].update(figures.aicpu_dtypes(rank.groups, op_type))
    fail_share = float(ctx.setting("prof.aicpu_fail_share"))
    ordered = sorted(merged.items(), key=lambda item: -item[1]["total_us"])
    for op_type, entry in ordered[:ctx.top_n]:
        status = Status.FAIL if entry["max_share"] >= fail_share else Status.WARN
        ranks = list(entry["ranks"])
        detail = (f"{entry['count']} task(s) of >= {ctx.min_task_us:g} us on the AI CPU, total "
                  f"{_ms(entry['total_us'])}, max {_ms(entry['max_us'])}, up to {_pct(entry['max_share'])} of "
                  f"device time; ranks {_ranks_text(ranks)}")
        evidence: Dict[str, Any] = {"op_type": op_type, "count": entry["count"],
                                    "total_us": round(entry["total_us"], 3), "max_us": entry["max_us"],
                                    "max_share": round(entry["max_share"], 4), "ranks": entry["ranks"],
                                    "input_dtypes": sorted(entry["dtypes"])}
        log_items = logs.pop(op_type.lower(), [])
        if log_items:
            evidence["logs"] = log_items
            detail += f"; the logs show it too ({sum(i['count'] for i in log_items)} line(s))"
        yield _finding("PROF001", status, op_type, detail, evidence, aicpu_hint(op_type, sorted(entry["dtypes"])))
    if len(ordered) > ctx.top_n:
        rest = ordered[ctx.top_n:]
        yield _finding("PROF001", Status.WARN, f"{len(rest)} more operator types",
                       f"{sum(e['count'] for _, e in rest)} more AI CPU task(s), total "
                       f"{_ms(sum(e['total_us'] for _, e in rest))}",
                       {"op_types": [op for op, _ in rest][:50]}, "See `--format json` for all of them.")
    for op_type, items in logs.items():
        first = items[0]
        yield _finding("PROF001", Status.WARN, first["op_type"],
                       f"seen in the logs only ({first['title']}, {sum(i['count'] for i in items)} line(s)); "
                       "not an AI CPU task in the profile (a host CPU fallback or another run)",
                       {"op_type": first["op_type"], "logs": items}, first.get("fix") or aicpu_hint(op_type, ()))
    if not ordered and not logs:
        if skip is not None:
            yield skip
            return
        detail = (f"no AI CPU task of >= {ctx.min_task_us:g} us in {len(ctx.with_kernels())} rank(s)"
                  + (f" ({int(short)} shorter AI CPU task(s) not reported)" if short else ""))
        yield _finding("PROF001", Status.PASS, detail=detail, evidence={"short_aicpu_tasks": int(short)})


# --- AI Core utilization --------------------------------------------------------------------------------------

@prof_check("PROF002", "Operators bound by no pipe (PMU ratios)",
            settings=("prof.bound_ratio", "prof.min_task_us", "prof.no_bound_warn_share", "prof.top_n"))
def no_bound_operators(ctx: ProfContext) -> Iterable[Finding]:
    """AI Core tasks where no pipe is busy: latency, launch or synchronisation bound.

    With ``--aic-metrics=PipeUtilization`` (the default) each task has the share of its cycles each pipe was
    busy (``aic_mac_ratio``, ``aiv_vec_ratio``, ``*_scalar_ratio``, ``*_mte1/2/3_ratio``). When none of them is
    above ``prof.bound_ratio`` (0.8, msprof-analyze's ``operator_bound_ratio``) the task is "no bound": the
    cores wait rather than compute or move data. Tasks shorter than ``prof.min_task_us`` are left out. WARN
    when such tasks take ``prof.no_bound_warn_share`` of the AI Core time; the ``prof.top_n`` operator types
    are listed. SKIP when the table has no pipe ratio columns (collected with another ``--aic-metrics`` set).

    Fix: look at the listed operators' shapes: small or odd shapes (tiling that leaves cores idle), many tiny
    launches (fuse them, use graph mode / aclgraph), or host-side synchronisation between them.
    """
    skip = _no_kernels(ctx, "PROF002")
    if skip is not None:
        yield skip
        return
    with_ratios = [r for r in ctx.with_kernels() if (r.groups["nobound"] >= 0).any()]
    if not with_ratios:
        columns = sorted({c for r in ctx.with_kernels() if r.kernel for c in r.kernel.extra_columns
                          if c.startswith(("aic_", "aiv_"))})[:6]
        yield _finding("PROF002", Status.SKIP, detail="no PMU pipe ratio columns (aic_mac_ratio, aiv_vec_ratio, "
                       "...): collect with --aic-metrics=PipeUtilization" + (
                           f"; this table has {', '.join(columns)}" if columns else ""))
        return
    per_op: Dict[str, Dict[str, Any]] = {}
    worst_share = 0.0
    for rank in with_ratios:
        groups = rank.groups[rank.groups["nobound"] >= 0]
        core_time = float(groups["dur_sum"].sum()) or 1.0
        flagged = groups[(groups["nobound"] == 1) & groups["long"].astype(bool)]
        worst_share = max(worst_share, float(flagged["dur_sum"].sum()) / core_time)
        for op_type, part in flagged.groupby("op_type", sort=False):
            entry = per_op.setdefault(str(op_type), {"count": 0, "total_us": 0.0, "ranks": []})
            entry["count"] += int(part["n"].sum())
            entry["total_us"] += float(part["dur_sum"].sum())
            entry["ranks"].append(rank.label)
    ordered = sorted(per_op.items(), key=lambda item: -item[1]["total_us"])[:ctx.top_n]
    evidence = {"bound_ratio": float(ctx.setting("prof.bound_ratio")), "max_share": round(worst_share, 4),
                "operators": [{"op_type": op, "count": e["count"], "total_us": round(e["total_us"], 3),
                               "ranks": list(dict.fromkeys(e["ranks"]))} for op, e in ordered]}
    status = status_for(worst_share, float(ctx.setting("prof.no_bound_warn_share")), None) if ordered else Status.PASS
    if ordered:
        listing = ", ".join(f"{op} {_ms(e['total_us'])}" for op, e in ordered[:3])
        detail = (f"tasks with no pipe ratio above {evidence['bound_ratio']:g} take up to {_pct(worst_share)} of "
                  f"AI Core time: {listing}")
    else:
        detail = f"every task of >= {ctx.min_task_us:g} us has a pipe ratio above {evidence['bound_ratio']:g}"
    yield _finding("PROF002", status, detail=detail, evidence=evidence,
                   fix="Check the listed operators' shapes and launch pattern: idle cores from tiling, tiny "
                       "launches to fuse, or host synchronisation between them.")


@prof_check("PROF003", "Cube utilization", settings=("prof.cube_utilization_min_pct", "prof.top_n"))
def cube_utilization(ctx: ProfContext) -> Iterable[Finding]:
    """How busy the cube units are while matrix operators run (``cube_utilization(%)``).

    msprof computes ``cube_utilization(%) = total_cycles / (frequency x core_num x task_duration)`` for AI Core
    tasks. The check weights it by task time over the AI_CORE and MIX_AIC tasks and WARNs below
    ``prof.cube_utilization_min_pct`` (50), listing the operator types with the most time and their
    utilization. SKIP when the table has no ``cube_utilization(%)`` column (CANN before 8.0, or another
    ``--aic-metrics`` set).

    Fix: matrix shapes whose inner axes are multiples of 16 (256 for best cube tiling), bf16/fp16 instead of
    fp32, larger batches per launch; see the operators listed.
    """
    ranks, skip = _ranks_having(ctx, "PROF003", "cube_utilization_pct",
                                "no cube_utilization(%) column in the kernel table")
    if skip is not None:
        yield skip
        return
    weighted = duration = 0.0
    per_op: Dict[str, List[float]] = {}
    for rank in ranks:
        groups = rank.groups[rank.groups["core"].isin(CUBE_CORES) & (rank.groups["cube_dur"] > 0)]
        weighted += float(groups["cube_wsum"].sum())
        duration += float(groups["cube_dur"].sum())
        for op_type, part in groups.groupby("op_type", sort=False):
            entry = per_op.setdefault(str(op_type), [0.0, 0.0])
            entry[0] += float(part["cube_wsum"].sum())
            entry[1] += float(part["cube_dur"].sum())
    if duration <= 0:
        yield _finding("PROF003", Status.SKIP, detail="no AI_CORE / MIX_AIC task with a cube_utilization(%) value")
        return
    overall = weighted / duration
    minimum = float(ctx.setting("prof.cube_utilization_min_pct"))
    ordered = sorted(per_op.items(), key=lambda item: -item[1][1])[:ctx.top_n]
    evidence = {"cube_utilization_pct": round(overall, 2), "min_pct": minimum,
                "operators": [{"op_type": op, "cube_utilization_pct": round(w / d, 2), "total_us": round(d, 3)}
                              for op, (w, d) in ordered]}
    status = Status.WARN if overall < minimum else Status.PASS
    listing = ", ".join(f"{op} {w / d:.0f}%" for op, (w, d) in ordered[:3])
    yield _finding("PROF003", status, detail=f"time-weighted cube utilization {overall:.1f}% "
                   f"(bar {minimum:g}%): {listing}", evidence=evidence,
                   fix="Give matrix operators shapes that tile well (inner axes multiples of 16, ideally 256), "
                       "bf16/fp16 inputs and larger batches per launch.")


@prof_check("PROF004", "Block dim vs AI Core count", settings=("prof.block_dim_warn_share", "prof.top_n"))
def block_dim(ctx: ProfContext) -> Iterable[Finding]:
    """Operators launched on fewer blocks than cores, or on a block count that is no multiple of the cores.

    A task's ``Block Dim`` (``Block Num``) blocks are spread over the AI Cores (``ai_core_num``) or vector
    cores (``aiv_num``) of ``info.json`` in the PROF folder. When the block count is not a multiple of the
    core count, the last wave leaves cores idle (msprof-analyze's Block Dim rule; MIX_AIC also checks
    ``Mix Block Dim`` against the vector cores). The check adds the time of such tasks (of at least
    ``prof.min_task_us``) and WARNs when it is ``prof.block_dim_warn_share`` of a rank's device time. SKIP
    without a ``Block Dim`` column or without ``info.json`` (core count unknown).

    Fix: for custom kernels, choose a block count that is a multiple of the core count; for built-in
    operators, shapes whose split axis divides by the core count.
    """
    ranks, skip = _ranks_having(ctx, "PROF004", "block_dim", "no Block Dim / Block Num column in the kernel table")
    if skip is not None:
        yield skip
        return
    counted = [r for r in ranks if r.core_count()[0]]
    if not counted:
        yield _finding("PROF004", Status.SKIP, detail="AI Core count unknown: no info.json in a PROF_* folder "
                       "(analyse the whole *_ascend_pt or PROF_* folder, not only the CSV)")
        return
    per_op: Dict[str, Dict[str, Any]] = {}
    worst = 0.0
    for rank in counted:
        aic, aiv = rank.core_count()
        aiv = aiv or aic  # no separate vector cores (Atlas 910A): vector work runs on the AI Cores
        groups = rank.groups[rank.groups["long"].astype(bool) & (rank.groups["block_dim"] > 0)]
        total = figures.device_time_us(rank.groups) or 1.0
        flagged_time = 0.0
        for row in groups.itertuples(index=False):
            core = str(row.core)
            cores = aic if core in CUBE_CORES else aiv if core in VECTOR_CORES else None
            if cores is None:
                continue
            bad = row.block_dim % cores != 0
            if core == "MIX_AIC" and row.mix_block_dim > 0 and aiv:
                bad = bad or row.mix_block_dim % aiv != 0
            if not bad:
                continue
            flagged_time += row.dur_sum
            entry = per_op.setdefault(str(row.op_type), {"count": 0, "total_us": 0.0, "block_dims": set(),
                                                         "cores": cores, "ranks": []})
            entry["count"] += int(row.n)
            entry["total_us"] += float(row.dur_sum)
            entry["block_dims"].add(int(row.block_dim))
            entry["ranks"].append(rank.label)
        worst = max(worst, flagged_time / total)
    ordered = sorted(per_op.items(), key=lambda item: -item[1]["total_us"])[:ctx.top_n]
    evidence = {"ai_core_num": counted[0].core_count()[0], "aiv_num": counted[0].core_count()[1],
                "max_share": round(worst, 4),
                "operators": [{"op_type": op, "count": e["count"], "total_us": round(e["total_us"], 3),
                               "block_dims": sorted(e["block_dims"])[:10], "core_count": e["cores"],
                               "ranks": list(dict.fromkeys(e["ranks"]))} for op, e in ordered]}
    status = status_for(worst, float(ctx.setting("prof.block_dim_warn_share")), None) if ordered else Status.PASS
    if ordered:
        listing = ", ".join(f"{op} (block dim {'/'.join(map(str, sorted(e['block_dims'])[:3]))} on "
                            f"{e['cores']} cores)" for op, e in ordered[:3])
        detail = f"tasks leaving cores idle take up to {_pct(worst)} of device time: {listing}"
    else:
        detail = "every task's block dim is a multiple of the core count"
    yield _finding("PROF004", status, detail=detail, evidence=evidence,
                   fix="Pick block counts (or split-axis sizes) that are multiples of the core count.")


@prof_check("PROF005", "Sample-based AI Core utilization", settings=("prof.bound_ratio",))
def sample_utilization(ctx: ProfContext) -> Iterable[Finding]:
    """Per-core pipe ratios of a sample-based collection (``ai_core_utilization_*.csv``).

    With ``msprof --aic-mode=sample-based`` the PMU is sampled per core over the whole run instead of per
    task: one row per core (Core0..CoreN) and an Average row, one column per metric of the ``--aic-metrics``
    set. The check WARNs when on average no pipe (mac, vec, scalar, mte1/2/3) is above ``prof.bound_ratio``
    (the cores are mostly waiting), and names the cores far below the busiest (uneven work). SKIP without
    such a file or without pipe ratio columns (another ``--aic-metrics`` set).

    Fix: see PROF002 (no-bound tasks) and PROF004 (block dim) for which operators leave cores idle.
    """
    rows = [(rank.label, row) for rank in ctx.ranks for row in rank.utilization.get("rows", []) if row["ratios"]]
    if not rows:
        others = sorted({c for r in ctx.ranks for c in r.utilization.get("other_columns", [])})[:6]
        read = any(r.utilization for r in ctx.ranks)
        yield _finding("PROF005", Status.SKIP, detail=(
            "the sample-based summary has no pipe ratio columns (collected with another --aic-metrics set"
            + (f": {', '.join(others)}" if others else "") + ")") if read else
            "no ai_core_utilization_*.csv (only written by msprof --aic-mode=sample-based)")
        return
    bar = float(ctx.setting("prof.bound_ratio"))
    averages = [(label, row) for label, row in rows if row["core"].lower() == "average"]
    cores = [(label, row) for label, row in rows if row["core"].lower() != "average"]
    busiest = {f"{label} {row['kind']} {row['core']}": max(row["ratios"].values()) for label, row in cores}
    top = max(busiest.values()) if busiest else 0.0
    idle = sorted(name for name, value in busiest.items() if top > 0 and value < top / 2)
    evidence = {"bound_ratio": bar, "average": {f"{label} {row['kind']}": row["ratios"] for label, row in averages},
                "cores_below_half_of_busiest": idle[:32]}
    unbound = [(label, row) for label, row in averages if max(row["ratios"].values()) <= bar]
    if unbound:
        label, row = unbound[0]
        pipe, value = max(row["ratios"].items(), key=lambda item: item[1])
        detail = (f"{label} {row['kind']}: on average no pipe above {bar:g} (highest {pipe} {value:.2f}): "
                  "the cores mostly wait")
        status = Status.WARN
    else:
        detail = f"on average a pipe is above {bar:g} on {len(averages)} core group(s)"
        status = Status.PASS
    if idle:
        detail += f"; {len(idle)} core(s) below half the busiest core's ratio"
        status = Status.WARN
    yield _finding("PROF005", status, detail=detail, evidence=evidence,
                   fix="See PROF002 and PROF004 for the operators that leave cores idle.")


@prof_check("PROF006", "Device idle (Free) per step", settings=("prof.free_warn_share", "prof.free_fail_share"))
def device_idle(ctx: ProfContext) -> Iterable[Finding]:
    """Share of each step in which the device ran nothing ("Free" in step_trace_time).

    ``step_trace_time.csv`` splits each step into Computing, not-overlapped Communication and Free time. A
    large Free share means the NPU waits for the host: the input pipeline (DataLoader), Python-side work,
    host-device synchronisation (``.item()``, ``.cpu()``, printing losses every step) or operator dispatch.
    WARN when a rank's mean Free share is above ``prof.free_warn_share`` (10%), FAIL above
    ``prof.free_fail_share`` (30%). SKIP without step_trace_time.

    Fix: more DataLoader workers and ``pin_memory=True``, prefetching, no per-step host synchronisation; look
    at the host-side gaps in trace_view.json (MindStudio Insight) and at api_statistic.csv.
    """
    rows = []
    for rank in ctx.ranks:
        shares = figures.step_shares(rank.step_trace)
        if shares:
            mean = sum(s["free_share"] for s in shares) / len(shares)
            rows.append((rank.label, mean, max(shares, key=lambda s: s["free_share"]), len(shares)))
    if not rows:
        has_table = any(r.step_trace is not None for r in ctx.ranks)
        yield _finding("PROF006", Status.SKIP, detail="step_trace_time has no Computing/Free columns" if has_table
                       else "no step_trace_time.csv read (torch_npu profiler output has it)")
        return
    warn, fail = float(ctx.setting("prof.free_warn_share")), float(ctx.setting("prof.free_fail_share"))
    flagged = [(label, mean, worst, n) for label, mean, worst, n in rows if mean >= warn]
    worst_mean = max(mean for _, mean, _, _ in rows)
    apis = {rank.label: rank.host_apis for rank in ctx.ranks if rank.host_apis}
    evidence = {"ranks": {label: {"mean_free_share": round(mean, 4), "steps": n, "worst_step": worst,
                                  "top_host_apis": apis.get(label, [])}
                          for label, mean, worst, n in rows}, "warn_share": warn, "fail_share": fail}
    if flagged:
        listing = ", ".join(f"{label} {_pct(mean)}" for label, mean, _, _ in sorted(flagged, key=lambda r: -r[1])[:4])
        detail = f"the device is idle for {listing} of the step (bar {_pct(warn)})"
        slowest = next((apis[label][0] for label, _, _, _ in flagged if apis.get(label)), None)
        if slowest:
            detail += f"; slowest host API {slowest['api']} {_ms(slowest['total_us'])} (api_statistic)"
    else:
        detail = f"device idle at most {_pct(worst_mean)} of the step in {len(rows)} rank(s)"
    yield _finding("PROF006", status_for(worst_mean, warn, fail), detail=detail, evidence=evidence,
                   fix="The NPU waits for the host: raise DataLoader num_workers, pin_memory=True, prefetch; avoid "
                       "per-step .item()/.cpu()/print syncs; look at the host gaps in trace_view.json.")


@prof_check("PROF007", "Top operators per core type", settings=("prof.top_n",))
def top_operators(ctx: ProfContext) -> Iterable[Finding]:
    """The operator types taking the most device time, per accelerator core type.

    Summed over all ranks, for each core type in the kernel table (AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC,
    MIX_AIV, HCCL, ...): the ``prof.top_n`` operator types by total time, with task count and max time. This is
    where optimisation pays; it is information (PASS), the other PROF checks judge.

    Fix: none needed; start optimising with the operators listed first.
    """
    skip = _no_kernels(ctx, "PROF007")
    if skip is not None:
        yield skip
        return
    import pandas as pd

    groups = pd.concat([r.groups for r in ctx.with_kernels()], ignore_index=True)
    total = figures.device_time_us(groups) or 1.0
    core_times = groups.groupby("core")["dur_sum"].sum()
    for core, ops in figures.top_ops(groups, ctx.top_n).items():
        core_time = float(core_times[core])
        listing = ", ".join(f"{o['op_type']} {_ms(o['total_us'])}" for o in ops[:3])
        yield _finding("PROF007", Status.PASS, core, f"{_pct(core_time / total)} of device time; top: {listing}",
                       {"core_type": core, "total_us": round(core_time, 3), "operators": ops})


@prof_check("PROF008", "Dynamic-shape operators", settings=("prof.dynamic_warn_share",))
def dynamic_shape(ctx: ProfContext) -> Iterable[Finding]:
    """Share of compute time in dynamic-shape operators (``OP State`` column).

    A dynamic-shape operator is compiled (or its tiling computed) at run time; with many of them, launch
    overhead and AI CPU tiling grow. The check reads ``OP State`` (op_summary / kernel_details since CANN
    8.0.RC1, ``opState`` in a .db) and WARNs when dynamic tasks take ``prof.dynamic_warn_share`` of the
    compute time (device time without the collectives, which have no OP State). Without the column, or with
    one that holds only N/A, the answer is "unknown" (SKIP), never "all dynamic".

    Fix: ``torch_npu.npu.set_compile_mode(jit_compile=False)`` with binary kernels, and
    ``torch_npu.npu.config.allow_internal_format = False``; pad to a few fixed shapes (bucketing).
    """
    ranks, skip = _ranks_having(ctx, "PROF008", "op_state", "unknown: the kernel table has no OP State column "
                                "(CANN before 8.0.RC1); not judged")
    if skip is not None:
        yield skip
        return
    per_rank = {}
    worst = 0.0
    for rank in ranks:
        compute = rank.groups[~rank.groups["core"].isin(COMMUNICATION_CORES)]  # a share of compute time
        total = figures.device_time_us(compute) or 1.0
        dynamic = float(compute[compute["op_state"].astype(str).str.lower() == "dynamic"]["dur_sum"].sum())
        per_rank[rank.label] = round(dynamic / total, 4)
        worst = max(worst, dynamic / total)
    warn = float(ctx.setting("prof.dynamic_warn_share"))
    yield _finding("PROF008", status_for(worst, warn, None),
                   detail=f"dynamic-shape operators take up to {_pct(worst)} of compute time (bar {_pct(warn)})",
                   evidence={"dynamic_share": per_rank, "warn_share": warn},
                   fix="torch_npu.npu.set_compile_mode(jit_compile=False); "
                       "torch_npu.npu.config.allow_internal_format = False; bucket inputs to a few fixed shapes.")


# --- communication and memory --------------------------------------------------------------------------------

@prof_check("PROF009", "Communication share of the step", settings=("prof.communication_warn_share",))
def communication_share(ctx: ProfContext) -> Iterable[Finding]:
    """Share of each step spent in communication the computation does not hide.

    ``step_trace_time.csv``'s ``Communication(Not Overlapped)`` is collective time nothing else ran in. WARN
    when a rank's mean share is above ``prof.communication_warn_share`` (30%). Ranks with much less
    communication than the others are usually the slow ones (the others wait for them in the collective).
    SKIP without step_trace_time.

    Fix: overlap communication with computation (bucketed gradient all-reduce, larger buckets), fewer and
    larger collectives, check the slow links (PROF010) and the slowest rank.
    """
    rows = []
    for rank in ctx.ranks:
        shares = figures.step_shares(rank.step_trace)
        if shares and rank.step_trace is not None and "comm_not_overlapped_us" in rank.step_trace.columns:
            rows.append((rank.label, sum(s["comm_share"] for s in shares) / len(shares)))
    if not rows:
        yield _finding("PROF009", Status.SKIP, detail="no step_trace_time with Communication(Not Overlapped) read")
        return
    warn = float(ctx.setting("prof.communication_warn_share"))
    worst = max(share for _, share in rows)
    evidence = {"ranks": {label: round(share, 4) for label, share in rows}, "warn_share": warn}
    flagged = sorted([r for r in rows if r[1] >= warn], key=lambda r: -r[1])
    if flagged:
        detail = ("not-overlapped communication takes " + ", ".join(f"{label} {_pct(s)}" for label, s in flagged[:4])
                  + f" of the step (bar {_pct(warn)})")
    else:
        detail = f"not-overlapped communication at most {_pct(worst)} of the step in {len(rows)} rank(s)"
    if len(rows) > 1:
        least = min(rows, key=lambda r: r[1])
        detail += f"; least: {least[0]} {_pct(least[1])} (the others may be waiting for it)"
    yield _finding("PROF009", status_for(worst, warn, None), detail=detail, evidence=evidence,
                   fix="Overlap communication with computation (gradient bucketing), fewer larger collectives; "
                       "see PROF010 for slow links and look at the rank with the least communication.")


@prof_check("PROF010", "Slowest communication links",
            settings=("prof.link_min_size_mb", "prof.top_n",
                     *(f"prof.link_min_bandwidth_gbps.{t}" for t in TRANSPORTS)))
def slow_links(ctx: ProfContext) -> Iterable[Finding]:
    """Collective transfers with the lowest bandwidth, per transport (communication.json).

    ``communication.json`` (torch_npu, per step and collective) and msprof-analyze's
    ``cluster_communication.json`` give each operator's transit size, time and bandwidth per transport (HCCS,
    PCIE, RDMA, SDMA). Transfers smaller than ``prof.link_min_size_mb`` are latency bound and not judged.
    WARN when a transport's bandwidth is below ``prof.link_min_bandwidth_gbps.<TRANSPORT>`` (SDMA: 14.4 GB/s,
    msprof-analyze's 18 GB/s baseline x 0.8); otherwise the slowest links are reported as information.

    Fix: check the HCCS/RoCE links of the listed ranks (``hccn_tool -i N -link -g``, ``npudoctor check``
    HCCL checks), the network configuration, and contention from other jobs.
    """
    records = [(rank.label, link) for rank in ctx.ranks for link in rank.links]
    if not records:
        yield _finding("PROF010", Status.SKIP, detail="no communication.json read")
        return
    min_size = float(ctx.setting("prof.link_min_size_mb"))
    limits = ctx.limits("prof.link_min_bandwidth_gbps", TRANSPORTS)
    judged = [(label, link) for label, link in records
              if link["size_mb"] >= min_size and link["bandwidth_gbps"] > 0 and "Total Op Info" not in link["path"]]
    slow = sorted(judged, key=lambda item: item[1]["bandwidth_gbps"])
    below = [(label, link) for label, link in slow
             if link["transport"].upper() in limits and link["bandwidth_gbps"] < limits[link["transport"].upper()]]

    def describe(item: Tuple[str, Dict[str, Any]]) -> Dict[str, Any]:
        label, link = item
        return {"rank": label, "where": "/".join(link["path"]), "transport": link["transport"],
                "size_mb": round(link["size_mb"], 3), "bandwidth_gbps": link["bandwidth_gbps"]}

    evidence = {"min_size_mb": min_size, "limits_gbps": limits, "transfers_judged": len(judged),
                "slowest": [describe(item) for item in slow[:ctx.top_n]],
                "below_limit": [describe(item) for item in below[:ctx.top_n]]}
    if below:
        first = below[0][1]
        detail = (f"{len(below)} transfer(s) below the bandwidth bar, slowest {first['transport']} "
                  f"{first['bandwidth_gbps']:.1f} GB/s ({first['size_mb']:.1f} MB) on {below[0][0]}")
        status = Status.WARN
    elif judged:
        first = slow[0][1]
        detail = (f"{len(judged)} transfer(s) of >= {min_size:g} MB, slowest {first['transport']} "
                  f"{first['bandwidth_gbps']:.1f} GB/s on {slow[0][0]}")
        status = Status.PASS
    else:
        yield _finding("PROF010", Status.SKIP, detail=f"no transfer of >= {min_size:g} MB in communication.json "
                       f"({len(records)} small or empty transfer records): bandwidth not judged", evidence=evidence)
        return
    yield _finding("PROF010", status, detail=detail, evidence=evidence,
                   fix="Check the listed ranks' links (hccn_tool -i N -link -g, npudoctor check), the network "
                       "configuration and contention from other jobs.")


@prof_check("PROF011", "Peak memory reserved vs allocated", settings=("prof.memory_unused_warn_share",))
def memory_peak(ctx: ProfContext) -> Iterable[Finding]:
    """Peak device memory the framework reserved against what tensors actually used.

    ``memory_record.csv`` (``profile_memory=True``) records the allocator's Total Allocated and Total
    Reserved over time, per component (PTA = torch_npu's caching allocator, GE, APP = the whole process). A
    reserved peak far above the allocated peak is cache fragmentation: memory the process holds but no
    tensor uses, which leads to out-of-memory errors with free memory on paper. WARN when the unused share of
    the PTA (else whole-process) reserved peak is above ``prof.memory_unused_warn_share`` (30%).
    ``operator_memory.csv``'s largest allocations are given as evidence. SKIP without memory_record.

    Fix: ``PYTORCH_NPU_ALLOC_CONF=expandable_segments:True``; avoid tensors of ever-changing sizes; call
    ``torch.npu.empty_cache()`` only between phases, not every step.
    """
    rows = []
    for rank in ctx.ranks:
        peaks = rank.memory.get("peaks") or {}
        component = next((c for c in ("PTA", "PTA+GE", "APP", "") if c in peaks and
                          peaks[c].get("allocated_mb") and peaks[c].get("reserved_mb")), None)
        if component is None:
            continue
        peak = peaks[component]
        unused = max(0.0, peak["reserved_mb"] - peak["allocated_mb"]) / peak["reserved_mb"]
        rows.append((rank.label, component, peak, unused, rank.memory.get("largest_allocations", [])))
    if not rows:
        yield _finding("PROF011", Status.SKIP, detail="no memory_record.csv with Total Allocated and Total Reserved "
                       "read (profile with profile_memory=True)")
        return
    warn = float(ctx.setting("prof.memory_unused_warn_share"))
    worst = max(rows, key=lambda r: r[3])
    evidence = {"ranks": {label: {"component": comp, "peak_allocated_mb": round(p["allocated_mb"], 3),
                                  "peak_reserved_mb": round(p["reserved_mb"], 3), "unused_share": round(u, 4),
                                  "largest_allocations": largest}
                          for label, comp, p, u, largest in rows}, "warn_share": warn}
    label, component, peak, unused, _ = worst
    detail = (f"{label} {component}: peak reserved {peak['reserved_mb']:.0f} MB, peak allocated "
              f"{peak['allocated_mb']:.0f} MB ({_pct(unused)} reserved but unused; bar {_pct(warn)})")
    yield _finding("PROF011", status_for(unused, warn, None), label, detail, evidence,
                   fix="PYTORCH_NPU_ALLOC_CONF=expandable_segments:True; keep tensor sizes stable; "
                       "empty_cache() only between phases.")


# The host-side and cluster families register into the same registry (imported last: they use this module).
from npudoctor.prof import host_checks, schedule_checks  # noqa: E402,F401
