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
from npudoctor.prof.checks import ProfContext, _finding, _ms, _ranks_text, prof_check


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
    with_idle = [(label, t) for label, t in timelines if len(t.free_start)]
    if measured:
        yield _finding("PROF030", Status.SKIP, detail=f"garbage collections are recorded on "
                       f"{_ranks_text(measured)}: PROF013 judges the measured ones")
        return
    if not with_idle:
        yield _finding("PROF030", Status.SKIP, detail="no device idle span of 1 ms or more read (trace_view.json "
                       "Overlap Analysis Free events, or the TASK table of a .db)")
        return
    judged = [(label, t) for label, t in with_idle if len(t.cann_start) or t.host_bounds]
    if not judged:
        yield _finding("PROF030", Status.SKIP, detail="no CANN API call on the host recorded (profiler level "
                       "Level1 or higher records AscendCL calls): a silent host cannot be told")
        return
    min_us = float(ctx.get("quiet_idle_min_us", 200_000))
    max_rate = float(ctx.get("quiet_idle_max_calls_per_s", 100))
    max_share = float(ctx.get("quiet_idle_max_host_share", 0.01))
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
