"""PROF checks of compute efficiency per operator: cube (matrix), flash-attention and vector operators judged
by their PMU pipe ratios and shapes (PROF022-PROF024), and repeated operator sequences that leave the device
idle or only move data (PROF025).

The families of msprof-analyze's advisor (``ai_core_performance``, ``fusible_ops``), read in its 26.2.0
source for what each measures and its bars, decided here in our own terms: ratios are weighted by task time
(the advisor averages tasks), an operator shape is judged when it costs time (the advisor judges every shape
of an operator type, a 1.4 us task included), occurrences of a sequence do not overlap (the advisor counts
overlapping windows, so its totals can exceed the whole profile). They register into the one PROF registry
(:mod:`npudoctor.prof.checks`), whose docstrings are ``npudoctor explain PROF0NN``.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from npudoctor.model.finding import Finding, Status
from npudoctor.prof.checks import (
    COMMUNICATION_CORES,
    ProfContext,
    _finding,
    _ms,
    _no_kernels,
    _pct,
    _ranks_text,
    prof_check,
)
from npudoctor.prof.model import Rank

MAX_SHAPE_TEXT = 4096   # a shapes cell longer than this is not parsed (no operator has such a signature)
MAX_TENSORS = 64
MAX_SHOWN = 512         # longest name or shapes text a finding carries (a cell may hold up to 1 MiB)


@functools.lru_cache(maxsize=1)
def families() -> Dict[str, Any]:
    """``checks/prof_op_families.yaml``: which operator types are cube, flash-attention and vector work."""
    from npudoctor.knowledge import load

    data = load("prof_op_families")
    return data if isinstance(data, dict) else {}


def parse_shapes(text: str) -> List[Optional[List[int]]]:
    """A kernel table's shapes cell (``"81920,4096;8192,512"``, quotes and empty tensors included) as one
    list of dimensions per tensor; a tensor that is empty or not integers is None."""
    text = str(text or "").strip().strip('"').strip()
    if not text or len(text) > MAX_SHAPE_TEXT:
        return []
    tensors: List[Optional[List[int]]] = []
    for part in text.split(";")[:MAX_TENSORS]:
        part = part.strip()
        try:
            tensors.append([int(d) for d in part.split(",")] if part else None)
        except ValueError:
            tensors.append(None)
    return tensors


class OpShape(NamedTuple):
    """One operator at one shape, summed over the ranks that ran it."""

    op_type: str
    op_name: str
    core: str
    input_shapes: str
    output_shapes: str
    input_dtypes: str
    tasks: int
    total_us: float
    share: float                      # the largest share of a rank's compute time
    ratios: Dict[str, Optional[float]]  # time-weighted mean of each pipe ratio (None: not recorded)
    ranks: Tuple[str, ...]


def _rank_shapes(rank: Rank) -> Any:
    shapes = rank.kernel.shapes if rank.kernel is not None else None
    if shapes is None or not len(shapes):
        return None
    if rank.device:
        shapes = shapes[shapes["device"].astype(str) == rank.device]
    return shapes


def operator_shapes(ctx: ProfContext, select: Any) -> Tuple[List[OpShape], int, Optional[Finding], str]:
    """The operator shapes ``select(op_type, op_name, core)`` picks, merged over ranks, with their share of
    compute time; (shapes, how many were too small to judge, a SKIP finding or None, the check's ID)."""
    from npudoctor.prof.opstats import RATIOS

    check_id = select.check_id
    skip = _no_kernels(ctx, check_id)
    if skip is not None:
        return [], 0, skip, check_id
    ranks = [(rank, _rank_shapes(rank)) for rank in ctx.with_kernels()]
    ranks = [(rank, shapes) for rank, shapes in ranks if shapes is not None]
    if not ranks:
        return [], 0, _finding(check_id, Status.SKIP, detail="the kernel table has no Input Shapes column (or is "
                               "a .db export, task_time or trace): operator shapes unknown, not judged"), check_id
    min_share = float(ctx.setting("prof.op_min_share"))
    merged: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    seen = small = 0
    for rank, shapes in ranks:
        compute = float(shapes[~shapes["core"].isin(COMMUNICATION_CORES)]["dur_sum"].sum()) or 1.0
        for row in shapes.itertuples(index=False):
            if not select(str(row.op_type), str(row.op_name), str(row.core)):
                continue
            seen += 1
            key = tuple(str(getattr(row, k)) for k in ("op_type", "op_name", "core", "input_shapes",
                                                       "output_shapes", "input_dtypes"))
            entry = merged.setdefault(key, {"count": 0, "total_us": 0.0, "share": 0.0, "ranks": [],
                                            **{f"{r}_{s}": 0.0 for r in RATIOS for s in ("w", "d")}})
            entry["count"] += int(row.n)
            entry["total_us"] += float(row.dur_sum)
            entry["share"] = max(entry["share"], float(row.dur_sum) / compute)
            entry["ranks"].append(rank.label)
            for ratio in RATIOS:
                entry[f"{ratio}_w"] += float(getattr(row, f"{ratio}_w"))
                entry[f"{ratio}_d"] += float(getattr(row, f"{ratio}_d"))
    if not seen:
        return [], 0, _finding(check_id, Status.SKIP, detail=f"no {select.what} in the kernel table"), check_id
    out = []
    for key, entry in merged.items():
        if entry["share"] < min_share:
            small += 1
            continue
        ratios = {r: (entry[f"{r}_w"] / entry[f"{r}_d"] if entry[f"{r}_d"] > 0 else None) for r in RATIOS}
        op_type, op_name, core, input_shapes, output_shapes, input_dtypes = key
        out.append(OpShape(op_type, op_name, core, input_shapes, output_shapes, input_dtypes,
                           tasks=entry["count"], total_us=entry["total_us"], share=entry["share"], ratios=ratios,
                           ranks=tuple(dict.fromkeys(entry["ranks"]))))
    out.sort(key=lambda shape: -shape.total_us)
    return out, small, None, check_id


class Selector:
    """Which operators a check judges (a callable with the check's ID and what it calls them)."""

    def __init__(self, check_id: str, what: str, test: Any) -> None:
        self.check_id, self.what, self._test = check_id, what, test

    def __call__(self, op_type: str, op_name: str, core: str) -> bool:
        return bool(self._test(op_type, op_name, core))


def is_cube(op_type: str, op_name: str, core: str) -> bool:
    cube = families().get("cube", {})
    return core in cube.get("cores", ()) and any(part.lower() in op_type.lower()
                                                 for part in cube.get("type_contains", ()))


def flash_attention_kind(op_type: str) -> Optional[str]:
    fa = families().get("flash_attention", {})
    if op_type in fa.get("forward", ()):
        return "forward"
    if op_type in fa.get("backward", ()):
        return "backward"
    return None


def is_vector(op_type: str, op_name: str, core: str) -> bool:
    return (core in families().get("vector", {}).get("cores", ()) and flash_attention_kind(op_type) is None
            and not is_cube(op_type, op_name, core))


def _ratio_text(shape: OpShape, pipes: Sequence[Tuple[str, str, float]]) -> str:
    return ", ".join(f"{label} {shape.ratios[ratio]:.2f} (bar {bar:g})" for label, ratio, bar in pipes
                     if shape.ratios.get(ratio) is not None)


def pipe_verdict(shape: OpShape, pipes: Sequence[Tuple[str, str, float]]) -> Optional[str]:
    """"<pipe>-bound" for the pipes at or above their bar, "below the bars" when none is, None when the
    table has no ratio of these pipes for it."""
    values = [(label, shape.ratios.get(ratio), bar) for label, ratio, bar in pipes]
    if any(value is None for _, value, _ in values):
        return None
    bound = [label for label, value, bar in values if value is not None and value >= bar]
    return " and ".join(bound) + "-bound" if bound else "below the bars"


def _judge_pipes(shape: OpShape, pipes: Sequence[Tuple[str, str, float]]) -> Tuple[Optional[str], List[str]]:
    """:func:`pipe_verdict` and the problem it names when no pipe is at its bar."""
    verdict = pipe_verdict(shape, pipes)
    return verdict, ([f"{_ratio_text(shape, pipes)}: no pipe at its bar"] if verdict == "below the bars" else [])


def _short(text: str, limit: int = MAX_SHOWN) -> str:
    text = text.strip('"')
    return text if len(text) <= limit else text[:limit] + "..."


def _entry(shape: OpShape, **extra: Any) -> Dict[str, Any]:
    return {"op_type": _short(shape.op_type), "op_name": _short(shape.op_name), "core": shape.core,
            "input_shapes": _short(shape.input_shapes), "output_shapes": _short(shape.output_shapes),
            "input_dtypes": shape.input_dtypes, "count": shape.tasks, "total_us": round(shape.total_us, 3),
            "share": round(shape.share, 4), "ranks": list(shape.ranks),
            "ratios": {k: round(v, 4) for k, v in shape.ratios.items() if v is not None}, **extra}


def _report(check_id: str, judged: List[Dict[str, Any]], small: int, what: str,
            ctx: ProfContext, fix: str, evidence: Dict[str, Any]) -> Iterable[Finding]:
    flagged = [entry for entry in judged if entry["problems"]]
    evidence = {**evidence, "min_share": float(ctx.setting("prof.op_min_share")), "not_judged_small": small,
                "operators": judged[:ctx.top_n]}
    if not judged:
        yield _finding(check_id, Status.PASS, detail=f"no {what} shape takes {_pct(evidence['min_share'])} of "
                       f"compute time ({small} smaller shape(s) not judged)", evidence=evidence)
        return
    if flagged:
        listing = "; ".join(f"{e['op_type']} {e['input_shapes'][:40]} ({_ms(e['total_us'])}): "
                            f"{', '.join(e['problems'])}" for e in flagged[:3])
        detail = f"{len(flagged)} of {len(judged)} {what} shape(s) judged leave room: {listing}"
        yield _finding(check_id, Status.WARN, detail=detail, evidence={**evidence, "flagged": flagged[:ctx.top_n]},
                       fix=fix)
        return
    states = sorted({e["pipes"] for e in judged if e.get("pipes")})
    unrecorded = sum(1 for e in judged if not e.get("pipes"))
    yield _finding(check_id, Status.PASS, detail=f"{len(judged)} {what} shape(s) judged, none below its bars"
                   + (f" ({', '.join(states)})" if states else "") + (
                       f"; pipe ratios not recorded for {unrecorded} (shapes judged only: collect with "
                       "--aic-metrics=PipeUtilization)" if unrecorded else "") + (
                       f"; {small} smaller not judged" if small else ""), evidence=evidence)


# --- cube --------------------------------------------------------------------------------------------------

FRACTAL_TAILS = ((16, 16), (16, 32))  # the last two dims of a FRACTAL_NZ tensor (16x16 fp16/bf16, 16x32 int8)


def cube_inner_axes(shape: OpShape) -> Optional[Tuple[int, int]]:
    """The inner axes of a matrix operator's two inputs: the last axis of each (ND), or for FRACTAL_NZ
    inputs (four dimensions ending in a 16x16 or 16x32 fractal) the product of the middle two (msprof-analyze's
    reading, which it applies to any pair of 4-D inputs); None when the shapes do not say."""
    tensors = [t for t in parse_shapes(shape.input_shapes) if t is not None][:2]
    if len(tensors) < 2 or any(len(t) < 2 for t in tensors):
        return None
    first, second = tensors
    if all(len(t) == 4 and tuple(t[2:]) in FRACTAL_TAILS for t in tensors):
        return first[1] * first[2], second[1] * second[2]
    return first[-1], second[-1]


@prof_check("PROF022", "Cube operator efficiency",
            settings=("prof.op_min_share", "prof.cube_mac_ratio", "prof.cube_mte2_ratio", "prof.cube_inner_axis",
                      "prof.top_n"))
def cube_efficiency(ctx: ProfContext) -> Iterable[Finding]:
    """Matrix (cube) operators whose shapes tile badly or whose cube unit waits, per operator shape.

    Every operator whose type names a matmul (``checks/prof_op_families.yaml``), on AI_CORE or MIX_AIC, is
    grouped by operator name and input/output shapes; a shape taking at least ``prof.op_min_share`` (1%) of
    a rank's compute time is judged. From PipeUtilization PMU columns, weighted by task time: ``aic_mac_ratio``
    at or above ``prof.cube_mac_ratio`` (0.8) is mac-bound (the cube computes most of the time: efficient);
    ``aic_mte2_ratio`` at or above ``prof.cube_mte2_ratio`` (0.95) is mte2-bound (it waits for data from
    memory); below both bars the operator leaves room (WARN). From the shapes: the inner axes of both
    inputs (the last axis, or the middle two of an NZ fractal) must be multiples of ``prof.cube_inner_axis``
    (256), else the cube tiles badly (WARN). The bars are msprof-analyze's (``aicore_performance.yaml``),
    but each is compared with its own ratio (the advisor compares the mac ratio with the mte2 bar, so a
    mac-bound matmul with a quiet mte2 pipe is "room for optimisation" there). SKIP without Input Shapes.

    Fix: pad or reshape matrices so both inner axes are multiples of 256 elements; for a matmul below both
    bars look at its tiling (PROF004 block dim), tiny M/N/K, transposes around it, fp32 inputs (use bf16 or
    fp16); an mte2-bound matmul needs less data per FLOP (larger tiles, fused producers).
    """
    shapes, small, skip, check_id = operator_shapes(ctx, Selector("PROF022", "cube (matmul) operator", is_cube))
    if skip is not None:
        yield skip
        return
    mac_bar = float(ctx.setting("prof.cube_mac_ratio"))
    mte2_bar = float(ctx.setting("prof.cube_mte2_ratio"))
    axis = int(ctx.setting("prof.cube_inner_axis"))
    pipes = (("mac", "aic_mac_ratio", mac_bar), ("mte2", "aic_mte2_ratio", mte2_bar))
    judged = []
    for shape in shapes:
        verdict, problems = _judge_pipes(shape, pipes)
        axes = cube_inner_axes(shape)
        if axes is not None and any(a % axis for a in axes):
            problems.append(f"inner axes {axes[0]} and {axes[1]} not both multiples of {axis}")
        judged.append(_entry(shape, pipes=verdict, inner_axes=list(axes) if axes else None, problems=problems))
    yield from _report(check_id, judged, small, "cube", ctx,
                       "Make both inner axes multiples of 256 elements (pad or reshape); for a matmul below the "
                       "bars check its tiling (block dim), tiny M/N/K, transposes around it and fp32 inputs.",
                       {"mac_bar": mac_bar, "mte2_bar": mte2_bar, "inner_axis": axis})


# --- flash attention ---------------------------------------------------------------------------------------

def attention_dims(shape: OpShape, kind: str) -> Tuple[Optional[int], Optional[int]]:
    """(head dim D, sequence length S) of a flash-attention task from its shapes, None where they do not
    say. softmax_max / softmax_sum have the shape (B, N, S, 8): an output of the forward operator, an input
    of the backward one. The query is (B, N, S, D) or (B, S, N, D): D is its last axis; (B, S, H) or
    (S, B, H): D = H / N; TND (varlen): D is the last axis, S varies per sequence."""
    inputs = parse_shapes(shape.input_shapes)
    query = inputs[0] if inputs else None
    if not query:
        return None, None
    varlen = str(families().get("flash_attention", {}).get("varlen_name_contains", "varlen")).lower()
    if varlen and varlen in shape.op_name.lower():
        return (query[-1] if len(query) == 3 else None), None
    pool = parse_shapes(shape.output_shapes) if kind == "forward" else inputs[1:]
    softmax = next((t for t in pool if t is not None and len(t) == 4 and t[-1] == 8), None)
    heads, sequence = (softmax[1], softmax[2]) if softmax else (None, None)
    if len(query) == 4:
        return query[-1], sequence
    if len(query) == 3 and heads and query[-1] % heads == 0:
        return query[-1] // heads, sequence
    return None, sequence


@prof_check("PROF023", "Flash-attention operator efficiency",
            settings=("prof.op_min_share", "prof.fa_mte2_ratio", "prof.fa_vec_ratio", "prof.fa_fixpipe_ratio",
                      "prof.fa_axis", "prof.top_n"))
def flash_attention_efficiency(ctx: ProfContext) -> Iterable[Finding]:
    """Flash-attention operators whose head dim or sequence length tiles badly, or whose pipes wait.

    FlashAttentionScore (forward) and FlashAttentionScoreGrad (backward) tasks are grouped by operator name
    and shapes; a shape taking at least ``prof.op_min_share`` of a rank's compute time is judged. Forward:
    ``aic_mte2_ratio`` at or above ``prof.fa_mte2_ratio`` (0.8) is mte2-bound, ``aiv_vec_ratio`` at or
    above ``prof.fa_vec_ratio`` (0.75) vec-bound; backward: mte2 against the same bar, ``aic_fixpipe_ratio``
    against ``prof.fa_fixpipe_ratio`` (0.75). Below both bars the operator leaves room (WARN). The head dim D
    and the sequence length S must be multiples of ``prof.fa_axis`` (128), else WARN. D and S are read from
    the query's and softmax_max's shapes for every layout (BSH, SBH, BSND, BNSD; TND for varlen names: D
    only). Bars from msprof-analyze's ``aicore_performance.yaml``; where the advisor calls the mte2-bound
    forward operator "mac" bound, takes the gradients' shapes for S, and skips S of fewer than three digits
    (an S of 64 passes there), this check reads them as above. SKIP without Input Shapes.

    Fix: head dims and sequence lengths that are multiples of 128 (pad the sequence, choose head sizes of
    64x2/128/256); the BNSD/BSND layouts; for an mte2-bound operator fewer bytes per element (bf16) and a
    sparse mode that skips masked blocks (``sparse_mode``, ``pre_tokens``/``next_tokens``).
    """
    shapes, small, skip, check_id = operator_shapes(
        ctx, Selector("PROF023", "flash-attention operator", lambda t, n, c: flash_attention_kind(t) is not None))
    if skip is not None:
        yield skip
        return
    mte2_bar = float(ctx.setting("prof.fa_mte2_ratio"))
    vec_bar = float(ctx.setting("prof.fa_vec_ratio"))
    fixpipe_bar = float(ctx.setting("prof.fa_fixpipe_ratio"))
    axis = int(ctx.setting("prof.fa_axis"))
    judged = []
    for shape in shapes:
        kind = flash_attention_kind(shape.op_type) or "forward"
        pipes = (("mte2", "aic_mte2_ratio", mte2_bar),
                 ("vec", "aiv_vec_ratio", vec_bar) if kind == "forward" else
                 ("fixpipe", "aic_fixpipe_ratio", fixpipe_bar))
        verdict, problems = _judge_pipes(shape, pipes)
        head_dim, sequence = attention_dims(shape, kind)
        if head_dim is not None and head_dim % axis:
            problems.append(f"head dim D {head_dim} not a multiple of {axis}")
        if sequence is not None and sequence % axis:
            problems.append(f"sequence length S {sequence} not a multiple of {axis}")
        judged.append(_entry(shape, kind=kind, pipes=verdict, head_dim=head_dim, sequence_length=sequence,
                             problems=problems))
    yield from _report(check_id, judged, small, "flash-attention", ctx,
                       "Use head dims and sequence lengths that are multiples of 128 (pad the sequence); for a "
                       "memory-bound (mte2) operator, bf16 and a sparse mode that skips masked blocks.",
                       {"mte2_bar": mte2_bar, "vec_bar": vec_bar, "fixpipe_bar": fixpipe_bar, "axis": axis})


# --- vector ------------------------------------------------------------------------------------------------

@prof_check("PROF024", "Vector operator efficiency",
            settings=("prof.op_min_share", "prof.vector_pipe_ratio", "prof.vector_total_ratio", "prof.top_n"))
def vector_efficiency(ctx: ProfContext) -> Iterable[Finding]:
    """Vector operators none of whose pipes (vec, mte2, mte3) is near its ceiling: they wait.

    AI_VECTOR_CORE and MIX_AIV tasks (not flash attention or matmul) are grouped by operator name and
    shapes; a shape taking at least ``prof.op_min_share`` (1%) of a rank's compute time is judged (the
    advisor takes every shape of an operator type that takes 1%, so 1.4 us tasks whose ratios are launch
    noise are listed there). Weighted by task time: vec + mte2 + mte3 at or above
    ``prof.vector_total_ratio`` (0.9) is busy on all three; one of ``aiv_vec_ratio``, ``aiv_mte2_ratio``,
    ``aiv_mte3_ratio`` at or above ``prof.vector_pipe_ratio`` (0.7) is bound by that pipe; otherwise the
    operator waits (scalar work, synchronisation, tiny tiles) and WARNs. Bars from msprof-analyze's
    ``aicore_performance.yaml``. SKIP without Input Shapes; shapes without pipe ratios are not judged.

    Fix: fuse chains of small element-wise operators (torch_npu fused operators such as npu_rms_norm,
    npu_swiglu, npu_rotary_mul, or a graph mode that fuses them), give each launch more data, avoid
    non-contiguous inputs (an extra copy) and int64 where int32 fits.
    """
    shapes, small, skip, check_id = operator_shapes(ctx, Selector("PROF024", "vector operator", is_vector))
    if skip is not None:
        yield skip
        return
    if not any(r.kernel is not None and r.kernel.has("aiv_vec_ratio") for r in ctx.with_kernels()):
        yield _finding(check_id, Status.SKIP, detail="the kernel table has no aiv_vec_ratio / aiv_mte2_ratio / "
                       "aiv_mte3_ratio columns: collect with --aic-metrics=PipeUtilization")
        return
    pipe_bar = float(ctx.setting("prof.vector_pipe_ratio"))
    total_bar = float(ctx.setting("prof.vector_total_ratio"))
    pipes = (("vec", "aiv_vec_ratio", pipe_bar), ("mte2", "aiv_mte2_ratio", pipe_bar),
             ("mte3", "aiv_mte3_ratio", pipe_bar))
    judged = []
    unrecorded = 0
    for shape in shapes:
        values = [shape.ratios.get(ratio) for _, ratio, _ in pipes]
        if any(v is None for v in values):
            unrecorded += 1
            continue
        if sum(v for v in values if v is not None) >= total_bar:
            verdict, problems = "vec+mte2+mte3 busy", []
        else:
            verdict = pipe_verdict(shape, pipes) or ""
            problems = [f"{_ratio_text(shape, pipes)}: no pipe at its bar"] if verdict == "below the bars" else []
        judged.append(_entry(shape, pipes=verdict, problems=problems))
    if unrecorded and not judged:
        yield _finding(check_id, Status.SKIP, detail=f"{unrecorded} vector shape(s) take time but the kernel table "
                       "has no aiv_vec/mte2/mte3 ratios: collect with --aic-metrics=PipeUtilization")
        return
    yield from _report(check_id, judged, small, "vector", ctx,
                       "Fuse chains of small element-wise operators (torch_npu fused operators, graph mode), "
                       "give each launch more data, avoid non-contiguous inputs and needless int64.",
                       {"pipe_bar": pipe_bar, "total_bar": total_bar})


# --- repeated operator sequences ---------------------------------------------------------------------------

def _rank_sequence(rank: Rank) -> Optional[Dict[str, Any]]:
    arrays = rank.kernel.sequence if rank.kernel is not None else None
    if arrays is None or not rank.device:
        return arrays
    wanted = [code for code, name in enumerate(arrays["device_names"]) if name == rank.device]
    mask = arrays["device"] == (wanted[0] if wanted else -1)
    return {**arrays, **{key: arrays[key][mask] for key in ("code", "device", "start", "dur", "moved", "busy",
                                                             "brk")}}


def _sequence_text(names: Sequence[Tuple[str, ...]], codes: Sequence[int]) -> List[str]:
    out = []
    for code in codes:
        name, inputs = (*names[code], "", "")[:2] if code < len(names) else ("?", "")
        shapes = _short(str(inputs), 60)
        out.append(_short(str(name), 200) + (f" [{shapes}]" if shapes else ""))
    return out


@prof_check("PROF025", "Repeated operator sequences to fuse",
            settings=("prof.fusible_min_ops", "prof.fusible_max_ops", "prof.fusible_min_repeats",
                      "prof.fusible_host_busy_share", "prof.fusible_mte_share", "prof.fusible_min_span_share",
                      "prof.top_n"))
def fusible_sequences(ctx: ProfContext) -> Iterable[Finding]:
    """Short operator sequences repeated many times that leave the device idle or only move data.

    In the kernel table's task order (the first 100,000 tasks of each rank), every run of
    ``prof.fusible_min_ops`` to ``prof.fusible_max_ops`` (2-10) consecutive tasks not cut by a communication
    or AI CPU task is a candidate; runs with the same operator names and shapes in the same order are one
    sequence, counted without overlap. A sequence seen ``prof.fusible_min_repeats`` (6) times or more is
    worth fusing when the device is busy less than ``prof.fusible_host_busy_share`` (0.4) of a typical
    occurrence's span (the median one: a set-up gap inside one occurrence does not decide; the host launches
    it operator by operator: dispatch-bound) or when data movement (mte2 + fixpipe/mte3 time)
    is more than ``prof.fusible_mte_share`` (0.8) of its cores' busy time (it mostly copies); a host-bound
    one must also cover ``prof.fusible_min_span_share`` (1%) of the analysed span. WARN with the
    sequences covering the most time. Bars from msprof-analyze's ``fusible_operator.yaml``; unlike the
    advisor, occurrences do not overlap (its "end-to-end duration" sums overlapping windows and can exceed
    the profile), vector tasks' busy time counts (it reads aicore_time only, 0 for vector tasks) and its
    "at least two operators" is taken as written (its code starts at three). SKIP without task start times.

    Fix: find the Python code launching the sequence (collect with ``with_stack=True``) and replace the loop
    or chain by one batched or fused operator (torch_npu fused operators, ``torch.compile`` / graph mode);
    a sequence of copies often comes from slicing or ``.contiguous()`` in a loop.
    """
    from npudoctor.prof import sequences

    skip = _no_kernels(ctx, "PROF025")
    if skip is not None:
        yield skip
        return
    per_rank: List[Tuple[Rank, Dict[str, Any]]] = []
    for rank in ctx.with_kernels():
        arrays = _rank_sequence(rank)
        if arrays is not None and len(arrays["code"]):
            per_rank.append((rank, arrays))
    if not per_rank:
        yield _finding("PROF025", Status.SKIP, detail="the kernel table has no task start times (Start Time(us)): "
                       "the task order is unknown, sequences not judged")
        return
    min_ops, max_ops = int(ctx.setting("prof.fusible_min_ops")), int(ctx.setting("prof.fusible_max_ops"))
    repeats = int(ctx.setting("prof.fusible_min_repeats"))
    host_bar = float(ctx.setting("prof.fusible_host_busy_share"))
    mte_bar = float(ctx.setting("prof.fusible_mte_share"))
    min_span = float(ctx.setting("prof.fusible_min_span_share"))
    merged: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    analysed = not_analysed = 0
    for rank, arrays in per_rank:
        analysed += len(arrays["code"])
        not_analysed += int(arrays.get("not_analysed", 0))
        found, span_total = sequences.find(arrays, min_ops, max(min_ops, max_ops), repeats)
        qualified = []
        for item in found:
            busy_share = item.typical_busy_share  # the median occurrence: one set-up gap does not decide
            moved_share = item.moved_us / item.core_us if arrays.get("has_times") and item.core_us > 0 else None
            host = busy_share < host_bar
            moving = moved_share is not None and moved_share > mte_bar
            covers = item.span_us / span_total if span_total > 0 else 0.0
            if (host and covers >= min_span) or moving:
                qualified.append((item, busy_share, moved_share, host, moving, covers))
        qualified.sort(key=lambda q: -q[0].span_us)
        chosen: List[Tuple[int, ...]] = []
        for item, _busy_share, moved_share, host, moving, covers in qualified:
            block = sequences.period(item.codes)
            if any(sequences.contains(c, block) for c in chosen):
                continue  # part of (or a rotation of) a sequence already reported
            chosen.append(item.codes)
            ops = _sequence_text(arrays["names"], item.codes)
            entry = merged.setdefault(tuple(ops), {"ops": ops, "length": len(ops), "occurrences": 0, "span_us": 0.0,
                                                   "busy_us": 0.0, "max_cover": 0.0, "bounds": set(), "ranks": [],
                                                   "typical_span_us": round(item.typical_span_us, 3),
                                                   "typical_busy_share": round(item.typical_busy_share, 4),
                                                   "first_row": item.first_row,
                                                   "repeats_block": len(ops) // len(block)})
            entry["occurrences"] += item.occurrences
            entry["span_us"] += item.span_us
            entry["busy_us"] += item.busy_us
            entry["max_cover"] = max(entry["max_cover"], covers)
            entry["moved_share"] = None if moved_share is None else round(moved_share, 4)
            entry["bounds"].update((["host (device idle between tasks)"] if host else [])
                                   + (["data movement"] if moving else []))
            entry["ranks"].append(rank.label)
    listed = sorted(merged.values(), key=lambda e: -e["span_us"])[:ctx.top_n]
    for entry in listed:
        entry["bounds"] = sorted(entry["bounds"])
        entry["device_busy_share"] = round(entry["busy_us"] / entry["span_us"], 4) if entry["span_us"] else None
        entry["span_us"], entry["busy_us"] = round(entry["span_us"], 3), round(entry["busy_us"], 3)
        entry["max_cover"] = round(entry["max_cover"], 4)
    evidence = {"analysed_tasks": analysed, "tasks_not_analysed": not_analysed, "min_ops": min_ops,
                "max_ops": max_ops, "min_repeats": repeats, "host_busy_share": host_bar, "mte_share": mte_bar,
                "min_span_share": min_span, "sequences": listed}
    if not listed:
        yield _finding("PROF025", Status.PASS, detail=f"no sequence of {min_ops}-{max_ops} operators repeated "
                       f"{repeats}+ times is host- or copy-bound in {analysed} task(s) of {len(per_rank)} rank(s)",
                       evidence=evidence)
        return
    first = listed[0]
    names = first["ops"] if first["repeats_block"] == 1 else first["ops"][:first["length"] // first["repeats_block"]]
    shown = " -> ".join(n.split(" [")[0] for n in names[:4]) + (" -> ..." if len(names) > 4 else "")
    if first["repeats_block"] > 1:
        shown = f"({shown}) x{first['repeats_block']}"
    detail = (f"{len(listed)} repeated sequence(s); the largest: {shown}, {first['occurrences']} times, "
              f"{_ms(first['span_us'])} ({_pct(first['max_cover'])} of the analysed span); a typical one "
              f"{_ms(first['typical_span_us'])} with the device busy {_pct(first['typical_busy_share'])} of it: "
              f"{', '.join(first['bounds'])}; ranks "
              f"{_ranks_text(first['ranks'])}")
    yield _finding("PROF025", Status.WARN, detail=detail, evidence=evidence,
                   fix="Find the code launching the sequence (profile with with_stack=True) and make it one "
                       "batched or fused operator (torch_npu fused operators, torch.compile / graph mode).")


# --- graph fusion ------------------------------------------------------------------------------------------

@prof_check("PROF026", "Graph fusion passes not applied")
def graph_fusion(ctx: ProfContext) -> Iterable[Finding]:
    """Operator patterns in the built GE graph that a fusion pass could have fused (graph mode only).

    msprof-analyze's graph-fusion advice reads the graph GE built, the last ``ge_proto_*_Build.txt`` of a
    ``DUMP_GE_GRAPH=2`` run copied beside the profile, and matches it against the subgraph patterns of
    fusion passes (``rules/op_fusion_pass.yaml``: FlashAttentionFusionPass for MatMul -> Mul -> Softmax ->
    MatMul, and ~60 more). No such dump, in the protobuf text format GE writes, was available to build and
    test a reader on (the public torch_npu, msprof, msprof-analyze and MindStudio Insight samples carry
    none), so this check does not judge yet: it always SKIPs, saying whether dumps were found (they are
    listed under ``not_used`` in the JSON output). The profile's own view of the same question is PROF024
    (vector chains) and PROF025 (repeated sequences).

    Fix: none to apply from this check. To look yourself, dump the graph with ``DUMP_GE_GRAPH=2`` and
    ``DUMP_GRAPH_PATH``, open ``ge_proto_*_Build.txt`` (or ``ge_onnx_*.pbtxt`` in Netron) and look for
    MatMul -> Mul -> Softmax -> MatMul chains that did not become FlashAttentionScore.
    """
    dumps = sorted({path for rank in ctx.ranks for path in rank.source.graphs})
    if not dumps:
        yield _finding("PROF026", Status.SKIP, detail="no GE graph dump (ge_proto_*_Build.txt, DUMP_GE_GRAPH=2) "
                       "beside the profile: graph fusion not judged")
        return
    yield _finding("PROF026", Status.SKIP, detail=f"{len(dumps)} GE graph dump(s) found, not read: npudoctor has "
                   "no reader of the ge_proto text format yet (no real dump was available to build it on)",
                   evidence={"graph_dumps": dumps[:ctx.top_n]})
