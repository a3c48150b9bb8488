"""PROF012-PROF018: the advisor's check families (host timeline, AI Core frequency, communication, ranks).

Each check has a firing and a non-firing case. Real data where a public sample carries the events (the
torch_npu and msprof-analyze samples in tests/data/samples/logs); otherwise events in the profiler's own
format, built here (the trace_view.json event shape of the real excerpt, or the .db tables of tests/profdb.py).
Where msprof-analyze's advisor is wrong, a test shows what npudoctor says instead.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from npudoctor.model.finding import Status
from npudoctor.prof.engine import analyze
from tests import profdb, profdirs
from tests.samples import sample_data

TS0 = 1695115378713661.0


def one(result: Any, check_id: str) -> Any:
    (finding,) = [f for f in result.findings if f.id == check_id]
    return finding


def trace_rank(root: Path, events: List[Dict[str, Any]], rank: int = 0) -> Path:
    """A torch_npu rank (real kernel_details and info.json) whose trace_view.json holds the real excerpt plus
    ``events`` (host events in the shape the torch_npu profiler writes: ts as a string, dur in us)."""
    pt = profdirs.torch_npu_rank(root, rank=rank)
    real = json.loads(sample_data("prof_trace_view_excerpt.json"))
    (pt / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text(json.dumps(real + events))
    return pt


def host_event(name: str, start_us: float, duration_us: float, category: str = "python_function") -> Dict[str, Any]:
    return {"ph": "X", "name": name, "pid": 1539618, "tid": 1539618, "ts": f"{start_us:.3f}",
            "dur": duration_us, "cat": category, "args": {}}


def db_rank(root: Path, host: Dict[str, Any]) -> Path:
    return profdb.torch_npu_db_rank(root, rank=0, kernel="prof_kernel_details_pipeutil_matmul_bf16.csv",
                                    extras=False, host=host)


# --- PROF012 DataLoader -----------------------------------------------------------------------------------------

def test_slow_dataloader_fires_on_a_long_next_call_and_names_num_workers(tmp_path: Path) -> None:
    name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    result = analyze([str(trace_rank(tmp_path, [host_event(name, TS0 + i * 300_000, d)
                                                for i, d in enumerate([2100.0, 35_400.5, 1900.0])]))])
    finding = one(result, "PROF012")
    assert finding.status is Status.WARN and "1 of 3" in finding.detail and "35.40 ms" in finding.detail
    assert finding.evidence["single_process"] and "num_workers=0" in finding.fix


def test_fast_dataloader_passes_and_no_dataloader_is_a_skip(tmp_path: Path) -> None:
    name = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
    fast = analyze([str(trace_rank(tmp_path / "a", [host_event(name, TS0, 850.0)]))])
    assert one(fast, "PROF012").status is Status.PASS
    assert one(analyze([str(trace_rank(tmp_path / "b", []))]), "PROF012").status is Status.SKIP
    via_db = analyze([str(db_rank(tmp_path / "c", {"dataloader": [(name, 12_500.0)]}))])
    assert one(via_db, "PROF012").status is Status.WARN


# --- PROF013 garbage collection ---------------------------------------------------------------------------------

def test_garbage_collection_from_gc_record_and_trace(tmp_path: Path) -> None:
    result = analyze([str(db_rank(tmp_path / "db", {"gc": [350.0, 4200.0, 1800.0]}))])
    finding = one(result, "PROF013")
    assert finding.status is Status.WARN and finding.evidence["long_collections"] == 2
    assert finding.evidence["long_total_us"] == pytest.approx(6000.0)
    short = analyze([str(trace_rank(tmp_path / "t", [host_event("GC", TS0, 420.0, category="GC")]))])
    assert one(short, "PROF013").status is Status.PASS
    assert one(analyze([str(trace_rank(tmp_path / "n", []))]), "PROF013").status is Status.SKIP


# --- PROF014 SyncBatchNorm --------------------------------------------------------------------------------------

def test_syncbatchnorm_count(tmp_path: Path) -> None:
    assert one(analyze([str(db_rank(tmp_path / "many", {"syncbn": 48}))]), "PROF014").status is Status.WARN
    assert one(analyze([str(db_rank(tmp_path / "few", {"syncbn": 4}))]), "PROF014").status is Status.PASS


# --- PROF015 launch blocking ------------------------------------------------------------------------------------

def test_synchronisation_after_every_launch_points_at_ascend_launch_blocking(tmp_path: Path) -> None:
    blocking = analyze([str(db_rank(tmp_path / "blocking", {"launch_sync": "LS" * 40}))])
    finding = one(blocking, "PROF015")
    assert finding.status is Status.WARN and "ASCEND_LAUNCH_BLOCKING" in finding.detail
    assert finding.evidence["ranks"]["rank 0"]["share"] == pytest.approx(1.0)
    normal = analyze([str(db_rank(tmp_path / "normal", {"launch_sync": "L" * 60 + "S" + "L" * 20 + "S"}))])
    assert one(normal, "PROF015").status is Status.PASS


def test_trace_view_launches_are_read_in_time_order(tmp_path: Path) -> None:
    events = []
    for i in range(30):  # written out of order, as traces are: one list per thread
        events.append(host_event("AscendCL@aclrtSynchronizeStream", TS0 + i * 100 + 50, 10.0, "cpu_op"))
    for i in range(30):
        events.append(host_event("Node@launch", TS0 + i * 100, 5.0, "cpu_op"))
    assert one(analyze([str(trace_rank(tmp_path, events))]), "PROF015").status is Status.WARN


# --- PROF016 AI Core frequency ------------------------------------------------------------------------------------

def test_aicore_frequency_at_its_rated_value_passes_on_the_real_trace(tmp_path: Path) -> None:
    """The real torch_npu trace records AI Core Freq 1800 MHz; its rated frequency is put in info.json."""
    pt = profdirs.torch_npu_rank(tmp_path, rank=0)
    (pt / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_bytes(
        sample_data("prof_trace_view_torch_npu_with_stack_2026.json"))
    info = pt / profdirs.PROF / "device_0" / "info.json.0"
    info.write_text(info.read_text().replace('"aic_frequency":"1000"', '"aic_frequency":"1800"'))
    finding = one(analyze([str(pt)]), "PROF016")
    assert finding.status is Status.PASS and finding.evidence["ranks"]["rank 0"]["mean_mhz"] == 1800


def test_aicore_frequency_drop_fires(tmp_path: Path) -> None:
    # info.json of the 910 rates the AI Cores at 1000 MHz; the counter drops to 800 MHz for half the time.
    samples = [(TS0, 1000), (TS0 + 10_000, 800), (TS0 + 20_000, 800), (TS0 + 30_000, 1000), (TS0 + 40_000, 1000)]
    finding = one(analyze([str(db_rank(tmp_path, {"freq": samples}))]), "PROF016")
    assert finding.status is Status.WARN and finding.evidence["ranks"]["rank 0"]["drop"] == pytest.approx(0.1)


def test_aicore_frequency_without_a_rated_value_is_a_skip(tmp_path: Path) -> None:
    pt = db_rank(tmp_path, {"freq": [(TS0, 800)]})
    for info in pt.rglob("info.json.0"):
        info.unlink()
    assert one(analyze([str(pt)]), "PROF016").status is Status.SKIP


# --- PROF017 small transfers --------------------------------------------------------------------------------------

def test_small_transfers_fire_on_the_real_cluster_output(tmp_path: Path) -> None:
    profdirs.cluster_output(tmp_path)
    finding = one(analyze([str(tmp_path)]), "PROF017")
    assert finding.status is Status.WARN and finding.evidence["transports"]["SDMA"]["time_share"] > 0.2


def test_small_transfers_by_count_are_not_a_problem_when_they_take_no_time(tmp_path: Path) -> None:
    """The real torch_npu communication.json: 4 of 6 RDMA transfers are under 1 MB, so the advisor's count
    rule (more than 20% of the transfers) reports small packets; they take 0.6% of the RDMA time: PASS."""
    finding = one(analyze([str(profdirs.torch_npu_rank(tmp_path, rank=0))]), "PROF017")
    rdma = finding.evidence["transports"]["RDMA"]
    assert rdma["count_share"] > 0.2 and rdma["time_share"] < 0.02
    assert finding.status is Status.PASS


# --- PROF018 gap between ranks ------------------------------------------------------------------------------------

def test_rank_gap_fires_on_the_real_cluster_step_trace(tmp_path: Path) -> None:
    profdirs.cluster_output(tmp_path)
    finding = one(analyze([str(tmp_path)]), "PROF018")
    assert finding.status is Status.WARN
    assert finding.evidence["gaps"]["free_us"]["highest"] == "rank 1"
    assert finding.evidence["gaps"]["computing_us"]["gap_share"] < 0.05  # computing is even: not the cause


def test_equal_ranks_pass_and_one_rank_is_a_skip(tmp_path: Path) -> None:
    profdirs.torch_npu_rank(tmp_path / "two", rank=0)
    profdirs.torch_npu_rank(tmp_path / "two", rank=1)
    assert one(analyze([str(tmp_path / "two")]), "PROF018").status is Status.PASS
    profdirs.torch_npu_rank(tmp_path / "one", rank=0)
    assert one(analyze([str(tmp_path / "one")]), "PROF018").status is Status.SKIP


# --- where the advisor is wrong -------------------------------------------------------------------------------------

def test_no_op_state_column_is_unknown_where_the_advisor_says_all_dynamic(tmp_path: Path) -> None:
    """msprof-analyze 26.2.0 `advisor all` on the real memory-metrics kernel_details (no OP State column)
    reports "Found all operators are dynamic shape" (measured, see NOTES); npudoctor says it cannot know."""
    finding = one(analyze([str(profdirs.torch_npu_rank(tmp_path, rank=0))]), "PROF008")
    assert finding.status is Status.SKIP and finding.detail.startswith("unknown")


def test_no_bound_judges_every_task_even_on_a_dynamic_shape_profile(tmp_path: Path) -> None:
    """The advisor's no-bound check is skipped on dynamic-shape profiles and returns on the first operator
    (`for op_info in op_list: return self._check_operator(op_info)`). The real PipeUtilization table is all
    dynamic and begins with a bound MatMulV2 (mac ratio 0.96): its no-bound operators are still found."""
    text = sample_data("prof_kernel_details_pipeutil_matmul_bf16.csv").decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1][rows[0].index("Type")] == "MatMulV2" and float(rows[1][rows[0].index("aic_mac_ratio")]) > 0.8
    result = analyze([str(profdirs.torch_npu_rank(tmp_path, rank=0,
                                                  kernel="prof_kernel_details_pipeutil_matmul_bf16.csv"))])
    assert one(result, "PROF008").status is Status.WARN  # dynamic shape everywhere
    bound = one(result, "PROF002")
    assert bound.status is not Status.SKIP and bound.evidence["operators"]
    assert "MatMulV2" not in [o["op_type"] for o in bound.evidence["operators"]]


def test_explain_documents_every_new_check() -> None:
    from npudoctor.model import rulebook
    from npudoctor.prof import checks  # noqa: F401 (registers the PROF checks)

    for number in range(12, 22):
        check: Optional[Any] = rulebook.REGISTRY.get(f"PROF0{number}")
        assert check is not None and len(check.doc.splitlines()) > 5 and "Fix:" in check.doc


# --- PROF019 environment ----------------------------------------------------------------------------------------

def test_recorded_environment_real_metadata_passes_and_harmful_values_warn(tmp_path: Path) -> None:
    """The real profiler_metadata.json records the variables empty: nothing to say (the advisor lists all)."""
    real = analyze([str(profdirs.torch_npu_rank(tmp_path / "real", rank=0))])
    assert one(real, "PROF019").status is Status.PASS
    pt = profdirs.torch_npu_rank(tmp_path / "set", rank=0)
    metadata = json.loads((pt / "profiler_metadata.json").read_text())
    metadata["ENV_VARIABLES"].update({"ASCEND_LAUNCH_BLOCKING": "1", "ASCEND_GLOBAL_LOG_LEVEL": "1"})
    (pt / "profiler_metadata.json").write_text(json.dumps(metadata))
    warned = [f for f in analyze([str(pt)]).findings if f.id == "PROF019"]
    assert sorted(f.subject for f in warned) == ["ASCEND_GLOBAL_LOG_LEVEL", "ASCEND_LAUNCH_BLOCKING"]
    assert all(f.status is Status.WARN for f in warned)
    assert one(analyze([str(db_rank(tmp_path / "db", {}))]), "PROF019").status is Status.SKIP


# --- PROF020 operators compiled on the host -------------------------------------------------------------------

def test_operators_compiled_on_the_host(tmp_path: Path) -> None:
    compile_calls = [host_event("AscendCL@aclopCompileAndExecuteV2", TS0 + i * 5000, 3100.0, "cpu_op")
                     for i in range(24)]
    real = one(analyze([str(trace_rank(tmp_path / "real", []))]), "PROF020")  # the real excerpt has one
    assert real.status is Status.PASS and real.evidence["ranks"]["rank 0"]["calls"] == 1
    finding = one(analyze([str(trace_rank(tmp_path / "jit", compile_calls))]), "PROF020")
    assert finding.status is Status.WARN and finding.evidence["ranks"]["rank 0"]["calls"] == 25
    assert "jit_compile=False" in finding.fix
    assert one(analyze([str(trace_rank(tmp_path / "binary", compile_calls[:2]))]), "PROF020").status is Status.PASS
    assert one(analyze([str(db_rank(tmp_path / "db", {}))]), "PROF020").status is Status.SKIP


# --- PROF021 RDMA retransmission ------------------------------------------------------------------------------

def test_rdma_retransmission_on_every_rank_fires_and_the_real_data_passes(tmp_path: Path) -> None:
    real = one(analyze([str(profdirs.torch_npu_rank(tmp_path / "real", rank=0))]), "PROF021")
    assert real.status is Status.PASS and real.evidence["rdma_transfers"] > 0
    data = json.loads(sample_data("prof_communication_json_torch_npu.json"))
    op = data["step2"]["p2p"]["hcom_send__822_0@13337953553061386822"]
    op["Communication Bandwidth Info"]["RDMA"]["Transit Time(ms)"] = 4213.5  # a lost packet, retransmitted
    op["Communication Time Info"]["Elapse Time(ms)"] = 4215.0
    for number in (0, 1):
        pt = profdirs.torch_npu_rank(tmp_path / "lost", rank=number)
        (pt / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(data))
    finding = one(analyze([str(tmp_path / "lost")]), "PROF021")
    assert finding.status is Status.WARN and finding.evidence["operators"][0]["ranks"] == 2
    op["Communication Time Info"]["Elapse Time(ms)"] = 5.0  # on one rank only: ranks out of step, not the network
    (pt / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(json.dumps(data))
    assert one(analyze([str(tmp_path / "lost")]), "PROF021").status is Status.PASS
