"""PROF checks of the host side and the cluster: DataLoader, garbage collection, SyncBatchNorm, stream
synchronisation, AI Core frequency, small communication packets and the gap between ranks.

The families msprof-analyze's advisor has (read from its 26.2.0 source for what each measures), decided here
in our own terms; where the advisor judges by a count, these judge by the time it costs. They register into
the one PROF registry (:mod:`npudoctor.prof.checks`), whose docstrings are ``npudoctor explain PROF0NN``.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from npudoctor.model.finding import Finding, Status
from npudoctor.prof import figures
from npudoctor.prof.checks import ProfContext, _against_bar, _finding, _ms, _pct, _ranks_text, prof_check
from npudoctor.prof.model import Rank


def _timelines(ctx: ProfContext) -> List[Tuple[str, Any]]:
    return [(rank.label, rank.timeline) for rank in ctx.ranks
            if rank.timeline is not None and not rank.timeline.empty]


NO_TIMELINE = ("no host timeline read (trace_view.json of the torch_npu profiler, or the PYTORCH_API / CANN_API "
               "tables of a .db export)")
# The transports PROF017 judges (profile ``prof.small_transfer_mb.<transport>``).
SMALL_TRANSFER_TRANSPORTS = ("SDMA", "RDMA")


@prof_check("PROF012", "Slow DataLoader", settings=("prof.dataloader_warn_us", "prof.top_n"))
def slow_dataloader(ctx: ProfContext) -> Iterable[Finding]:
    """DataLoader steps that keep the training loop waiting for its next batch.

    The torch_npu profiler records each ``enumerate(DataLoader)...__next__`` call on the host (trace_view.json,
    or PYTORCH_API in a .db export). A call of at least ``prof.dataloader_warn_us`` (10 ms, msprof-analyze's
    ``dataloader_duration_threshold``) is a step in which the device may sit idle waiting for input. WARN
    with the count and the slowest call; PASS when every call is shorter; SKIP without a host timeline or
    without DataLoader calls in it.

    Fix: more ``num_workers`` (a ``_SingleProcessDataLoaderIter`` means ``num_workers=0``), ``pin_memory=True``,
    ``persistent_workers=True`` and ``prefetch_factor``; data on a local disk, not in tar/zip archives; no
    core binding (``taskset``) that starves the workers.
    """
    timelines = _timelines(ctx)
    if not timelines:
        yield _finding("PROF012", Status.SKIP, detail=NO_TIMELINE)
        return
    bar = float(ctx.setting("prof.dataloader_warn_us"))
    calls = [(label, name, duration) for label, t in timelines for name, duration in t.dataloader]
    counted = sum(t.dataloader_count for _, t in timelines)
    if not calls:
        yield _finding("PROF012", Status.SKIP, detail=f"no DataLoader call in the host timeline of "
                       f"{len(timelines)} rank(s)")
        return
    slow = sorted((c for c in calls if c[2] >= bar), key=lambda c: -c[2])
    single = any("singleprocess" in name.lower() for _, name, _ in calls)
    evidence = {"warn_us": bar, "calls": counted, "slow_calls": len(slow),
                "slowest": [{"rank": label, "name": name, "duration_us": round(duration, 3)}
                            for label, name, duration in (slow or sorted(calls, key=lambda c: -c[2]))[:ctx.top_n]],
                "single_process": single}
    fix = ("Raise DataLoader num_workers" + (" (this run uses num_workers=0: _SingleProcessDataLoaderIter)"
                                             if single else "") +
           ", pin_memory=True, persistent_workers=True, prefetch_factor; keep the data on a fast local disk.")
    if slow:
        label, _name, duration = slow[0]
        yield _finding("PROF012", Status.WARN, detail=f"{len(slow)} of {counted} DataLoader call(s) took >= "
                       f"{_ms(bar)}, slowest {_ms(duration)} on {label}", evidence=evidence, fix=fix)
    else:
        longest = max(c[2] for c in calls)
        yield _finding("PROF012", Status.PASS, detail=f"{counted} DataLoader call(s), the longest {_ms(longest)} "
                       f"(bar {_ms(bar)})", evidence=evidence)


@prof_check("PROF013", "Garbage collection during training", settings=("prof.gc_warn_us",))
def garbage_collection(ctx: ProfContext) -> Iterable[Finding]:
    """Python garbage collections long enough to stall the step.

    torch_npu records each Python GC pass longer than ``experimental_config(gc_detect_threshold=...)`` (trace
    events of category ``GC``, or the GC_RECORD table of a .db). A collection blocks the whole process, so
    some steps take longer than the others. WARN when collections of at least ``prof.gc_warn_us`` (1 ms,
    msprof-analyze's ``gc_threshold``) are seen, with their count and total time; PASS when every recorded
    one is shorter; SKIP when the profile has no GC record (GC detection was not turned on).

    Fix: fewer short-lived objects and no reference cycles in the step; ``gc.freeze()`` after start-up, a
    higher ``gc.set_threshold``, or ``gc.disable()`` with a ``gc.collect()`` between phases.
    """
    timelines = _timelines(ctx)
    records = [(label, float(d)) for label, t in timelines for d in t.gc_us]
    if not records:
        yield _finding("PROF013", Status.SKIP, detail="no GC record in the profile (collect with "
                       "experimental_config gc_detect_threshold set)" if timelines else NO_TIMELINE)
        return
    bar = float(ctx.setting("prof.gc_warn_us"))
    long_ones = [(label, d) for label, d in records if d >= bar]
    total = sum(d for _, d in long_ones)
    evidence = {"warn_us": bar, "collections": len(records), "long_collections": len(long_ones),
                "long_total_us": round(total, 3), "longest_us": round(max(d for _, d in records), 3),
                "ranks": sorted({label for label, _ in long_ones})}
    if long_ones:
        yield _finding("PROF013", Status.WARN, detail=f"{len(long_ones)} garbage collection(s) of >= {_ms(bar)}, "
                       f"{_ms(total)} in all, on {_ranks_text(sorted({lb for lb, _ in long_ones}))}",
                       evidence=evidence, fix="Avoid reference cycles and short-lived objects in the step; "
                       "gc.freeze() after start-up, a higher gc.set_threshold(), or gc.disable() with gc.collect() "
                       "between phases.")
    else:
        yield _finding("PROF013", Status.PASS, detail=f"{len(records)} garbage collection(s), all under "
                       f"{_ms(bar)}", evidence=evidence)


@prof_check("PROF014", "SyncBatchNorm", settings=("prof.syncbn_max_calls",))
def sync_batchnorm(ctx: ProfContext) -> Iterable[Finding]:
    """SyncBatchNorm layers: one collective per layer and step, and slow dispatch on the host.

    Each ``SyncBatchNorm`` forward gathers statistics from every rank before it can go on. WARN when a rank
    calls it more than ``prof.syncbn_max_calls`` (20, msprof-analyze's ``max_syncbn_num``) times in the
    profiled steps; PASS with the count otherwise; SKIP without a host timeline.

    Fix: plain BatchNorm where the per-device batch is large enough (drop ``convert_sync_batchnorm``);
    otherwise torch_npu's fused statistics (``batch_norm_reduce`` / ``batch_norm_gather_stats_update``).
    """
    timelines = _timelines(ctx)
    if not timelines:
        yield _finding("PROF014", Status.SKIP, detail=NO_TIMELINE)
        return
    limit = int(ctx.setting("prof.syncbn_max_calls"))
    counts = {label: t.syncbn for label, t in timelines}
    worst = max(counts.values())
    evidence = {"max_calls": limit, "calls": counts}
    if worst > limit:
        yield _finding("PROF014", Status.WARN, detail=f"up to {worst} SyncBatchNorm call(s) per rank (more than "
                       f"{limit})", evidence=evidence,
                       fix="Use BatchNorm where the per-device batch allows (no convert_sync_batchnorm), else "
                           "torch_npu's fused batch_norm_reduce / batch_norm_gather_stats_update.")
    else:
        yield _finding("PROF014", Status.PASS, detail=f"{worst} SyncBatchNorm call(s) at most (limit {limit})",
                       evidence=evidence)


@prof_check("PROF015", "Stream synchronised after every launch (ASCEND_LAUNCH_BLOCKING)",
            settings=("prof.sync_after_launch_warn_share",))
def launch_blocking(ctx: ProfContext) -> Iterable[Finding]:
    """The host waits for the device after each operator launch.

    In the host timeline each ``Node@launch`` is an operator put on a stream and ``AscendCL@
    aclrtSynchronizeStream`` a wait for the stream to drain. When most launches are followed at once by a
    synchronisation (share above ``prof.sync_after_launch_warn_share``, 0.5, msprof-analyze's
    ``min_co_occurrence_ratio``), operators run one at a time with the host in lock step: the mark of
    ``ASCEND_LAUNCH_BLOCKING=1`` (or a ``.item()`` / ``.cpu()`` after every operator). WARN then; PASS with
    the share otherwise; SKIP when the timeline has no launches.

    Fix: ``unset ASCEND_LAUNCH_BLOCKING`` (it is a debugging switch) and remove per-operator host reads.
    """
    timelines = _timelines(ctx)
    if not timelines:
        yield _finding("PROF015", Status.SKIP, detail=NO_TIMELINE)
        return
    bar = float(ctx.setting("prof.sync_after_launch_warn_share"))
    rows: Dict[str, Dict[str, Any]] = {}
    for label, timeline in timelines:
        syncs, launches, after = timeline.sync_after_launch()
        if launches:
            rows[label] = {"launches": launches, "synchronisations": syncs, "sync_after_launch": after,
                           "share": round(after / launches, 4)}
    if not rows:
        yield _finding("PROF015", Status.SKIP, detail="no Node@launch in the host timeline")
        return
    worst_label = max(rows, key=lambda label: rows[label]["share"])
    worst = rows[worst_label]
    evidence = {"warn_share": bar, "ranks": rows}
    if worst["share"] > bar:
        yield _finding("PROF015", Status.WARN, detail=f"{_pct(worst['share'])} of {worst['launches']} launches "
                       f"on {worst_label} are followed by a stream synchronisation: ASCEND_LAUNCH_BLOCKING=1 or a "
                       "host read after each operator", evidence=evidence,
                       fix="unset ASCEND_LAUNCH_BLOCKING (a debugging switch); no .item()/.cpu() per operator.")
    else:
        yield _finding("PROF015", Status.PASS, detail=f"at most {_pct(worst['share'])} of launches are followed by "
                       f"a stream synchronisation (bar {_pct(bar)})", evidence=evidence)


def _rated_mhz(rank: Rank) -> Optional[float]:
    infos = list(rank.source.devices.values())
    values = set()
    for info in infos:
        try:
            values.add(float(str(info.get("aic_frequency"))))
        except (TypeError, ValueError):
            continue
    values = {v for v in values if v == v and 0 < v < 1e6}
    return values.pop() if len(values) == 1 else None


@prof_check("PROF016", "AI Core frequency below its rated value", settings=("prof.aicore_freq_drop_warn_share",))
def aicore_frequency(ctx: ProfContext) -> Iterable[Finding]:
    """The AI Cores ran below their rated frequency (power or thermal capping).

    The profiler records the AI Core frequency as a counter (``AI Core Freq`` in trace_view.json, AICORE_FREQ
    in a .db); ``info.json`` in the PROF folder gives the rated ``aic_frequency``. The check weights each
    sample by the time until the next one and WARNs when the mean is more than
    ``prof.aicore_freq_drop_warn_share`` (5%, msprof-analyze's ``frequency_threshold``) below the rated value.
    SKIP without the counter or without info.json.

    Fix: look at ``npu-smi info -t power -i N`` and the temperature, the chassis cooling and any power cap
    set for the card; a lower frequency slows every operator by the same share.
    """
    rows = []
    unknown = []
    for rank in ctx.ranks:
        if rank.timeline is None or not rank.timeline.freq:
            continue
        rated = _rated_mhz(rank)
        if rated is None:
            unknown.append(rank.label)
            continue
        drop = rank.timeline.freq_drop(rated)
        if drop:
            rows.append((rank.label, drop))
    if not rows:
        yield _finding("PROF016", Status.SKIP, detail=(
            f"rated AI Core frequency unknown (no info.json aic_frequency) for {_ranks_text(unknown)}" if unknown
            else "no AI Core frequency counter in the profile (trace_view.json AI Core Freq, .db AICORE_FREQ)"))
        return
    bar = float(ctx.setting("prof.aicore_freq_drop_warn_share"))
    label, worst = max(rows, key=lambda row: row[1]["drop"])
    evidence = {"warn_share": bar, "ranks": {lb: d for lb, d in rows}}
    detail = (f"{label}: mean {worst['mean_mhz']:g} MHz of a rated {worst['max_mhz']:g} MHz "
              f"({_pct(worst['drop'])} lower, lowest {worst['min_mhz']:g} MHz)")
    yield _against_bar("PROF016", worst["drop"] > bar, detail, evidence, bar=_pct(bar),
                       fix="Check power and temperature (npu-smi info -t power / -t temp -i N), cooling and any "
                           "power cap on the card.")


@prof_check("PROF017", "Small communication transfers",
            settings=(*(f"prof.small_transfer_mb.{t}" for t in SMALL_TRANSFER_TRANSPORTS),
                      "prof.small_transfer_warn_share"))
def small_transfers(ctx: ProfContext) -> Iterable[Finding]:
    """Collectives that move too little data per transfer to reach the link's bandwidth.

    Per transport in communication.json (or analysis.db): transfers under ``prof.small_transfer_mb.SDMA``
    (16 MB) or ``prof.small_transfer_mb.RDMA`` (1 MB) are latency bound, and many of them also load the host
    that issues them. msprof-analyze counts them (a WARN above 20% of the transfers); a count says little
    when the small ones are quick, so this check weighs them by transit time: WARN when they take more than
    ``prof.small_transfer_warn_share`` (20%) of the transport's communication time. Both shares are in the
    evidence. SKIP without communication data.

    Fix: larger gradient buckets and gradient accumulation (fewer, bigger all-reduces), ZeRO-1/2 rather than
    ZeRO-3 where memory allows, fused (affinity) optimizers that communicate once.
    """
    records = [(rank.label, link) for rank in ctx.ranks for link in rank.links
               if "Total Op Info" not in link["path"] and link["size_mb"] > 0]
    if not records:
        yield _finding("PROF017", Status.SKIP, detail="no communication.json / analysis.db transfer read")
        return
    limits = ctx.limits("prof.small_transfer_mb", SMALL_TRANSFER_TRANSPORTS)
    bar = float(ctx.setting("prof.small_transfer_warn_share"))
    per: Dict[str, Dict[str, float]] = {}
    for _, link in records:
        transport = link["transport"].upper()
        if transport not in limits:
            continue
        entry = per.setdefault(transport, {"transfers": 0, "small": 0, "time_ms": 0.0, "small_time_ms": 0.0})
        entry["transfers"] += 1
        entry["time_ms"] += link["transit_ms"]
        if link["size_mb"] < limits[transport]:
            entry["small"] += 1
            entry["small_time_ms"] += link["transit_ms"]
    if not per:
        yield _finding("PROF017", Status.SKIP, detail=f"no transfer over {', '.join(sorted(limits))}")
        return
    for entry in per.values():
        entry["count_share"] = round(entry["small"] / entry["transfers"], 4)
        entry["time_share"] = round(entry["small_time_ms"] / entry["time_ms"], 4) if entry["time_ms"] > 0 else 0.0
    evidence = {"limits_mb": limits, "warn_share": bar, "transports": per}
    flagged = sorted((t for t in per if per[t]["time_share"] > bar), key=lambda t: -per[t]["time_share"])
    listing = ", ".join(f"{t} {_pct(per[t]['time_share'])} of the time in {int(per[t]['small'])} of "
                        f"{int(per[t]['transfers'])} transfers under {limits[t]:g} MB" for t in (flagged or per))
    if flagged:
        yield _finding("PROF017", Status.WARN, detail=f"small transfers take {listing}", evidence=evidence,
                       fix="Fewer, larger collectives: bigger gradient buckets, gradient accumulation, ZeRO-1/2 "
                           "instead of ZeRO-3, fused optimizers.")
    else:
        yield _finding("PROF017", Status.PASS, detail=f"small transfers: {listing} (bar {_pct(bar)})",
                       evidence=evidence)


PARTS = (("computing_us", "computing"), ("comm_not_overlapped_us", "not-overlapped communication"),
         ("free_us", "free (device idle)"))


@prof_check("PROF018", "Gap between ranks (slow rank)", settings=("prof.rank_gap_warn_share",))
def rank_gap(ctx: ProfContext) -> Iterable[Finding]:
    """Ranks whose computing, communication or idle time differs from the others'.

    In a data-parallel job every rank waits in the collectives for the slowest one, so the job runs at the
    pace of its worst rank. From each rank's step trace (``step_trace_time.csv``, msprof-analyze's
    ``cluster_step_trace_time.csv``, or analysis.db), per part of the step: the gap (highest - lowest) over
    the mean, msprof-analyze's slow-rank measure. WARN when a gap is above ``prof.rank_gap_warn_share`` (5%),
    naming the rank with the most of it: most computing = a slow device or more work; most free time = a
    host that feeds its device late; the least exposed communication = the rank the others wait for. SKIP
    with fewer than two ranks.

    Fix: for computing, the rank's device (npudoctor check on that node) and its data shard; for free time,
    that host's DataLoader and CPU binding; then the links of the rank (PROF010).
    """
    means: Dict[str, Dict[str, float]] = {}
    for rank in ctx.ranks:
        table = rank.step_trace
        if table is None or not len(table):
            continue
        values = {}
        for column, _ in PARTS:
            if column in table.columns:
                numbers = [figures._number(v) for v in table[column]]
                values[column] = sum(numbers) / len(numbers)
        if values:
            means[rank.label] = values
    if len(means) < 2:
        yield _finding("PROF018", Status.SKIP, detail=f"{len(means)} rank(s) with a step trace: no gap to measure")
        return
    bar = float(ctx.setting("prof.rank_gap_warn_share"))
    gaps: Dict[str, Dict[str, Any]] = {}
    for column, _ in PARTS:
        series = {label: v[column] for label, v in means.items() if column in v}
        mean = sum(series.values()) / len(series) if series else 0.0
        if len(series) < 2 or mean <= 0:
            continue
        top = max(series, key=lambda label: series[label])
        low = min(series, key=lambda label: series[label])
        gaps[column] = {"gap_share": round((series[top] - series[low]) / mean, 4), "mean_us": round(mean, 3),
                        "highest": top, "highest_us": round(series[top], 3), "lowest": low,
                        "lowest_us": round(series[low], 3)}
    evidence = {"warn_share": bar, "ranks": len(means), "gaps": gaps}
    flagged = [(column, name) for column, name in PARTS if column in gaps and gaps[column]["gap_share"] > bar]
    if not flagged:
        widest = max(gaps.values(), key=lambda g: g["gap_share"])["gap_share"] if gaps else 0.0
        yield _finding("PROF018", Status.PASS, detail=f"{len(means)} ranks within {_pct(widest)} of each other "
                       f"(bar {_pct(bar)})", evidence=evidence)
        return
    parts = []
    for column, name in flagged:
        gap = gaps[column]
        least = column == "comm_not_overlapped_us"  # the rank the others wait for communicates least
        who, amount = (gap["lowest"], gap["lowest_us"]) if least else (gap["highest"], gap["highest_us"])
        parts.append(f"{name} {_pct(gap['gap_share'])} apart ({'least' if least else 'most'}: {who} {_ms(amount)} "
                     f"vs mean {_ms(gap['mean_us'])})")
    yield _finding("PROF018", Status.WARN, detail=f"{len(means)} ranks: " + "; ".join(parts), evidence=evidence,
                   fix="Look at the named rank: its device (npudoctor check), data shard and host (DataLoader, CPU "
                       "binding), then its links (PROF010).")


def _environment_problems(environment: Dict[str, str]) -> List[Tuple[str, str, str]]:
    """(variable, value, why) for the values that slow a training job (from the vendor's variable reference)."""
    out = []
    blocking = environment.get("ASCEND_LAUNCH_BLOCKING", "").strip()
    if blocking and blocking not in ("0", "false", "False"):
        out.append(("ASCEND_LAUNCH_BLOCKING", blocking, "every operator runs synchronously (a debugging switch)"))
    level = environment.get("ASCEND_GLOBAL_LOG_LEVEL", "").strip()
    if level in ("0", "1"):
        out.append(("ASCEND_GLOBAL_LOG_LEVEL", level, f"{'debug' if level == '0' else 'info'} logging on the "
                    "host slows the step (3 = error is the default)"))
    event = environment.get("ASCEND_GLOBAL_EVENT_ENABLE", "").strip()
    if event == "1":
        out.append(("ASCEND_GLOBAL_EVENT_ENABLE", event, "event logging on the host"))
    return out


@prof_check("PROF019", "Environment recorded with the profile")
def profiled_environment(ctx: ProfContext) -> Iterable[Finding]:
    """Environment variables set for the profiled job that slow it down.

    The torch_npu profiler writes the job's performance-relevant variables into ``profiler_metadata.json``
    (``ENV_VARIABLES``). msprof-analyze's advisor lists every one of them with a suggestion whether set or
    not; this check reports only values that cost time: ``ASCEND_LAUNCH_BLOCKING`` set (operators run one
    at a time, see PROF015), ``ASCEND_GLOBAL_LOG_LEVEL`` 0 or 1 (debug/info logging), and
    ``ASCEND_GLOBAL_EVENT_ENABLE=1``. The other recorded variables (``HCCL_*``, ``PYTORCH_NPU_ALLOC_CONF``,
    ``HOST_CACHE_CAPACITY``, ...) are in the evidence as recorded (a ``.db`` export keeps the same object in
    ``META_DATA``, read when no profiler_metadata.json is beside it). WARN per harmful value; PASS otherwise;
    SKIP without either.

    Fix: ``unset ASCEND_LAUNCH_BLOCKING``; ``export ASCEND_GLOBAL_LOG_LEVEL=3``; ``unset
    ASCEND_GLOBAL_EVENT_ENABLE``.
    """
    recorded = [(rank.label, rank.source.environment) for rank in ctx.ranks if rank.source.environment]
    if not recorded:
        yield _finding("PROF019", Status.SKIP, detail="no profiler_metadata.json or .db META_DATA with "
                       "ENV_VARIABLES (torch_npu profiler output has it)")
        return
    found: Dict[Tuple[str, str, str], List[str]] = {}
    for label, environment in recorded:
        for problem in _environment_problems(environment):
            found.setdefault(problem, []).append(label)
    evidence = {"recorded": {label: {k: v for k, v in env.items() if v != ""} for label, env in recorded[:8]}}
    for (name, value, why), labels in sorted(found.items()):
        yield _finding("PROF019", Status.WARN, name, f"{name}={value} on {_ranks_text(labels)}: {why}",
                       evidence={**evidence, "variable": name, "value": value},
                       fix={"ASCEND_LAUNCH_BLOCKING": "unset ASCEND_LAUNCH_BLOCKING",
                            "ASCEND_GLOBAL_LOG_LEVEL": "export ASCEND_GLOBAL_LOG_LEVEL=3"}.get(
                                name, f"unset {name}"))
    if not found:
        yield _finding("PROF019", Status.PASS, detail=f"no variable that slows the job is set in {len(recorded)} "
                       "rank(s)' recorded environment", evidence=evidence)


@prof_check("PROF020", "Operators compiled on the host at run time", settings=("prof.host_compile_warn_calls",))
def host_compile(ctx: ProfContext) -> Iterable[Finding]:
    """Operators compiled while the job runs (``aclopCompileAndExecute`` on the host).

    Without binary kernels (or with ``jit_compile=True``) each new operator shape is compiled by the host
    during the step: ``AscendCL@aclopCompileAndExecute`` in the host timeline. WARN when a rank has at
    least ``prof.host_compile_warn_calls`` (20, msprof-analyze's ``MAX_OP_COMPILE_NUM``) of them, with their
    total time; PASS with fewer; SKIP without a host timeline.

    Fix: ``torch_npu.npu.set_compile_mode(jit_compile=False)`` with the binary kernel package installed
    (``Ascend-cann-kernels``); fewer distinct shapes (bucketing, see PROF008).
    """
    timelines = _timelines(ctx)
    if not timelines:
        yield _finding("PROF020", Status.SKIP, detail=NO_TIMELINE)
        return
    bar = int(ctx.setting("prof.host_compile_warn_calls"))
    counts = {label: {"calls": t.compiles, "total_us": round(t.compile_us, 3)} for label, t in timelines}
    worst_label = max(counts, key=lambda label: counts[label]["calls"])
    worst = counts[worst_label]
    evidence = {"warn_calls": bar, "ranks": counts}
    if worst["calls"] >= bar:
        yield _finding("PROF020", Status.WARN, detail=f"{worst['calls']} operator compilation(s) on the host "
                       f"({_ms(worst['total_us'])}) on {worst_label}", evidence=evidence,
                       fix="torch_npu.npu.set_compile_mode(jit_compile=False) with the binary kernels installed; "
                           "fewer distinct shapes (bucketing).")
    else:
        yield _finding("PROF020", Status.PASS, detail=f"at most {worst['calls']} operator compilation(s) on the "
                       f"host (bar {bar})", evidence=evidence)


@prof_check("PROF021", "RDMA retransmission suspected", settings=("prof.rdma_retransmission_ms", "prof.top_n"))
def rdma_retransmission(ctx: ProfContext) -> Iterable[Finding]:
    """A collective whose RDMA transfer took seconds on every rank: the mark of a retransmission.

    RoCE retransmits a lost packet after a timeout of seconds, so one operator's RDMA transit time jumps far
    above its usual milliseconds. Per operator (the same step, group and operator across ranks, from
    communication.json or msprof-analyze's cluster_communication.json): when its RDMA transit time is above
    ``prof.rdma_retransmission_ms`` (4 s, msprof-analyze's ``min_retransmission_time``) and its elapsed time
    is above it on every rank (one slow rank alone is ranks out of step, not the network), WARN with the
    operators; PASS otherwise; SKIP without RDMA transfers.

    Fix: the switch and NIC configuration (PFC/ECN, ``HCCL_RDMA_TC`` / ``HCCL_RDMA_SL`` matching the switch
    queues), link errors (``hccn_tool -i N -stat -g``), and the optics of the links used by the listed group.
    """
    bar = float(ctx.setting("prof.rdma_retransmission_ms"))
    by_op: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    rdma = 0
    for rank in ctx.ranks:
        for link in rank.links:
            path = link["path"]
            if "Total Op Info" in path or not path:
                continue
            key = tuple(path[:-1]) if path[-1].isdigit() else tuple(path)  # cluster files end with the rank
            entry = by_op.setdefault(key, {"elapse": [], "rdma_ms": 0.0, "ranks": set()})
            entry["ranks"].add(path[-1] if path[-1].isdigit() else rank.label)
            if link.get("elapse_ms") is not None:
                entry["elapse"].append(float(link["elapse_ms"]))
            if link["transport"].upper() == "RDMA" and link["size_mb"] > 0:
                rdma += 1
                entry["rdma_ms"] = max(entry["rdma_ms"], float(link["transit_ms"]))
    if not rdma:
        yield _finding("PROF021", Status.SKIP, detail="no RDMA transfer in the communication data")
        return
    flagged = sorted(((key, e) for key, e in by_op.items()
                      if e["rdma_ms"] > bar and e["elapse"] and min(e["elapse"]) >= bar),
                     key=lambda item: -item[1]["rdma_ms"])
    evidence = {"threshold_ms": bar, "rdma_transfers": rdma,
                "operators": [{"where": "/".join(key), "rdma_transit_ms": round(e["rdma_ms"], 3),
                               "min_elapse_ms": round(min(e["elapse"]), 3), "ranks": len(e["ranks"])}
                              for key, e in flagged[:ctx.top_n]]}
    if flagged:
        key, worst = flagged[0]
        yield _finding("PROF021", Status.WARN, detail=f"{len(flagged)} collective(s) with an RDMA transfer over "
                       f"{_ms(bar * 1000)} on every rank, worst {_ms(worst['rdma_ms'] * 1000)} ({'/'.join(key)})",
                       evidence=evidence, fix="Check PFC/ECN on the switch and NICs, HCCL_RDMA_TC / HCCL_RDMA_SL, "
                       "link errors (hccn_tool -i N -stat -g) and the optics of that group's links.")
    else:
        slowest = max((e["rdma_ms"] for e in by_op.values()), default=0.0)
        yield _finding("PROF021", Status.PASS, detail=f"{rdma} RDMA transfer(s), the slowest {_ms(slowest * 1000)} "
                       f"(retransmission bar {_ms(bar * 1000)})", evidence=evidence)


# The compute families (PROF022-) register after these, so IDs list in order.
from npudoctor.prof import compute_checks  # noqa: E402,F401
