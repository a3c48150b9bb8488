"""PROF030-PROF039: the advisor's timeline and communication families npudoctor had not judged (suspected GC,
fused-API replacements, bandwidth contention, transfer alignment, slow links by their gap, pipeline stages).

Real data where a public sample carries it (tests/data/samples/logs: the torch_npu trace_view.json excerpt,
communication.json, the msprof-analyze cluster outputs); where a case needs events no public sample has, they
are added to the real ones in the profiler's own shape and the test says so (CONSTRUCTED).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Dict, List

import pytest

from npudoctor import api
from npudoctor.model.finding import Status
from npudoctor.model.profile import NodeProfile, deep_merge
from npudoctor.prof.engine import analyze
from tests import profdb, profdirs
from tests.samples import sample_data

PIPEUTIL = "prof_kernel_details_pipeutil_matmul_bf16.csv"


def one(result: Any, check_id: str) -> Any:
    (finding,) = [f for f in result.findings if f.id == check_id]
    return finding


def run(paths: List[Path], **settings: Any) -> Any:
    profile = NodeProfile("case", deep_merge(api.load_profile().data, {"prof": settings}))
    return analyze([str(p) for p in paths], profile)


def real_trace() -> List[Dict[str, Any]]:
    return json.loads(sample_data("prof_trace_view_excerpt.json"))


def last_host_end(events: List[Dict[str, Any]]) -> float:
    return max(float(e["ts"]) + float(e.get("dur", 0)) for e in events
               if e.get("ph") == "X" and str(e.get("name", "")).startswith("AscendCL@"))


def trace_with(root: Path, events: List[Dict[str, Any]]) -> Path:
    pt = profdirs.torch_npu_rank(root, rank=0)
    (pt / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text(json.dumps(events))
    return pt


def silent_span_trace(root: Path, host_calls_inside: int = 0, gc: bool = False) -> Path:
    """CONSTRUCTED on the real excerpt: after its last host call, 250 ms of device idle (an Overlap Analysis
    ``Free`` event, the real ones' shape) with ``host_calls_inside`` AscendCL calls in it, then one more call
    (the host wakes and synchronises)."""
    events = real_trace()
    free = next(e for e in events if e.get("name") == "Free")
    start = last_host_end(events) + 10.0
    call = next(e for e in events if e.get("name") == "AscendCL@aclrtSynchronizeStream")
    events.append({**free, "ts": f"{start:.3f}", "dur": 250_000.0})
    for i in range(host_calls_inside):
        events.append({**call, "ts": f"{start + 100 + i * 5000:.3f}", "dur": 200.0})
    events.append({**call, "ts": f"{start + 250_020:.3f}", "dur": 12.5})
    if gc:
        events.append({"ph": "X", "name": "GC", "cat": "GC", "pid": 1, "tid": 1, "ts": f"{start:.3f}",
                       "dur": 240_000.0})
    return trace_with(root, events)


# --- PROF030 device idle with a silent host ----------------------------------------------------------------------

def test_real_trace_idle_spans_have_host_activity(tmp_path: Path) -> None:
    pt = trace_with(tmp_path, real_trace())
    default = one(run([pt]), "PROF030")
    assert default.status is Status.PASS and "no device idle span of >= 200.00 ms" in default.detail
    # the real excerpt's longest Free (1.09 ms) holds 37 AscendCL calls (aclopCompileAndExecute among them)
    lowered = one(run([pt], quiet_idle_min_us=1000), "PROF030")
    assert lowered.status is Status.PASS and lowered.evidence["long_idle_spans"] == 1
    assert lowered.evidence["quiet_spans"] == []


def test_silent_host_during_a_long_idle_fires(tmp_path: Path) -> None:
    finding = one(run([silent_span_trace(tmp_path)]), "PROF030")
    assert finding.status is Status.WARN and "250.00 ms" in finding.detail and "garbage collection" in finding.detail
    (span,) = finding.evidence["quiet_spans"]
    assert span["host_calls"] == 0 and span["duration_us"] == 250_000.0
    assert "gc_detect_threshold" in finding.fix


def test_a_busy_host_or_a_measured_gc_does_not_fire(tmp_path: Path) -> None:
    busy = one(run([silent_span_trace(tmp_path / "busy", host_calls_inside=40)]), "PROF030")
    assert busy.status is Status.PASS and busy.evidence["long_idle_spans"] == 1
    # 24 calls in 250 ms is under 100 a second, but they take 4.8 ms: 1.9% of the span, over the 1% bar
    few = one(run([silent_span_trace(tmp_path / "few", host_calls_inside=24)]), "PROF030")
    assert few.status is Status.PASS
    measured = one(run([silent_span_trace(tmp_path / "gc", gc=True)]), "PROF030")
    assert measured.status is Status.SKIP and "PROF013" in measured.detail


def test_idle_outside_the_recorded_host_time_is_not_judged(tmp_path: Path) -> None:
    """msprof-analyze says "Conjectured GC" on this .db (the real pipeutil kernel rows, whose 2.67 s gap lies
    outside the host calls it carries, which come from the trace excerpt of another run): no host record there
    proves nothing, so npudoctor judges only idle spans the host record covers."""
    pt = profdb.torch_npu_db_rank(tmp_path, rank=0, kernel=PIPEUTIL)
    finding = one(run([pt]), "PROF030")
    assert finding.status is Status.PASS and finding.evidence["outside_host_record"] == 1
    assert "outside the recorded host time" in finding.detail


def db_with_silent_host(root: Path) -> Path:
    """The real pipeutil kernel rows as a .db, with CONSTRUCTED CANN calls only at the first task's start and the
    last task's end: a host recorded across the run that called nothing in the real 2.67 s device gap."""
    pt = profdb.torch_npu_db_rank(root, rank=0, kernel=PIPEUTIL, extras=False)
    (path,) = (pt / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")
    conn = sqlite3.connect(path)
    first, last = conn.execute("SELECT MIN(startNs), MAX(endNs) FROM TASK").fetchone()
    conn.execute("INSERT INTO STRING_IDS VALUES (900001, 'aclrtSynchronizeStream')")
    conn.executemany("INSERT INTO CANN_API (startNs, endNs, type, name) VALUES (?, ?, ?, 900001)",
                     [(first - 5000, first - 1000, profdb.API_TYPES["acl"]),
                      (last + 1000, last + 5000, profdb.API_TYPES["acl"])])
    conn.commit()
    conn.close()
    return pt


def test_db_task_gaps_with_a_silent_host_fire(tmp_path: Path) -> None:
    finding = one(run([db_with_silent_host(tmp_path)]), "PROF030")
    assert finding.status is Status.WARN, finding.detail
    (span,) = finding.evidence["quiet_spans"]
    assert 2_600_000 < span["duration_us"] < 2_700_000 and span["host_calls"] == 0
    assert finding.evidence["sources"] == ["gaps between the device tasks of the .db"]


@pytest.mark.parametrize("free", [{"ts": "x", "dur": 300000}, {"ts": [1], "dur": 300000}, {"dur": "1e999"},
                                  {"dur": -5}, {"dur": None}, {"args": "Free"}, {"name": ["Free"]}])
def test_odd_free_events_are_skipped_not_a_traceback(tmp_path: Path, free: Dict[str, Any]) -> None:
    events = real_trace()
    base = {"ph": "X", "name": "Free", "pid": 1, "tid": 3, "ts": "1704161511422000.0", "dur": 300000.0}
    pt = trace_with(tmp_path, [*events, {**base, **free}])
    result = run([pt])
    finding = one(result, "PROF030")
    # unreadable times are dropped; the one readable 300 ms span runs past the last host call: not judged
    assert finding.status is Status.PASS and finding.evidence["long_idle_spans"] == 0
    json.dumps(result.to_dict(), allow_nan=False)


def test_no_host_calls_is_a_skip_and_no_idle_is_a_skip(tmp_path: Path) -> None:
    events = [e for e in real_trace() if not str(e.get("name", "")).startswith("AscendCL@")]
    finding = one(run([trace_with(tmp_path / "a", events)]), "PROF030")
    assert finding.status is Status.SKIP and "CANN API" in finding.detail
    no_free = [e for e in real_trace() if e.get("name") != "Free"]
    assert one(run([trace_with(tmp_path / "b", no_free)]), "PROF030").status is Status.SKIP
