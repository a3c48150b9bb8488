"""Issue 20 section 3: what real folders showed wrong (step labels, short rows, PROF008's share, unused files)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, List

import pytest

from npudoctor.model.finding import Status
from npudoctor.prof import kernels, tables
from npudoctor.prof.engine import analyze
from tests import profdirs
from tests.samples import sample_data

PIPEUTIL = "prof_kernel_details_pipeutil_matmul_bf16.csv"


def rows_of(sample: str) -> List[List[str]]:
    return list(csv.reader(io.StringIO(sample_data(sample).decode("utf-8"))))


def write(path: Path, rows: List[List[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
    return path


def test_cluster_steps_are_the_tables_step_not_the_rank_index(tmp_path: Path) -> None:
    """msprof-analyze's cluster_step_trace_time.csv (real): Index is the rank; the Step column is the step."""
    profdirs.cluster_output(tmp_path / "real")
    ranks = analyze([str(tmp_path / "real")]).to_dict()["ranks"]
    assert len(ranks) == 8 and {r["steps"][0]["step"] for r in ranks} == {""}  # the real file leaves Step empty
    rows = rows_of("prof_cluster_step_trace_time.csv")
    for row in rows[1:]:
        row[0] = "2"
    write(tmp_path / "step2" / "cluster_analysis_output" / "cluster_step_trace_time.csv", rows)
    ranks = analyze([str(tmp_path / "step2")]).to_dict()["ranks"]
    assert [r["label"] for r in ranks][:3] == ["rank 0", "rank 1", "rank 2"]
    assert {r["steps"][0]["step"] for r in ranks} == {"2"}


def group_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> List[Any]:
    out = []
    for arrow in (True, False):
        monkeypatch.setattr(tables, "USE_ARROW", arrow)
        stats = kernels.aggregate_csv("kernel_details", [str(path)], 20, 0.8)
        out.append((stats.rows, int(stats.groups["n"].sum()), round(float(stats.groups["dur_sum"].sum()), 3),
                    stats.problems))
    return out


def test_a_short_row_reads_the_same_with_pyarrow_and_pandas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample = "prof_kernel_details_memory_metrics.csv"  # its last read column (aiv_time(us)) is not its last
    rows = [r for r in rows_of(sample) if len(r) == len(rows_of(sample)[0])]
    header = rows[0]
    wanted_last = header.index("aiv_time(us)")
    trailing = rows[1][:wanted_last + 1]  # cut after the last column anybody reads: read, in both
    cut = rows[2][:header.index("Duration(us)")]  # no duration any more: skipped and counted, in both
    bad = rows[3][:wanted_last + 1]
    bad[header.index("Block Dim")] = "NO"  # a shifted row: a word where a number belongs: skipped, in both
    long_row = [*rows[4], "extra"]  # one cell too many: skipped and counted, in both
    path = write(tmp_path / "kernel_details.csv", [header, *rows[1:], trailing, cut, bad, long_row])
    arrow, plain = group_both(path, monkeypatch)
    assert arrow[:3] == plain[:3]
    assert arrow[1] == len(rows) - 1 + 1  # every full row and the trailing-short one
    assert "3 row(s) with the wrong number of cells skipped" in arrow[3][0]
    assert "3 row(s) with the wrong number of cells skipped" in plain[3][0]


def test_the_real_shifted_row_is_skipped_by_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real memory-metrics file has one FlashAttentionScore row that lost its duration cell mid-row."""
    path = profdirs.put(tmp_path, {"kernel_details.csv": "prof_kernel_details_memory_metrics.csv"})
    arrow, plain = group_both(path / "kernel_details.csv", monkeypatch)
    assert arrow == plain and "1 row(s) with the wrong number of cells skipped" in arrow[3][0]


def test_dynamic_share_is_of_compute_time_not_of_communication(tmp_path: Path) -> None:
    """Every compute task of the real PipeUtilization table is dynamic; collectives (HCCL, no OP State) beside
    them must not dilute the share (8.4% was reported where all compute was dynamic)."""
    rows = rows_of(PIPEUTIL)
    header = rows[0]
    full = [r for r in rows[1:] if len(r) == len(header)]
    compute_us = sum(float(r[header.index("Duration(us)")]) for r in full)
    hccl = list(full[0])
    hccl[header.index("Name")], hccl[header.index("Type")] = "hcom_allReduce__483_2", "hcom_allReduce_"
    hccl[header.index("Accelerator Core")], hccl[header.index("OP State")] = "HCCL", "N/A"
    hccl[header.index("Duration(us)")] = f"{compute_us * 10:.3f}"  # ten times the compute time
    pt = profdirs.torch_npu_rank(tmp_path, rank=0, kernel=PIPEUTIL, extras=False)
    write(pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", [header, *full, hccl])
    (finding,) = [f for f in analyze([str(tmp_path)]).findings if f.id == "PROF008"]
    assert finding.status is Status.WARN
    assert finding.evidence["dynamic_share"]["rank 0"] == pytest.approx(1.0)
