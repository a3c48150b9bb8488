"""PROF022-PROF026: per-operator compute efficiency (cube, flash attention, vector), repeated operator sequences
to fuse, graph fusion.

Real data: the torch_npu PipeUtilization kernel_details (MatMul, FlashAttentionScore(Grad), Add rows) and the
msprof op_summary of 20 Slice tasks, both in tests/data/samples/logs. Where a test changes a real row (to show
a case the real files lack, or where msprof-analyze's advisor is wrong), it says which cell it changed.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

from npudoctor.model.finding import Status
from npudoctor.prof import compute_checks, sequences, tables
from npudoctor.prof.engine import analyze
from tests import profdb, profdirs
from tests.samples import sample_data

PIPE = "prof_kernel_details_pipeutil_matmul_bf16.csv"
SLICES = "prof_op_summary_pipeutil_aiv_slice_2026.csv"
MOE = "prof_op_summary_moe_grouped_matmul_static_2026.csv"  # a real MoE FFN: GroupedMatmul on MIX_AIC


def one(result: Any, check_id: str) -> Any:
    (finding,) = [f for f in result.findings if f.id == check_id]
    return finding


def rows_of(sample: str) -> List[Dict[str, str]]:
    return list(csv.DictReader(io.StringIO(sample_data(sample).decode())))


def write_rows(path: Path, rows: List[Dict[str, str]]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def pipe_rank(root: Path, change: Callable[[List[Dict[str, str]]], List[Dict[str, str]]] = lambda r: r) -> Path:
    """The real PipeUtilization rank, its kernel_details rows passed through ``change`` first."""
    pt = profdirs.torch_npu_rank(root, rank=0, kernel=PIPE, extras=False)
    rows = [r for r in rows_of(PIPE) if None not in r]  # the one real row with a cell too many is left out
    write_rows(pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", change(rows))
    return pt


def slices(root: Path, change: Callable[[List[Dict[str, str]]], List[Dict[str, str]]] = lambda r: r) -> Path:
    prof = profdirs.msprof_collection(root)
    (table,) = (prof / "mindstudio_profiler_output").glob("op_summary_*.csv")
    write_rows(table, change(rows_of(SLICES)))
    return prof


def by_name(entries: List[Dict[str, Any]], op_name: str) -> Dict[str, Any]:
    (entry,) = [e for e in entries if e["op_name"] == op_name]
    return entry


# --- shapes --------------------------------------------------------------------------------------------------

def test_shapes_cells_parse_as_the_profiler_writes_them() -> None:
    assert compute_checks.parse_shapes('"81920,4096;8192,512"') == [[81920, 4096], [8192, 512]]
    assert compute_checks.parse_shapes('"4096,2,512;;4096,4096;"') == [[4096, 2, 512], None, [4096, 4096], None]
    assert compute_checks.parse_shapes(";") == [None, None]
    assert compute_checks.parse_shapes("N/A") == [None] and compute_checks.parse_shapes("") == []
    assert compute_checks.parse_shapes("1," * 5000) == []  # longer than any signature: not parsed
    assert len(compute_checks.parse_shapes(";" * 1000)) == compute_checks.MAX_TENSORS


# --- PROF022 cube --------------------------------------------------------------------------------------------

def test_cube_shapes_are_judged_from_time_weighted_ratios_and_inner_axes(tmp_path: Path) -> None:
    finding = one(analyze([str(pipe_rank(tmp_path))]), "PROF022")
    assert finding.status is Status.WARN
    operators = finding.evidence["operators"]
    v2 = by_name(operators, "aclnnMatmul_MatMulCommon_MatMulV2")
    assert v2["pipes"] == "mac and mte2-bound" and v2["problems"] == []
    # the mean is weighted by task time, from the real rows
    rows = [r for r in rows_of(PIPE) if r["Name"] == "aclnnMatmul_MatMulCommon_MatMulV2"]
    weighted = sum(float(r["Duration(us)"]) * float(r["aic_mac_ratio"]) for r in rows) / sum(
        float(r["Duration(us)"]) for r in rows)
    assert v2["ratios"]["aic_mac_ratio"] == pytest.approx(weighted, abs=1e-4) and v2["count"] == len(rows)
    v3 = by_name(operators, "aclnnMatmul_MatMulV3Common_MatMulV3")
    assert v3["pipes"] == "below the bars" and v3["inner_axes"] == [1536, 4096]
    v5 = by_name(operators, "aclnnMatmul_MatMulV3Common_MatMulV5")
    assert any("15365" in p and "256" in p for p in v5["problems"])
    assert "MatMulV3" in finding.detail and "15365" in finding.detail


def test_a_mac_bound_matmul_is_efficient_whatever_its_mte2_ratio(tmp_path: Path) -> None:
    """The advisor compares aic_mac_ratio with the mte2 bar (0.95): a matmul at mac 0.9 with mte2 0.5 is
    "room for optimisation 45%" there. Changed cells: MatMulV3 rows' aic_mac_ratio 0.9, aic_mte2_ratio 0.5."""
    def mac_bound(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
        for row in rows:
            if row["Name"] == "aclnnMatmul_MatMulV3Common_MatMulV3":
                row["aic_mac_ratio"], row["aic_mte2_ratio"] = "0.9", "0.5"
        return rows

    finding = one(analyze([str(pipe_rank(tmp_path, mac_bound))]), "PROF022")
    v3 = by_name(finding.evidence["operators"], "aclnnMatmul_MatMulV3Common_MatMulV3")
    assert v3["pipes"] == "mac-bound" and v3["problems"] == []


def test_batched_and_nz_matmuls_have_their_inner_axes_read() -> None:
    def shape(inputs: str) -> Any:
        return compute_checks.OpShape("BatchMatMulV2", "bmm", "AI_CORE", inputs, "", "", 1, 1.0, 1.0, {}, ())

    assert compute_checks.cube_inner_axes(shape('"8,1024,4096;8,4096,1000"')) == (4096, 1000)  # advisor: unaffine
    assert compute_checks.cube_inner_axes(shape("16,4,16,16;16,16,16,16")) == (64, 256)  # FRACTAL_NZ
    assert compute_checks.cube_inner_axes(shape("2,8,1024,4096;2,8,4096,1000")) == (4096, 1000)  # ND, 4-D
    assert compute_checks.cube_inner_axes(shape("1024;1024")) is None


def test_cube_check_judges_a_db_export_like_its_csv(tmp_path: Path) -> None:
    # COMPUTE_TASK_INFO's shapes and TASK_PMU_INFO's ratios give the .db the CSV's cube shapes (issue 20 point 1).
    finding = one(analyze([str(profdb.torch_npu_db_rank(tmp_path / "db", rank=0, kernel=PIPE, extras=False))]),
                  "PROF022")
    csv = one(analyze([str(pipe_rank(tmp_path / "csv"))]), "PROF022")
    assert finding.status is Status.WARN and (finding.detail, finding.evidence) == (csv.detail, csv.evidence)


# --- PROF023 flash attention ----------------------------------------------------------------------------------

def test_flash_attention_dims_come_from_query_and_softmax_max_in_both_directions(tmp_path: Path) -> None:
    finding = one(analyze([str(pipe_rank(tmp_path))]), "PROF023")
    assert finding.status is Status.WARN
    operators = finding.evidence["operators"]
    forward = by_name(operators, "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore")
    # SBH query (4096, 2, 512), softmax_max (2, 4, 4096, 8): N 4, D 512 / 4, S 4096
    assert (forward["head_dim"], forward["sequence_length"]) == (128, 4096)
    assert forward["pipes"] == "mte2-bound" and forward["problems"] == []  # the advisor calls it "mac" bound
    backward = by_name(operators, "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad")
    # softmax_max is an input of the gradient: the same D and S (the advisor reads dq's shape: D 256, S 512)
    assert (backward["head_dim"], backward["sequence_length"]) == (128, 4096)
    assert backward["kind"] == "backward" and backward["pipes"] == "below the bars"
    varlen = by_name(operators, "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore_varlen")
    assert varlen["head_dim"] == 511 and any("511" in p for p in varlen["problems"])


def test_a_short_sequence_length_is_judged_like_any_other(tmp_path: Path) -> None:
    """The advisor reads S only when its text has three digits or more: S = 64 passes there. Changed cells:
    the forward rows' softmax_max output (2,4,4096,8 -> 2,4,64,8)."""
    def short(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
        for row in rows:
            if row["Name"] == "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore":
                row["Output Shapes"] = row["Output Shapes"].replace("2,4,4096,8", "2,4,64,8")
        return rows

    finding = one(analyze([str(pipe_rank(tmp_path, short))]), "PROF023")
    forward = by_name(finding.evidence["operators"], "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore")
    assert forward["sequence_length"] == 64 and any("S 64" in p for p in forward["problems"])


# --- PROF024 vector --------------------------------------------------------------------------------------------

def test_vector_shapes_that_cost_no_time_are_not_judged(tmp_path: Path) -> None:
    """The real table's four 1.4 us Add tasks (shapes ';') take 0.06% of compute time: the advisor lists them
    with 67% "optimisation space"; they are left out here, the 26 us Adds busy on all pipes pass."""
    finding = one(analyze([str(pipe_rank(tmp_path))]), "PROF024")
    assert finding.status is Status.PASS and finding.evidence["not_judged_small"] == 1
    (judged,) = finding.evidence["operators"]
    assert judged["input_shapes"] == "512,2,4096;512,2,4096" and judged["pipes"] == "vec+mte2+mte3 busy"


def test_vector_operator_waiting_on_no_pipe_warns_on_the_real_slices(tmp_path: Path) -> None:
    finding = one(analyze([str(slices(tmp_path))]), "PROF024")
    assert finding.status is Status.WARN and "Slice" in finding.detail
    (flagged,) = finding.evidence["flagged"]
    assert flagged["count"] == 20 and flagged["ratios"]["aiv_mte2_ratio"] < 0.7


# --- PROF025 repeated sequences --------------------------------------------------------------------------------

def test_repeated_slices_launched_one_by_one_are_host_bound(tmp_path: Path) -> None:
    result = analyze([str(slices(tmp_path))])
    finding = one(result, "PROF025")
    assert finding.status is Status.WARN and "host" in finding.detail
    (sequence,) = finding.evidence["sequences"]
    assert set(sequence["ops"]) == {"aclnnInplaceCopy_SliceAiCore_Slice [16666,3;2;2]"}
    rows = rows_of(SLICES)
    starts = [float(r["Task Start Time(us)"]) for r in rows]
    span = starts[-1] + float(rows[-1]["Task Duration(us)"]) - starts[0]
    # occurrences do not overlap: their summed span stays within the profile's (the advisor reports 9.589 ms
    # of "end-to-end duration" for these 1.79 ms)
    assert sequence["span_us"] <= span and sequence["occurrences"] * sequence["length"] <= len(rows)
    assert sequence["device_busy_share"] < 0.4


def test_tasks_back_to_back_are_not_host_bound_and_copies_count_vector_time(tmp_path: Path) -> None:
    """Changed cells: each Slice starts when the previous one ends (no gap). Then the device is busy all the
    span (not host-bound); data movement is 65% of the vector cores' busy time (aiv_time: the advisor reads
    aicore_time only, 0 for these tasks), which fires only with the copy bar lowered to 0.5."""
    def back_to_back(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
        start = float(rows[0]["Task Start Time(us)"])
        for row in rows:
            row["Task Start Time(us)"] = f"{start:.3f}"
            start += float(row["Task Duration(us)"])
        return rows

    folder = str(slices(tmp_path, back_to_back))
    assert one(analyze([folder]), "PROF025").status is Status.PASS
    from npudoctor.api import load_profile
    from npudoctor.model.profile import NodeProfile, deep_merge

    profile = NodeProfile("t", deep_merge(load_profile().data, {"prof": {"fusible_mte_share": 0.5}}))
    finding = one(analyze([folder], profile), "PROF025")
    assert finding.status is Status.WARN and "data movement" in finding.detail


def test_communication_and_ai_cpu_tasks_cut_a_sequence(tmp_path: Path) -> None:
    """Changed cells: every other Slice becomes an AI_CPU task: no two compute tasks stand together."""
    def cut(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
        for row in rows[1::2]:
            row["Task Type"] = "AI_CPU"
        return rows

    finding = one(analyze([str(slices(tmp_path, cut))]), "PROF025")
    assert finding.status is Status.PASS


def test_sequence_search_counts_without_overlap_and_finds_the_block() -> None:
    import numpy as np

    codes = [0, 1, 2] * 8 + [5] + [0, 1, 2] * 2
    n = len(codes)
    arrays = {"code": np.array(codes), "start": np.arange(n) * 10.0, "dur": np.ones(n), "moved": np.zeros(n),
              "busy": np.ones(n), "brk": np.array([c == 5 for c in codes])}
    found, span = sequences.find(arrays, 2, 6, 6)
    by_codes = {f.codes: f for f in found}
    assert by_codes[(0, 1, 2)].occurrences == 10 and by_codes[(0, 1, 2)].first_row == 0
    assert (0, 1, 2, 0, 1, 2) not in by_codes  # 4 + 1 occurrences: the AI CPU task cuts the run
    assert sequences.period((0, 1, 0, 1)) == (0, 1) and sequences.contains((0, 1, 2), (2, 0))
    assert span == pytest.approx((n - 1) * 10.0 + 1.0)


def test_opstats_are_the_same_with_pandas_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folders = [str(pipe_rank(tmp_path / "pipe")), str(slices(tmp_path / "slices"))]
    arrow = analyze(folders)
    monkeypatch.setattr(tables, "USE_ARROW", False)
    plain = analyze(folders)
    for check_id in ("PROF022", "PROF023", "PROF024", "PROF025"):
        assert [(f.status, f.detail, f.evidence) for f in arrow.findings if f.id == check_id] == \
            [(f.status, f.detail, f.evidence) for f in plain.findings if f.id == check_id]


# --- a real MoE FFN step (msprof op_summary, int8 GroupedMatmul) -------------------------------------------------

def test_the_real_moe_step_grouped_matmuls_on_mix_aic_are_judged(tmp_path: Path) -> None:
    """The advisor takes cube operators from AI_CORE tasks only: these GroupedMatmuls run as MIX_AIC tasks and
    it reports no cube analysis on this folder (tests/test_prof_peer.py); their cube pipe is idle (mac 0.05-0.09)
    and mte2 below its bar."""
    result = analyze([str(profdirs.msprof_collection(tmp_path, MOE))])
    cube = one(result, "PROF022")
    assert cube.status is Status.WARN
    assert {e["op_type"] for e in cube.evidence["flagged"]} == {"GroupedMatmul"}
    assert all(e["core"] == "MIX_AIC" and e["ratios"]["aic_mac_ratio"] < 0.1 for e in cube.evidence["flagged"])
    vector = one(result, "PROF024")  # the three shapes the advisor lists as bound, busy here too
    assert vector.status is Status.PASS
    assert sorted(e["op_type"] for e in vector.evidence["operators"]) == ["Cast", "Cast", "DynamicQuant"]
    sequence = one(result, "PROF025")
    assert sequence.status is Status.WARN
    (found,) = sequence.evidence["sequences"]
    assert [op.split(" [")[0] for op in found["ops"]] == [
        "aclnnGroupedMatmulV5_GroupedMatmul_GroupedMatmul", "DequantSwigluQuant",
        "aclnnGroupedMatmulV5_GroupedMatmul_GroupedMatmul", "aclnnDynamicQuantV2_DynamicQuant_DynamicQuant",
        "clear_ops"]
    assert found["occurrences"] == 6 and found["device_busy_share"] < 0.4
    # its first occurrence holds the 768 ms set-up gap before the first DequantSwigluQuant: the typical
    # (median) occurrence is judged, 3 ms with the device busy ~15% of it, not the mean of 132 ms
    assert found["typical_span_us"] < found["span_us"] / found["occurrences"] / 10
    assert 0.1 < found["typical_busy_share"] < 0.4


# --- PROF026 graph fusion ---------------------------------------------------------------------------------------

def test_graph_fusion_says_what_it_lacks(tmp_path: Path) -> None:
    pt = pipe_rank(tmp_path)
    assert "no GE graph dump" in one(analyze([str(pt)]), "PROF026").detail
    dump = pt / "ge_proto_00000001_graph_1_Build.txt"
    dump.write_text("graph {\n}\n")
    result = analyze([str(pt)])
    finding = one(result, "PROF026")
    assert finding.status is Status.SKIP and "not read" in finding.detail
    assert str(dump) in result.to_dict()["ranks"][0]["not_used"]


# --- outputs ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["text", "json", "junit"])
def test_new_checks_show_in_every_format(tmp_path: Path, fmt: str) -> None:
    from npudoctor.cli import main
    from tests.clirunner import cli_runner

    result = cli_runner().invoke(main, ["prof", "analyze", str(slices(tmp_path)), "--format", fmt])
    for check_id in ("PROF022", "PROF023", "PROF024", "PROF025", "PROF026"):
        assert check_id in result.output


def test_a_table_of_ever_new_shapes_keeps_the_costliest_and_says_so(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Changed cells: each real Add task gets its own first dimension (a dynamic-shape job); one MatMul shape
    takes most of the time. With room for 50 shapes, the MatMul is still judged and the rest is counted."""
    from npudoctor.prof import opstats

    monkeypatch.setattr(opstats, "MAX_SHAPE_GROUPS", 50)

    def ever_new(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
        add = next(r for r in rows if r["Name"] == "aclnnAdd_AddAiCore_Add" and r["Input Shapes"] != '";"')
        out = [r for r in rows if r["Name"] != "aclnnAdd_AddAiCore_Add"]
        for i in range(3000):
            out.append({**add, "Input Shapes": f'"{i + 1},2,4096;{i + 1},2,4096"', "Duration(us)": "0.5"})
        return out

    result = analyze([str(pipe_rank(tmp_path, ever_new))])
    assert any("operator shape(s) of the least time not kept" in p for p in result.problems)
    cube = one(result, "PROF022")
    assert by_name(cube.evidence["operators"], "aclnnMatmul_MatMulCommon_MatMulV2")["pipes"] == "mac and mte2-bound"


def test_huge_names_and_shapes_stay_short_in_findings(tmp_path: Path) -> None:
    """Changed cells: the MatMulV3 rows' name and input shapes made 200 kB long."""
    def huge(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
        for row in rows:
            if row["Name"] == "aclnnMatmul_MatMulV3Common_MatMulV3":
                row["Name"] = "M" * 200_000
                row["Input Shapes"] = '"' + "7," * 100_000 + '7"'
        return rows

    result = analyze([str(pipe_rank(tmp_path, huge))])
    cube = one(result, "PROF022")
    assert cube.status is Status.WARN
    assert max(len(str(v)) for e in cube.evidence["operators"] for v in e.values()) <= 600
    assert len(result.to_dict()["findings"][0]["detail"]) < 2000


def test_a_collection_of_two_devices_is_judged_per_device(tmp_path: Path) -> None:
    """Changed cells: the last 10 Slice tasks are Device_id 1 (and start where device 0's first one did)."""
    def two_devices(rows: List[Dict[str, str]]) -> List[Dict[str, str]]:
        shift = float(rows[10]["Task Start Time(us)"]) - float(rows[0]["Task Start Time(us)"])
        for row in rows[10:]:
            row["Device_id"] = "1"
            row["Task Start Time(us)"] = f"{float(row['Task Start Time(us)']) - shift:.3f}"
        return rows

    result = analyze([str(slices(tmp_path, two_devices))])
    assert len(result.ranks) == 2
    vector = one(result, "PROF024")
    (flagged,) = vector.evidence["flagged"]
    assert flagged["count"] == 20 and len(flagged["ranks"]) == 2
    # 10 tasks a device: 5 pairs each, below the 6 repeats a rank must show (repeats are per rank) ...
    assert one(result, "PROF025").status is Status.PASS
    from npudoctor.api import load_profile
    from npudoctor.model.profile import NodeProfile, deep_merge

    profile = NodeProfile("t", deep_merge(load_profile().data, {"prof": {"fusible_min_repeats": 5}}))
    sequence = one(analyze([str(tmp_path / profdirs.PROF)], profile), "PROF025")
    assert sequence.status is Status.WARN  # ... and with 5, both devices show it: 10 occurrences over 2 ranks
    (found,) = sequence.evidence["sequences"]
    assert len(found["ranks"]) == 2 and found["occurrences"] == 10


def test_many_small_slices_are_grouped_together_and_judged_like_one_table(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: each op_summary slice paid a group-by and the per-shape grouping of its own (~20 ms a call):
    2,000 slices took 152 s. Small slices are now grouped in tables.CHUNK_ROWS rows: the calls follow the rows,
    not the files, and the verdicts are those of the same rows in one file."""
    from npudoctor.prof import kernels

    one_file = slices(tmp_path / "one")
    folder = one_file / "mindstudio_profiler_output"
    (table,) = folder.glob("op_summary_*.csv")
    header, *rows = table.read_text(encoding="utf-8").splitlines()
    sliced = slices(tmp_path / "many")
    out = sliced / "mindstudio_profiler_output"
    (original,) = out.glob("op_summary_*.csv")
    original.unlink()
    copies = 300
    for index in range(copies):
        (out / f"op_summary_slice_{index}_20260323031749197.csv").write_text("\n".join([header, *rows]) + "\n")
    (table,) = folder.glob("op_summary_*.csv")
    table.write_text("\n".join([header, *rows * copies]) + "\n", encoding="utf-8")
    calls: List[int] = []
    real = kernels._group_arrow

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(kernels, "_group_arrow", counted)
    many = analyze([str(sliced)])
    if not calls:
        pytest.skip("pyarrow's CSV reader is not used here (pandas fallback)")
    assert len(calls) <= 2, len(calls)
    whole = analyze([str(one_file)])
    def verdicts(result: Any) -> List[tuple]:  # the folder names differ: not the subjects
        return [(f.id, f.status, f.detail.replace(str(tmp_path), "")) for f in result.findings]

    assert verdicts(many) == verdicts(whole)
