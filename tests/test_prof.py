"""The profiling doctor on every real profiling sample, laid out the way msprof and torch_npu lay them out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest

from npudoctor.cli import main
from npudoctor.model.finding import Status
from npudoctor.prof.columns import column_map, resolve
from npudoctor.prof.engine import ProfInputError, analyze
from tests import profdirs
from tests.clirunner import cli_runner


def by_id(result: Any, check_id: str) -> List[Any]:
    return [f for f in result.findings if f.id == check_id]


def run_cli(*args: str) -> Any:
    return cli_runner().invoke(main, list(args))


# --- layouts -------------------------------------------------------------------------------------------------

def test_torch_npu_rank_reads_every_table_and_finds_the_ai_cpu_casts(tmp_path: Path) -> None:
    pt = profdirs.torch_npu_rank(tmp_path, rank=0)
    result = analyze([str(tmp_path)])
    (rank,) = result.ranks
    assert rank.label == "rank 0" and rank.source.layout == "torch_npu"
    assert set(rank.tables_read) >= {"kernel_details", "step_trace_time", "memory_record", "operator_memory",
                                     "communication", "api_statistic"}
    # The real file has one row with a missing cell: skipped and said, never a crash.
    assert any("wrong number of cells" in p for p in result.problems)
    (aicpu,) = by_id(result, "PROF001")
    assert aicpu.status is Status.WARN and aicpu.subject == "Cast"
    assert aicpu.evidence["count"] == 2 and aicpu.evidence["max_us"] == pytest.approx(72.8611, abs=1e-3)
    assert aicpu.evidence["total_us"] == pytest.approx(72.1612 + 72.8611, abs=1e-3)
    assert aicpu.evidence["input_dtypes"] == ["INT32"] and "rank 0" in aicpu.evidence["ranks"]
    assert "UINT64" in aicpu.fix  # the Cast-specific hint from checks/prof_aicpu_hints.yaml
    doc = result.to_dict()
    assert doc["schema"] == "npudoctor.prof/1"
    assert doc["ranks"][0]["by_core"] == {"AI_CORE": 4, "AI_CPU": 2, "AI_VECTOR_CORE": 2, "DSA_SQE": 2, "HCCL": 4,
                                          "MIX_AIC": 3, "MIX_AIV": 3}
    assert doc["aicpu_ops"]["Cast"]["count"] == 2
    assert str(pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv") in doc["ranks"][0]["tables"]["kernel_details"]
    # Memory-metrics PMU set: no pipe ratios, no cube utilization, no OP State -> SKIP with the reason.
    assert by_id(result, "PROF002")[0].status is Status.SKIP
    assert "aic_l0a_read_bw" in by_id(result, "PROF002")[0].detail
    assert by_id(result, "PROF003")[0].status is Status.SKIP
    dynamic = by_id(result, "PROF008")[0]
    assert dynamic.status is Status.SKIP and dynamic.detail.startswith("unknown")
    # step_trace_time: Free 69909 of 291698 us, Communication(Not Overlapped) 146614 us.
    idle = by_id(result, "PROF006")[0]
    assert idle.status is Status.WARN
    share = idle.evidence["ranks"]["rank 0"]["mean_free_share"]
    assert share == pytest.approx(69909.5035 / (75174.5746 + 146614.0203 + 69909.5035), abs=1e-3)
    assert idle.evidence["ranks"]["rank 0"]["top_host_apis"][0]["api"] == "aclnnInplaceCopy"  # api_statistic
    assert by_id(result, "PROF009")[0].status is Status.WARN
    memory = by_id(result, "PROF011")[0]
    assert memory.evidence["ranks"]["rank 0"]["peak_reserved_mb"] == pytest.approx(8664.0)
    assert memory.evidence["ranks"]["rank 0"]["component"] == "PTA"
    assert by_id(result, "PROF010")[0].status in (Status.PASS, Status.WARN)


def test_pipe_utilization_kernel_details_judges_bound_cube_and_dynamic_shape(tmp_path: Path) -> None:
    profdirs.torch_npu_rank(tmp_path, rank=3, kernel="prof_kernel_details_pipeutil_matmul_bf16.csv", extras=False)
    result = analyze([str(tmp_path)])
    bound = by_id(result, "PROF002")[0]
    assert bound.status is not Status.SKIP
    assert "FlashAttentionScoreGrad" in [o["op_type"] for o in bound.evidence["operators"]]
    cube = by_id(result, "PROF003")[0]
    assert cube.status in (Status.PASS, Status.WARN) and 0 < cube.evidence["cube_utilization_pct"] < 100
    dynamic = by_id(result, "PROF008")[0]  # every task in this file is "dynamic"
    assert dynamic.status is Status.WARN and dynamic.evidence["dynamic_share"]["rank 3"] == pytest.approx(1.0)
    assert by_id(result, "PROF001")[0].status is Status.PASS
    top = {f.subject: f for f in by_id(result, "PROF007")}
    assert set(top) == {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC"}
    assert top["AI_CORE"].evidence["operators"][0]["op_type"] == "MatMulV3"


def test_several_ranks_one_line_each_and_findings_name_the_ranks(tmp_path: Path) -> None:
    profdirs.torch_npu_rank(tmp_path, rank=0)
    profdirs.torch_npu_rank(tmp_path, rank=1, kernel="prof_kernel_details_pipeutil_matmul_bf16.csv")
    result = analyze([str(tmp_path)])
    assert [r.label for r in result.ranks] == ["rank 0", "rank 1"]
    assert by_id(result, "PROF001")[0].evidence["ranks"].keys() == {"rank 0"}
    assert set(by_id(result, "PROF006")[0].evidence["ranks"]) == {"rank 0", "rank 1"}
    out = run_cli("prof", "analyze", str(tmp_path))
    rows = [line for line in out.stdout.splitlines() if line.startswith(("rank 0", "rank 1"))]
    assert len(rows) == 2 and "torch_npu" in rows[0]


def test_msprof_collection_op_summary_with_device_id(tmp_path: Path) -> None:
    profdirs.msprof_collection(tmp_path)
    result = analyze([str(tmp_path)])
    (rank,) = result.ranks
    assert rank.source.layout == "msprof" and rank.device == "0"
    assert rank.kernel is not None and rank.kernel.table == "kernel_details" and rank.kernel.rows == 20
    assert result.to_dict()["ranks"][0]["by_core"] == {"AI_VECTOR_CORE": 20}
    block = by_id(result, "PROF004")[0]  # Slice on 40 blocks, info.json says 32 AI Cores and no vector cores
    assert block.evidence["ai_core_num"] == 32
    assert by_id(result, "PROF001")[0].status is Status.PASS


def test_legacy_msprof_timeline_only(tmp_path: Path) -> None:
    profdirs.msprof_legacy(tmp_path)
    result = analyze([str(tmp_path)])
    (rank,) = result.ranks
    assert rank.source.layout == "msprof-legacy" and rank.kernel is not None and rank.kernel.table == "timeline"
    (aicpu,) = by_id(result, "PROF001")
    assert aicpu.subject == "DropoutGenMask" and aicpu.evidence["count"] == 2
    assert aicpu.evidence["max_us"] == pytest.approx(621.83)


def test_cluster_output_and_a_single_csv(tmp_path: Path) -> None:
    profdirs.cluster_output(tmp_path)
    result = analyze([str(tmp_path)])
    assert [r.label for r in result.ranks] == [f"rank {i}" for i in range(8)]  # one line per rank
    communication = by_id(result, "PROF009")[0]
    assert communication.status is Status.WARN and set(communication.evidence["ranks"]) == {
        f"rank {i}" for i in range(8)}
    assert "rank 0" in communication.detail  # 683731 of 1754646 us not overlapped
    assert by_id(result, "PROF010")[0].status in (Status.PASS, Status.WARN, Status.SKIP)
    assert by_id(result, "PROF001")[0].status is Status.SKIP  # no kernel table: not judged, not passed
    single = profdirs.put(tmp_path / "copy", {"kernel_details.csv": "prof_kernel_details_memory_metrics.csv"})
    result = analyze([str(single / "kernel_details.csv")])
    assert by_id(result, "PROF001")[0].subject == "Cast"
    assert by_id(result, "PROF004")[0].status is Status.SKIP  # no info.json: core count unknown


# --- column maps ----------------------------------------------------------------------------------------------

def test_column_maps_resolve_both_spellings_and_keep_extra_columns() -> None:
    cmap = column_map("kernel_details")
    torch_header = ["Step Id", "Name", "Type", "Accelerator Core", "Duration(us)", "Block Dim", "new_metric(x)"]
    msprof_header = ["Device_id", "Op Name", "OP Type", "Task Type", "Task Duration(us)", "Block Num"]
    for header in (torch_header, msprof_header):
        resolved = resolve(header, cmap)
        assert resolved.has("op_name", "op_type", "core_type", "duration_us", "block_dim")
    assert resolve(torch_header, cmap).extra == ("new_metric(x)",)
    assert resolve([" accelerator core ", "DURATION(US)"], cmap).has("core_type", "duration_us")


def test_missing_required_column_skips_with_the_reason(tmp_path: Path) -> None:
    body = (profdirs.sample_data("prof_kernel_details_memory_metrics.csv").decode()
            .replace("Accelerator Core", "Engine", 1))
    path = tmp_path / "kernel_details.csv"
    path.write_text(body)
    result = analyze([str(path)])
    aicpu = by_id(result, "PROF001")[0]
    assert aicpu.status is Status.SKIP and "Accelerator Core" in aicpu.detail


def test_steps_keeps_the_last_steps(tmp_path: Path) -> None:
    body = profdirs.sample_data("prof_kernel_details_pipeutil_matmul_bf16.csv").decode().splitlines(True)
    # Two steps: the real rows as step 19, and again as step 20 with the AI Core tasks only.
    later = [line.replace("19,", "20,", 1) for line in body[1:]]
    (tmp_path / "kernel_details.csv").write_text("".join(body + later))
    everything = analyze([str(tmp_path / "kernel_details.csv")])
    last = analyze([str(tmp_path / "kernel_details.csv")], steps=1)
    assert everything.ranks[0].groups["n"].sum() == 2 * last.ranks[0].groups["n"].sum()


# --- bad input ------------------------------------------------------------------------------------------------

def test_nothing_readable_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ProfInputError):
        analyze([str(tmp_path / "missing")])
    (tmp_path / "kernel_details.csv").write_bytes(b"\x00\x01binary" * 100)
    with pytest.raises(ProfInputError, match="binary"):
        analyze([str(tmp_path)])
    out = run_cli("prof", "analyze", str(tmp_path))
    assert out.exit_code == 2 and out.stderr.startswith("npudoctor: error:") and "Traceback" not in out.stderr


def test_a_table_of_foreign_columns_says_why(tmp_path: Path) -> None:
    (tmp_path / "kernel_details.csv").write_text("a,b\n1,2\n")
    out = run_cli("prof", "analyze", str(tmp_path / "kernel_details.csv"))
    assert out.exit_code == 2 and "no rows with the columns" in out.stderr, out.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_and_dev_zero_are_refused_without_hanging(tmp_path: Path) -> None:
    out_dir = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out_dir.mkdir(parents=True)
    os.mkfifo(out_dir / "kernel_details.csv")
    (out_dir / "op_statistic.csv").symlink_to("/dev/zero")
    out = run_cli("prof", "analyze", str(tmp_path))
    assert out.exit_code == 2 and "not a regular file" in out.stderr


# --- outputs and exit codes -----------------------------------------------------------------------------------

def test_formats_and_fail_on(tmp_path: Path) -> None:
    profdirs.torch_npu_rank(tmp_path, rank=0)
    text = run_cli("prof", "analyze", str(tmp_path))
    assert text.exit_code == 0, text.stderr
    assert "PROF001" in text.stdout
    assert " ".join(text.stdout.splitlines()[-2:]).endswith(
        "5 warnings in 1 rank: PROF001 Cast 2 task(s) of >= 20 us on the AI CPU, total 145.0 us...; 17 checks "
        "could not apply")
    assert "\x1b[" not in text.stdout
    assert max(len(line) for line in text.stdout.splitlines()) <= 80
    assert run_cli("prof", "analyze", str(tmp_path), "--fail-on", "warn").exit_code == 1
    doc = json.loads(run_cli("prof", "analyze", str(tmp_path), "--format", "json").stdout)
    assert doc["schema"] == "npudoctor.prof/1" and {"tables", "by_core", "aicpu_ops"} <= set(doc["ranks"][0])
    assert doc["aicpu_ops"]["Cast"] == {"count": 2, "total_us": pytest.approx(145.022), "max_us": 72.861,
                                        "ranks": ["rank 0"]}
    junit = run_cli("prof", "analyze", str(tmp_path), "--format", "junit").stdout
    # One testcase per check (a name stable across machines, as `check --format junit`); subjects in properties.
    assert 'name="npudoctor.prof"' in junit and 'name="PROF001"' in junit
    assert '<property name="subject Cast" value="warn" />' in junit
    github = run_cli("prof", "analyze", str(tmp_path), "--format", "github").stdout
    assert github.startswith("::warning title=PROF001")


def test_check_with_prof_adds_the_verdicts_and_explain_finds_them(tmp_path: Path) -> None:
    profdirs.torch_npu_rank(tmp_path, rank=0)
    out = run_cli("check", "--only", "PCI001,PROF", "--root", str(tmp_path), "--prof", str(tmp_path),
                  "--format", "json")
    doc = json.loads(out.stdout)
    assert any(f["id"] == "PROF001" and f["subject"] == "Cast" for f in doc["findings"])
    # --only and --skip choose among the PROF IDs as among the node checks (issue 17 point 2).
    only = json.loads(run_cli("check", "--only", "PROF001", "--root", str(tmp_path), "--prof", str(tmp_path),
                              "--format", "json").stdout)
    assert {f["id"] for f in only["findings"]} == {"PROF001"}
    skipped = json.loads(run_cli("check", "--only", "PCI001,PROF", "--skip", "PROF001", "--root", str(tmp_path),
                                 "--prof", str(tmp_path), "--format", "json").stdout)
    assert "PROF001" not in {f["id"] for f in skipped["findings"]} and "PROF002" in {
        f["id"] for f in skipped["findings"]}
    left_out = json.loads(run_cli("check", "--only", "PCI001", "--root", str(tmp_path), "--prof", str(tmp_path),
                                  "--format", "json").stdout)
    assert {f["id"] for f in left_out["findings"]} == {"PCI001"}
    explained = run_cli("explain", "PROF001")
    assert explained.exit_code == 0 and "AI CPU" in explained.stdout


def test_check_with_a_mistyped_prof_stops_before_the_checks(tmp_path: Path) -> None:
    out = run_cli("check", "--root", str(tmp_path), "--prof", str(tmp_path / "no-such"))
    assert out.exit_code == 2 and out.stderr.startswith("npudoctor: error: --prof"), out.stderr
    assert out.stdout == ""  # no check ran (their findings would stream to stdout first)


def test_check_without_prof_imports_no_pandas(tmp_path: Path) -> None:
    from tests.fakenode import FakeNode

    node = FakeNode(tmp_path)  # something to check whatever python3 is on PATH: never "nothing checked"
    node.file("/usr/local/Ascend/driver/version.info", "Version=23.0.7\n")
    code = ("import sys\nfrom npudoctor.cli import main\n"
            f"try:\n    main(['check', '--root', {str(node.root)!r}, '--format', 'json'])\n"
            "except SystemExit as exit:\n    print('exit', exit.code)\n"
            "print(sorted(m for m in ('pandas', 'pyarrow', 'npudoctor.prof') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    assert lines[-2] in ("exit 0", "exit 1") and lines[-1] == "[]", out.stdout[-2000:] + out.stderr


# --- --logs: the log doctor's fallbacks merged --------------------------------------------------------------

def test_logs_fallbacks_merge_into_prof001(tmp_path: Path) -> None:
    profdirs.torch_npu_rank(tmp_path / "prof", rank=0)
    logs = profdirs.put(tmp_path / "logs", {"console.txt": "stdout_torch_npu_cpu_fallback_ERR01007.txt"})
    result = analyze([str(tmp_path / "prof")], logs_dirs=[str(logs)])
    from_logs = [f for f in by_id(result, "PROF001") if "logs" in f.evidence]
    assert from_logs and all(f.evidence["logs"][0]["kind"] for f in from_logs)


def test_pandas_only_reader_gives_the_same_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from npudoctor.prof import kernels, tables

    # (prof_kernel_details_memory_metrics.csv is left out: its one short row is skipped by Arrow, padded by pandas.)
    for sample in ("prof_kernel_details_pipeutil_matmul_bf16.csv", "prof_op_summary_pipeutil_aiv_slice_2026.csv"):
        path = profdirs.put(tmp_path, {"kernel_details.csv": sample}) / "kernel_details.csv"
        arrow = kernels.aggregate_csv("kernel_details", [str(path)], 20, 0.8).groups
        monkeypatch.setattr(tables, "USE_ARROW", False)
        plain = kernels.aggregate_csv("kernel_details", [str(path)], 20, 0.8).groups
        monkeypatch.setattr(tables, "USE_ARROW", True)
        order = ["core", "op_type", "block_dim", "long", "nobound", "dtypes"]
        left = arrow.sort_values(order).reset_index(drop=True)
        right = plain.sort_values(order).reset_index(drop=True)
        assert left[order].astype(str).equals(right[order].astype(str)), sample
        assert list(left["n"]) == list(right["n"]) and left["dur_sum"].round(6).equals(right["dur_sum"].round(6))


def test_trace_view_alone_gives_the_device_tasks(tmp_path: Path) -> None:
    """A torch_npu folder with only trace_view.json (kernel_details not exported) still shows the tasks."""
    pt = tmp_path / "localhost_7_20240102_ascend_pt"
    profdirs.put(pt / "ASCEND_PROFILER_OUTPUT", {"trace_view.json": "prof_trace_view_excerpt.json"})
    result = analyze([str(tmp_path)])
    (rank,) = result.ranks
    assert rank.kernel is not None and rank.kernel.table == "trace_view" and rank.kernel.rows == 12
    assert sum(result.to_dict()["ranks"][0]["by_core"].values()) == 12


def test_sample_based_utilization(tmp_path: Path) -> None:
    prof = profdirs.msprof_collection(tmp_path / "pipe")
    profdirs.put(prof / "mindstudio_profiler_output", {
        f"ai_core_utilization_{profdirs.TS}.csv": "prof_ai_core_utilization_pipeutil_constructed.csv"})
    finding = by_id(analyze([str(tmp_path / "pipe")]), "PROF005")[0]
    assert finding.status is Status.WARN and "mte2_ratio 0.51" in finding.detail
    assert [c.split()[-1] for c in finding.evidence["cores_below_half_of_busiest"]] == ["Core2"]
    prof = profdirs.msprof_collection(tmp_path / "memory")
    profdirs.put(prof / "mindstudio_profiler_output", {
        f"ai_core_utilization_{profdirs.TS}.csv": "prof_ai_core_utilization_memoryaccess_constructed.csv"})
    finding = by_id(analyze([str(tmp_path / "memory")]), "PROF005")[0]
    assert finding.status is Status.SKIP and "read_main_memory_datas(KB)" in finding.detail
    assert by_id(analyze([str(tmp_path / "memory" / profdirs.PROF)]), "PROF005")[0].status is Status.SKIP


def test_logs_fallback_for_the_same_operator_joins_its_finding(tmp_path: Path) -> None:
    profdirs.msprof_legacy(tmp_path / "prof")  # AI CPU DropoutGenMask tasks
    logs = profdirs.put(tmp_path / "logs",
                        {"plog-1_20230713074107861.log": "plog_debug_engine_placement_constructed.log"})
    result = analyze([str(tmp_path / "prof")], logs_dirs=[str(logs)])
    (joined,) = [f for f in by_id(result, "PROF001") if f.subject == "DropoutGenMask"]
    assert joined.evidence["count"] == 2 and joined.evidence["logs"][0]["op_type"] == "DropOutGenMask"
    assert "the logs show it too" in joined.detail
    assert not [f for f in by_id(result, "PROF001") if f.subject.lower() == "dropoutgenmask" and f is not joined]


def test_gbk_cells_and_hostile_file_names(tmp_path: Path) -> None:
    from npudoctor.prof.layout import table_of

    body = profdirs.sample_data("prof_kernel_details_pipeutil_matmul_bf16.csv")
    (tmp_path / "kernel_details.csv").write_bytes(body.replace(b"aclnnMatmul_MatMulCommon_MatMulV2",
                                                               "矩阵乘".encode("gbk")))
    result = analyze([str(tmp_path / "kernel_details.csv")])
    assert result.ranks[0].kernel is not None and result.ranks[0].kernel.rows == 29
    assert table_of("op_summary" + "_1" * 20000 + "x.csv") is None  # no backtracking blow-up
    assert table_of("op_summary_0_1_20230818142704.csv") == "kernel_details"
    assert table_of("op_summary_slice_0_20240101120000.csv") == "kernel_details"


def test_every_other_task_source(tmp_path: Path) -> None:
    """task_time CSV alone, a legacy merged timeline alone, a with_stack trace_view alone."""
    prof = tmp_path / "a" / profdirs.PROF
    profdirs.put(prof / "mindstudio_profiler_output", {f"task_time_{profdirs.TS}.csv": "prof_task_time_csv_2026.csv"})
    (rank,) = analyze([str(tmp_path / "a")]).ranks
    assert rank.kernel is not None and rank.kernel.table == "task_time"
    by_core = analyze([str(tmp_path / "a")]).to_dict()["ranks"][0]["by_core"]
    assert by_core["AI_VECTOR_CORE"] == 20 and "PROFILING_ENABLE" in by_core
    legacy = tmp_path / "b" / "PROF_000001_20230818142704322_COJGGGCANRMICFBC" / "device_0"
    profdirs.put(legacy, {"info.json.0": "prof_msprof_device_info_json_910.json"})
    profdirs.put(legacy / "timeline", {"msprof_0_2_1.json": "prof_msprof_timeline_excerpt_910.json"})
    result = analyze([str(tmp_path / "b")])
    assert result.ranks[0].kernel is not None and result.ranks[0].kernel.table == "trace_view"
    assert by_id(result, "PROF001")[0].subject == "DropoutGenMask"
    pt = tmp_path / "c" / "host_1_20260506_ascend_pt"
    profdirs.put(pt / "ASCEND_PROFILER_OUTPUT", {"trace_view.json": "prof_trace_view_torch_npu_with_stack_2026.json"})
    by_core = analyze([str(tmp_path / "c")]).to_dict()["ranks"][0]["by_core"]
    assert by_core == {"PROFILING_DISABLE": 1, "PROFILING_ENABLE": 1}


def test_single_operator_profiler_csv_is_not_taken_for_a_run(tmp_path: Path) -> None:
    """`msprof op`'s per-block PipeUtilization.csv is another tool's output: refused with the reason."""
    path = profdirs.put(tmp_path, {"PipeUtilization.csv": "prof_msprof_op_PipeUtilization_per_block.csv"})
    out = run_cli("prof", "analyze", str(path / "PipeUtilization.csv"))
    assert out.exit_code == 2 and "neither its name nor its header row is a profiling table's" in out.stderr


def test_thresholds_come_from_the_node_profile(tmp_path: Path) -> None:
    from npudoctor.api import load_profile
    from npudoctor.model.profile import NodeProfile, deep_merge

    profdirs.torch_npu_rank(tmp_path, rank=0)
    base = load_profile()
    assert by_id(analyze([str(tmp_path)], base), "PROF006")[0].status is Status.WARN  # 24% idle, bar 10%
    relaxed = NodeProfile("site", deep_merge(base.data, {"prof": {"free_warn_share": 0.5, "aicpu_fail_share": 0.001,
                                                                  "min_task_us": 100}}))
    result = analyze([str(tmp_path)], relaxed)
    assert by_id(result, "PROF006")[0].status is Status.PASS
    assert by_id(result, "PROF001")[0].status is Status.PASS  # the 72 us Casts are under a 100 us floor
    strict = NodeProfile("site", deep_merge(base.data, {"prof": {"aicpu_fail_share": 0.001}}))
    assert by_id(analyze([str(tmp_path)], strict), "PROF001")[0].status is Status.FAIL
