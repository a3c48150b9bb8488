"""PROF checks of the timeline and the collectives: idle device time with a silent host (suspected garbage
collection), torch_npu fused APIs that fit operator sequences, bandwidth lost to matmuls, transfer alignment,
slow links by their gap and pipeline stages out of balance.

msprof-analyze's advisor has these families (read from its 26.2.0 source for what each measures and the numbers
it uses); each is decided here in our own terms. They register into the one PROF registry
(:mod:`npudoctor.prof.checks`); their docstrings are ``npudoctor explain PROF03N``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Tuple

from npudoctor.model.finding import Finding, Status
from npudoctor.prof.checks import ProfContext, _against_bar, _finding, _ms, _pct, _ranks_text, prof_check


@prof_check("PROF030", "Device idle with a silent host (suspected garbage collection)",
            settings=("prof.quiet_idle_min_us", "prof.quiet_idle_max_calls_per_s", "prof.quiet_idle_max_host_share",
                      "prof.top_n"))
def quiet_idle(ctx: ProfContext) -> Iterable[Finding]:
    """Long stretches in which the device has nothing to do and the host calls nothing either.

    When the device is idle (``Free`` in trace_view.json's Overlap Analysis, or a gap between the device tasks
    of a .db) the host is normally busy preparing the next work, and its calls into CANN (``AscendCL@...``) show
    it. A stretch of at least ``prof.quiet_idle_min_us`` (200 ms, msprof-analyze's ``max_free_threshold``) with
    fewer than ``prof.quiet_idle_max_calls_per_s`` (100 a second) CANN calls taking under
    ``prof.quiet_idle_max_host_share`` (1%) of it means the whole Python process stood still: most often a
    garbage collection of a large heap, which torch_npu records only when GC detection is on (then PROF013
    judges the measured collections and this check SKIPs). Only stretches inside the time the host was
    recorded are judged (msprof-analyze also counts idle time before the first or after the last host call,
    where a missing record proves nothing). WARN with the count, total and longest; PASS when every long
    stretch had host activity, or there is none; SKIP without idle spans or without CANN calls.

    Fix: turn GC detection on to confirm (``experimental_config=torch_npu.profiler._ExperimentalConfig(
    gc_detect_threshold=1)``); then fewer long-lived objects and no reference cycles, ``gc.freeze()`` after
    start-up, a higher ``gc.set_threshold`` or ``gc.disable()`` with ``gc.collect()`` between steps. A silent
    host can also be waiting on a lock, the file system or a checkpoint write: ``py-spy dump`` shows which.
    """
    timelines = [(rank.label, rank.timeline) for rank in ctx.ranks if rank.timeline is not None]
    measured = [label for label, t in timelines if len(t.gc_us)]
    with_idle = [(label, t) for label, t in timelines if t.idle_measured]
    if measured:
        yield _finding("PROF030", Status.SKIP, detail=f"garbage collections are recorded on "
                       f"{_ranks_text(measured)}: PROF013 judges the measured ones")
        return
    if not with_idle:
        yield _finding("PROF030", Status.SKIP, detail="no device idle time in the profile (trace_view.json "
                       "Overlap Analysis Free events, or the TASK table of a .db)")
        return
    min_us = float(ctx.setting("prof.quiet_idle_min_us"))
    max_rate = float(ctx.setting("prof.quiet_idle_max_calls_per_s"))
    max_share = float(ctx.setting("prof.quiet_idle_max_host_share"))
    judged, silent_record = [], []
    for label, timeline in with_idle:
        has_long = any(duration >= min_us for duration in timeline.free_dur)
        if has_long and not (len(timeline.cann_start) or timeline.host_bounds):
            silent_record.append(label)   # idle to judge, but no host record to judge it by
        else:
            judged.append((label, timeline))
    if not judged:
        yield _finding("PROF030", Status.SKIP, detail=f"device idle of >= {_ms(min_us)} on "
                       f"{_ranks_text(silent_record)} but no CANN API call recorded on the host (profiler level "
                       "Level1 or higher records AscendCL calls): a silent host cannot be told")
        return
    quiet: List[Tuple[str, Dict[str, float]]] = []
    long_spans = outside = 0
    for label, timeline in judged:
        spans, beyond = timeline.quiet_idle_spans(min_us)
        outside += beyond
        long_spans += len(spans)
        for span in spans:
            seconds = span["duration_us"] / 1e6
            if span["host_calls"] < max_rate * seconds and span["host_busy_us"] < max_share * span["duration_us"]:
                quiet.append((label, span))
    quiet.sort(key=lambda item: -item[1]["duration_us"])
    evidence: Dict[str, Any] = {
        "min_us": min_us, "max_calls_per_s": max_rate, "max_host_share": max_share, "long_idle_spans": long_spans,
        "no_host_record": silent_record,
        "outside_host_record": outside, "sources": sorted({t.free_source for _, t in judged if t.free_source}),
        "quiet_spans": [{"rank": label, "start_us": round(s["start_us"], 3), "duration_us": round(s["duration_us"], 3),
                         "host_calls": int(s["host_calls"]), "host_busy_us": round(s["host_busy_us"], 3)}
                        for label, s in quiet[:ctx.top_n]]}
    if quiet:
        total = sum(s["duration_us"] for _, s in quiet)
        label, longest = quiet[0]
        yield _finding("PROF030", Status.WARN, detail=f"{len(quiet)} device idle span(s) of >= {_ms(min_us)} with "
                       f"an almost silent host ({_ms(total)} in all, longest {_ms(longest['duration_us'])} on "
                       f"{label}, {int(longest['host_calls'])} CANN call(s) in it): likely garbage collection",
                       evidence=evidence, fix="Confirm with GC detection (gc_detect_threshold); then no reference "
                       "cycles, gc.freeze() after start-up, a higher gc.set_threshold() or gc.disable() with "
                       "gc.collect() between steps; py-spy dump if the host waits on something else.")
        return
    where = f" ({outside} more outside the recorded host time, not judged)" if outside else ""
    if long_spans:
        detail = f"{long_spans} device idle span(s) of >= {_ms(min_us)}, the host active in each{where}"
    else:
        detail = f"no device idle span of >= {_ms(min_us)} inside the recorded host time{where}"
    yield _finding("PROF030", Status.PASS, detail=detail, evidence=evidence)


@prof_check("PROF031", "PyTorch operator sequences a torch_npu fused API replaces",
            settings=("prof.affinity_min_calls", "prof.top_n"))
def affinity_apis(ctx: ProfContext) -> Iterable[Finding]:
    """Operator sequences in the model that one torch_npu fused ("affinity") API does in a single kernel.

    The host timeline (``aten::`` operators of trace_view.json, or PYTORCH_API of a .db) shows which PyTorch
    operators the model's Python code calls, per thread and in order. Sequences such as ``rsqrt`` then ``mul``
    (RMSNorm), ``softmax`` between two ``matmul`` (attention), ``slice``-``silu``-``mul`` (SwiGLU), or an
    ``Optimizer.step`` of ``torch.optim.AdamW`` each launch several kernels where
    ``torch_npu.npu_rms_norm``, ``torch_npu.npu_fusion_attention``, ``torch_npu.npu_swiglu`` or
    ``torch_npu.optim.NpuFusedAdamW`` launch one. The sequences, the fused APIs and the first torch_npu
    release that has each come from ``checks/prof_affinity_apis.yaml`` (msprof-analyze's rule file and the
    operator lists of the torch_npu wheels). Only the outermost operators of a thread are matched, the calls
    the Python code made (msprof-analyze mixes in the operators they call, so ``aten::linear``'s inner
    ``aten::mm`` can break or fake a sequence). WARN per API found at least ``prof.affinity_min_calls``
    (1) times, with the count, the host time of the matched operators and, when the trace has call stacks
    (``with_stack=True``), where; PASS when operators were recorded and none fits; SKIP without ``aten::``
    operators in the timeline.

    Fix: replace the sequence with the fused API named (check the release in the evidence against the
    installed torch_npu: ``pip show torch_npu`` or ``npudoctor check``), then profile again; for optimizers,
    the ``torch_npu.optim`` class of the same name.
    """
    from npudoctor.prof import affinity

    timelines = [(rank.label, rank.timeline) for rank in ctx.ranks
                 if rank.timeline is not None and len(rank.timeline.torch_op)]
    if not timelines:
        yield _finding("PROF031", Status.SKIP, detail="no aten:: operator in the host timeline (trace_view.json "
                       "of the torch_npu profiler with CPU activity, or PYTORCH_API of a .db)")
        return
    rules, optimizers = affinity.shipped()
    least = int(ctx.setting("prof.affinity_min_calls"))
    merged: Dict[str, Dict[str, Any]] = {}
    operators = 0
    for label, timeline in timelines:
        operators += len(timeline.torch_op)
        for api, entry in affinity.find(timeline, rules, optimizers).items():
            into = merged.setdefault(api, {**entry, "calls": 0, "host_us": 0.0, "ranks": [], "where": [],
                                           "sequences": []})
            into["calls"] += entry["calls"]
            into["host_us"] = round(into["host_us"] + entry["host_us"], 3)
            into["ranks"].append(label)
            into["sequences"] += [s for s in entry["sequences"] if s not in into["sequences"]]
            into["where"] += [w for w in entry["where"] if w not in into["where"]][:5 - len(into["where"])]
    flagged = sorted((e for e in merged.values() if e["calls"] >= least), key=lambda e: (-e["host_us"], e["api"]))
    evidence = {"min_calls": least, "operator_calls": operators, "rules": len(rules),
                "apis": flagged[:ctx.top_n]}
    for entry in flagged:
        needs = ", ".join(part for part in (f"torch_npu >= {entry['torch_npu']}" if entry["torch_npu"] else "",
                                            f"CANN >= {entry['cann']}" if entry["cann"] else "") if part)
        where = f"; at {entry['where'][0]}" if entry["where"] else ""
        yield _finding("PROF031", Status.WARN, entry["api"], f"{entry['calls']} x {entry['sequences'][0]} "
                       f"({_ms(entry['host_us'])} on the host) on {_ranks_text(entry['ranks'])}: "
                       f"{entry['api']} does it in one call{' (' + needs + ')' if needs else ''}{where}",
                       evidence={**evidence, "api": entry}, fix=f"Use {entry['api']} for "
                       f"{' / '.join(entry['sequences'][:3])}{' (' + needs + ')' if needs else ''}.")
    if not flagged:
        yield _finding("PROF031", Status.PASS, detail=f"{operators} operator call(s) on "
                       f"{_ranks_text([label for label, _ in timelines])}: no sequence a fused API replaces",
                       evidence=evidence)


def _sdma_transfers(ctx: ProfContext) -> List[Tuple[str, Any, Tuple[str, str, float, float, float, float]]]:
    """(rank, timeline, transfer) of the HCCL tasks moving data between devices over SDMA (ON_CHIP copies
    inside one device excluded: they use no link)."""
    return [(rank.label, rank.timeline, t) for rank in ctx.ranks if rank.timeline is not None
            for t in rank.timeline.transfers if t[0].upper() == "SDMA" and t[1].upper() != "ON_CHIP"]


def _overlaps(starts: List[float], reach: List[float], start: float, end: float) -> bool:
    """Whether [start, end) overlaps one of the intervals: ``starts`` sorted, ``reach[i]`` the latest end of the
    first i + 1 of them."""
    import bisect

    before = bisect.bisect_left(starts, end)
    return before > 0 and reach[before - 1] > start


@prof_check("PROF032", "Link bandwidth lost while matmuls run (bandwidth contention)",
            settings=("prof.contention_drop_warn_share", "prof.link_min_bandwidth_gbps.SDMA"))
def bandwidth_contention(ctx: ProfContext) -> Iterable[Finding]:
    """SDMA transfers that run slower while MatMul kernels run at the same time.

    Overlapping communication with computation hides it, but a MatMul and an SDMA copy share the HBM: the
    copy may then run below its bandwidth and end later than the matmul it was meant to hide behind. From the
    HCCL transfer tasks (``Memcpy`` / ``Reduce_Inline`` with their size, in trace_view.json, msprof_*.json or
    a legacy ``timeline/hccl_*.json``) and the device's MatMul tasks of the same timeline: the bandwidth of the
    transfers that overlap a MatMul (bytes over time) against those that do not. WARN when the overlapping
    ones are more than ``prof.contention_drop_warn_share`` (20%) slower; with no transfer free of a MatMul
    to compare, when they are below ``prof.link_min_bandwidth_gbps.SDMA`` (14.4 GB/s, msprof-analyze's 18
    GB/s x 0.8, which judges only this). PASS otherwise or when no transfer overlaps a MatMul; SKIP
    without transfer tasks or MatMul tasks.

    Fix: measure the step with and without the overlap (e.g. Megatron/MindSpeed
    ``--overlap-grad-reduce`` off): keep it only when the hidden communication is worth more than the slower
    links; otherwise move the collective next to vector work, or split the matmul.
    """
    transfers = _sdma_transfers(ctx)
    if not transfers:
        yield _finding("PROF032", Status.SKIP, detail="no SDMA transfer task (Memcpy/Reduce_Inline with size(Byte)) "
                       "in the timeline: collect with profiler_level Level1 or higher")
        return
    sorted_matmuls: Dict[int, Tuple[List[float], List[float]]] = {}
    for _, timeline, _ in transfers:
        if id(timeline) not in sorted_matmuls:
            pairs = sorted(zip(timeline.matmul_start, timeline.matmul_end))
            reach: List[float] = []
            for _, end in pairs:
                reach.append(max(end, reach[-1]) if reach else end)
            sorted_matmuls[id(timeline)] = ([a for a, _ in pairs], reach)
    if not any(starts for starts, _ in sorted_matmuls.values()):
        yield _finding("PROF032", Status.SKIP, detail=f"{len(transfers)} SDMA transfer task(s) but no MatMul task "
                       "in the same timeline")
        return
    groups = {"overlapped": [0.0, 0.0, 0], "alone": [0.0, 0.0, 0]}   # bytes, us, count
    for _, timeline, (_, _, size, start, duration, _) in transfers:
        starts, ends = sorted_matmuls[id(timeline)]
        key = "overlapped" if duration > 0 and _overlaps(starts, ends, start, start + duration) else "alone"
        groups[key][0] += size
        groups[key][1] += duration
        groups[key][2] += 1

    def speed(entry: List[float]) -> float:
        return entry[0] / entry[1] / 1000 if entry[1] > 0 else 0.0   # bytes per us -> GB/s

    bar = float(ctx.setting("prof.contention_drop_warn_share"))
    floor = ctx.limits("prof.link_min_bandwidth_gbps", ("SDMA",)).get("SDMA")
    overlapped, alone = groups["overlapped"], groups["alone"]
    evidence = {"warn_share": bar, "floor_gbps": floor,
                "overlapped": {"transfers": int(overlapped[2]), "gbps": round(speed(overlapped), 3)},
                "alone": {"transfers": int(alone[2]), "gbps": round(speed(alone), 3)}}
    if not overlapped[2]:
        yield _finding("PROF032", Status.PASS, detail=f"none of {len(transfers)} SDMA transfer task(s) overlaps a "
                       f"MatMul (alone: {speed(alone):.1f} GB/s)", evidence=evidence)
        return
    if alone[2]:
        drop = 1 - speed(overlapped) / speed(alone) if speed(alone) > 0 else 0.0
        evidence["drop"] = round(drop, 4)
        detail = (f"SDMA {speed(overlapped):.1f} GB/s in {int(overlapped[2])} transfer(s) overlapping a MatMul vs "
                  f"{speed(alone):.1f} GB/s in {int(alone[2])} alone ({_pct(max(0.0, drop))} slower)")
        slow = drop > bar
    else:
        detail = (f"all {int(overlapped[2])} SDMA transfer(s) overlap a MatMul: {speed(overlapped):.1f} GB/s"
                  + (f" (bar {float(floor):g} GB/s)" if floor is not None else ""))
        slow = floor is not None and speed(overlapped) < float(floor)
    yield _against_bar("PROF032", slow, detail, evidence, bar=_pct(bar),
                       fix="Compare the step with the overlap turned off (e.g. --overlap-grad-reduce); keep it only "
                           "if it gains more than the slower links cost; else overlap the collective with vector work.")


@prof_check("PROF033", "Collective transfers not 512-byte aligned",
            settings=("prof.unaligned_warn_share", "prof.top_n"))
def transfer_alignment(ctx: ProfContext) -> Iterable[Finding]:
    """SDMA transfers whose size is not a multiple of 512 bytes.

    HCCL moves a collective's buffer in SDMA tasks (``Memcpy``, ``Reduce_Inline``); a size that is not a
    multiple of 512 bytes (msprof-analyze's ``min_size`` / base size) ends in a partial burst and runs below
    the link's bandwidth. From the transfer tasks of the timeline (trace_view.json, msprof_*.json or a legacy
    ``timeline/hccl_*.json``), transfers over a link (not ON_CHIP) larger than 512 bytes: WARN when the
    unaligned ones take more than ``prof.unaligned_warn_share`` (5%) of their transit time (msprof-analyze
    reports any unaligned one), with their count, time and sizes; PASS otherwise; SKIP without transfer tasks.

    Fix: pad the tensors a collective moves to a multiple of 512 bytes (256 fp16/bf16 or 128 fp32 elements):
    gradient bucket sizes, the hidden size or vocabulary padded (e.g. Megatron
    ``--make-vocab-size-divisible-by``), sequence lengths bucketed.
    """
    transfers = [(label, t) for label, _, t in _sdma_transfers(ctx) if t[2] > 512]
    if not transfers:
        yield _finding("PROF033", Status.SKIP, detail="no SDMA transfer task over 512 bytes (Memcpy/Reduce_Inline "
                       "with size(Byte)) in the timeline")
        return
    bar = float(ctx.setting("prof.unaligned_warn_share"))
    unaligned = [(label, t) for label, t in transfers if int(t[2]) % 512]
    total_us = sum(t[4] for _, t in transfers)
    bad_us = sum(t[4] for _, t in unaligned)
    share = bad_us / total_us if total_us > 0 else (len(unaligned) / len(transfers))
    sizes = sorted({int(t[2]) for _, t in unaligned})
    evidence = {"warn_share": bar, "transfers": len(transfers), "unaligned": len(unaligned),
                "unaligned_time_us": round(bad_us, 3), "time_share": round(share, 4),
                "unaligned_sizes_bytes": sizes[:ctx.top_n], "ranks": sorted({label for label, _ in unaligned})}
    detail = (f"{len(unaligned)} of {len(transfers)} SDMA transfer(s) are not a multiple of 512 bytes, "
              f"{_pct(share)} of the transfer time")
    if unaligned and share > bar:
        yield _finding("PROF033", Status.WARN, detail=f"{detail} (e.g. {sizes[0]:,} bytes, {sizes[0] % 512} past a "
                       f"512-byte boundary)", evidence=evidence,
                       fix="Pad what the collectives move to a multiple of 512 bytes (256 bf16/fp16 or 128 fp32 "
                           "elements): bucket sizes, hidden size, vocabulary (--make-vocab-size-divisible-by).")
    else:
        yield _finding("PROF033", Status.PASS, detail=f"{detail} (bar {_pct(bar)})", evidence=evidence)


@prof_check("PROF034", "Slow link by the gap between links of one transport",
            settings=("prof.link_gap_warn_share", "prof.link_min_size_mb"))
def link_gap(ctx: ProfContext) -> Iterable[Finding]:
    """One rank's (or communication group's) links of a transport slower than the others'.

    PROF010 judges each transfer against an absolute bar, which a site must know; links of the same kind in
    one job should also run at the same speed, and one that does not is found without a bar. Per transport
    (SDMA, RDMA, HCCS, PCIE, ...) and per rank (and group, when the file names it: msprof-analyze's
    cluster_communication.json), the bandwidth of its transfers of at least ``prof.link_min_size_mb`` (16 MB,
    PROF010's; smaller ones are latency bound) as bytes over transit time; then the gap (fastest - slowest)
    over the mean, msprof-analyze's slow-link measure. WARN when a gap is above ``prof.link_gap_warn_share``
    (5%, msprof-analyze's), naming the slowest; PASS otherwise; SKIP with fewer than two ranks or groups
    using one transport.

    Fix: the named rank's links: ``hccn_tool -i N -link -g`` / ``-stat -g`` (speed, errors), ``npudoctor check``
    on its node (HCCS, PCIe width), its optics and switch port; then PROF010 for the absolute bandwidth.
    """
    min_size = float(ctx.setting("prof.link_min_size_mb"))
    bar = float(ctx.setting("prof.link_gap_warn_share"))
    totals: Dict[Tuple[str, str], List[float]] = {}   # (transport, unit) -> [MB, ms, transfers]
    for rank in ctx.ranks:
        for link in rank.links:
            path = link["path"]
            if "Total Op Info" in path or link["size_mb"] < max(min_size, 1e-9) or link["transit_ms"] <= 0:
                continue
            unit = f"rank {path[-1]}" if path and path[-1].isdigit() else rank.label
            if path and path[0].startswith("("):   # a cluster file's group, e.g. "(0, 1)"
                unit += f" group {path[0]}"
            entry = totals.setdefault((link["transport"].upper(), unit), [0.0, 0.0, 0])
            entry[0] += link["size_mb"]
            entry[1] += link["transit_ms"]
            entry[2] += 1
    per: Dict[str, Dict[str, float]] = {}
    for (transport, unit), (size, time_ms, _) in totals.items():
        speed = size / time_ms   # MB/ms = GB/s
        if speed == speed and speed != float("inf"):   # sums of absurd sizes overflow: not a bandwidth
            per.setdefault(transport, {})[unit] = speed
    compared = {t: units for t, units in per.items() if len(units) >= 2}
    if not compared:
        yield _finding("PROF034", Status.SKIP, detail=f"no transport with transfers of >= {min_size:g} MB on two "
                       "ranks or groups: no gap to measure")
        return
    gaps: Dict[str, Dict[str, Any]] = {}
    for transport, units in sorted(compared.items()):
        mean = sum(units.values()) / len(units)
        fast, slow = max(units, key=units.__getitem__), min(units, key=units.__getitem__)
        gaps[transport] = {"gap_share": round((units[fast] - units[slow]) / mean, 4) if mean > 0 else 0.0,
                           "mean_gbps": round(mean, 3), "slowest": slow, "slowest_gbps": round(units[slow], 3),
                           "fastest": fast, "fastest_gbps": round(units[fast], 3), "units": len(units)}
    evidence = {"warn_share": bar, "min_size_mb": min_size, "transports": gaps}
    flagged = [t for t in gaps if gaps[t]["gap_share"] > bar]
    if flagged:
        parts = [f"{t} {_pct(gaps[t]['gap_share'])} apart, slowest {gaps[t]['slowest']} {gaps[t]['slowest_gbps']:.4g} "
                 f"GB/s vs {gaps[t]['fastest_gbps']:.4g}" for t in flagged]
        yield _finding("PROF034", Status.WARN, detail="; ".join(parts), evidence=evidence,
                       fix="Check the slowest rank's links (hccn_tool -i N -link -g / -stat -g, npudoctor check on "
                           "its node), its optics and switch port; PROF010 for the absolute bandwidth.")
    else:
        widest = max(gaps.values(), key=lambda g: g["gap_share"])
        yield _finding("PROF034", Status.PASS, detail=f"links of {', '.join(gaps)} within "
                       f"{_pct(widest['gap_share'])} of each other (bar {_pct(bar)})", evidence=evidence)


@prof_check("PROF035", "Pipeline stages with unequal compute", settings=("prof.pp_stage_gap_warn_share",))
def pipeline_stages(ctx: ProfContext) -> Iterable[Finding]:
    """Pipeline-parallel stages that compute for different lengths of time.

    In pipeline parallelism every micro-batch passes through all stages, so the job runs at the pace of the
    stage that computes longest and the others wait in pipeline bubbles. msprof-analyze's cluster output
    (``cluster_step_trace_time.csv``) has one row per stage (``Type`` = stage, ``Index`` = its ranks, each
    figure the largest over those ranks) besides the rank rows; without them, per-rank torch_npu folders are
    grouped by the ``pp`` group in each rank's ``profiler_metadata.json`` (``parallel_group_info``: a rank's
    place in its group is its stage, the stage's figure the largest over its ranks). Per stage, the mean
    computing time over the
    steps; the gap (longest - shortest) over the mean. WARN when it is above ``prof.pp_stage_gap_warn_share``
    (5%), naming the longest stage and each stage's bubble; PASS otherwise; SKIP without stage rows or with
    one stage (msprof-analyze writes them when it finds the pipeline's point-to-point groups).

    Fix: move layers from the longest stage to the others (Megatron/MindSpeed ``--num-layer-list`` or an
    uneven first/last stage for the embedding and the output layer), or interleave (virtual pipeline stages)
    to shrink the bubbles.
    """
    from npudoctor.prof import figures

    seen: Dict[int, Any] = {}
    for rank in ctx.ranks:
        table = rank.pp_stages
        if table is not None and len(table) and id(table) not in seen:
            seen[id(table)] = table
    stages: Dict[str, Dict[str, List[float]]] = {}
    for table in seen.values():
        if "computing_us" not in table.columns or "row_index" not in table.columns:
            continue
        for _, row in table.iterrows():
            entry = stages.setdefault(str(row["row_index"])[:200], {"computing": [], "bubble": [], "stage": []})
            entry["computing"].append(figures._number(row["computing_us"]))
            for column, key in (("bubble_us", "bubble"), ("stage_us", "stage")):
                if column in table.columns:
                    entry[key].append(figures._number(row[column]))
    source = "cluster_step_trace_time.csv stage rows"
    if len(stages) < 2:
        from_groups = _stages_from_groups(ctx)
        if len(from_groups) > len(stages):
            stages, source = from_groups, "profiler_metadata.json pp groups and each rank's step trace"
    if len(stages) < 2:
        yield _finding("PROF035", Status.SKIP, detail=f"{len(stages)} pipeline stage(s) found (stage rows of "
                       "cluster_step_trace_time.csv, or the pp groups in the ranks' profiler_metadata.json): no "
                       "gap to measure")
        return

    def mean(values: List[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    computing = {name: mean(entry["computing"]) for name, entry in stages.items()}
    overall = mean(list(computing.values()))
    longest, shortest = max(computing, key=computing.__getitem__), min(computing, key=computing.__getitem__)
    gap = (computing[longest] - computing[shortest]) / overall if overall > 0 else 0.0
    bar = float(ctx.setting("prof.pp_stage_gap_warn_share"))
    evidence = {"warn_share": bar, "gap_share": round(gap, 4), "source": source,
                "stages": {name: {"computing_us": round(computing[name], 3),
                                  "bubble_us": round(mean(entry["bubble"]), 3),
                                  "stage_us": round(mean(entry["stage"]), 3)} for name, entry in stages.items()}}
    detail = (f"{len(stages)} stages, computing {_pct(gap)} apart: longest {longest} {_ms(computing[longest])}, "
              f"shortest {shortest} {_ms(computing[shortest])}")
    if gap > bar:
        yield _finding("PROF035", Status.WARN, detail=detail, evidence=evidence,
                       fix="Move layers off the longest stage (--num-layer-list, an uneven first/last stage for "
                           "embedding and output layer) or interleave virtual stages.")
    else:
        yield _finding("PROF035", Status.PASS, detail=f"{detail} (bar {_pct(bar)})", evidence=evidence)


def _stages_from_groups(ctx: ProfContext) -> Dict[str, Dict[str, List[float]]]:
    """Stages of per-rank folders: each rank's place in its pipeline group (profiler_metadata.json) is its
    stage; a stage's figure per step part is the largest over its ranks' means (msprof-analyze's stage rows)."""
    from npudoctor.prof import figures

    per_stage: Dict[str, Dict[str, List[float]]] = {}
    for rank in ctx.ranks:
        source, table = rank.source, rank.step_trace
        if source.rank is None or source.rank not in source.pp_ranks or table is None or not len(table):
            continue
        stage = f"stage {source.pp_ranks.index(source.rank)}"
        entry = per_stage.setdefault(stage, {"computing": [], "bubble": [], "stage": []})
        for column, key in (("computing_us", "computing"), ("bubble_us", "bubble"), ("stage_us", "stage")):
            if column in table.columns:
                values = [figures._number(v) for v in table[column]]
                entry[key].append(sum(values) / len(values) if values else 0.0)
    return {name: {key: [max(values)] if values else [] for key, values in entry.items()}
            for name, entry in per_stage.items() if entry["computing"]}
