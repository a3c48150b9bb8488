"""The profiling doctor on .db exports: the same findings as the CSVs of the same run; hostile files refused.

Real exports: Ascend/msinsight's torch_npu job exported as .db and as text (tests/data/samples/prof_db, two runs
of one config). The other .db files are built by tests/profdb.py from the real samples' rows in the real schema
(constructed), so that CSV and .db of exactly one run can be compared.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from npudoctor.prof import database
from npudoctor.prof.engine import ProfInputError, analyze
from npudoctor.prof.tables import TableError
from tests import profdb, profdirs
from tests.bounded import run_npudoctor
from tests.clirunner import cli_runner
from tests.samples import SAMPLES

KERNELS = ["prof_kernel_details_memory_metrics.csv", "prof_kernel_details_pipeutil_matmul_bf16.csv"]


def verdicts(result: Any) -> List[Tuple[str, str, str]]:
    return sorted((f.id, f.status.value, f.subject) for f in result.findings)


def numbers(result: Any) -> Dict[str, Any]:
    """The figures a user reads, per check: shares, counts and the top operators."""
    out: Dict[str, Any] = {}
    for finding in result.findings:
        evidence = finding.evidence
        keep = {k: evidence[k] for k in ("count", "max_share", "cube_utilization_pct", "dynamic_share", "ranks")
                if k in evidence}
        if "operators" in evidence:
            keep["operators"] = [o["op_type"] for o in evidence["operators"]]
        out[f"{finding.id} {finding.subject}"] = keep
    return out


REAL = SAMPLES / "prof_db"
# Checks both exports of the real job can judge, with the same verdict. Not: PROF003 (this CANN's TASK_PMU_INFO
# holds no cube_utilization), PROF008 (no opState column), the host timeline and memory checks (the text copy
# leaves trace_view.json and the memory tables out). PROF019 reads profiler_metadata.json beside the text and
# META_DATA's ENV_VARIABLES in the .db.
BOTH_JUDGE = ("PROF001", "PROF002", "PROF004", "PROF005", "PROF006", "PROF007", "PROF009", "PROF010", "PROF017",
              "PROF019", "PROF022", "PROF023", "PROF024", "PROF025")


def test_a_real_db_export_reads_like_the_text_export_of_the_same_job(tmp_path: Path) -> None:
    for kind in ("db", "text"):
        shutil.copytree(REAL / f"level1_rank0_{kind}", tmp_path / kind / "rank0_ascend_pt")
    before = (REAL / "level1_rank0_db" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db").read_bytes()
    db, text = analyze([str(tmp_path / "db")]), analyze([str(tmp_path / "text")])
    db_rank, text_rank = db.to_dict()["ranks"][0], text.to_dict()["ranks"][0]
    assert db_rank["problems"] == [] and set(db_rank["tables"]) == {"db", "analysis_db"}
    # The same program: the same tasks per core type (187 compute tasks + 4 collectives), the same device time
    # within the two runs' 3.4%.
    assert db_rank["by_core"] == text_rank["by_core"] == {"AI_CORE": 23, "AI_VECTOR_CORE": 149, "DSA_SQE": 2,
                                                           "HCCL": 4, "MIX_AIV": 13}
    assert db_rank["device_time_us"] == pytest.approx(text_rank["device_time_us"], rel=0.05)
    judged = [v for v in verdicts(db) if v[0] in BOTH_JUDGE]
    assert judged == [v for v in verdicts(text) if v[0] in BOTH_JUDGE]
    assert ("PROF002", "warn", "") in judged  # PipeUtilization ratios read from TASK_PMU_INFO
    # Per-shape groups and the task sequence: the same MaxPoolGradWithArgmaxV1 shape below its bars (PROF024),
    # the cube shapes judged (PROF022), the 191 tasks (187 compute + 4 collectives) searched (PROF025).
    assert ("PROF024", "warn", "") in judged and ("PROF022", "pass", "") in judged
    # PROF022 and PROF025 say the same; PROF024 the same first shape (two runs: 109.8 vs 109.9 us, and the third
    # shape's ratios moved between them).
    shaped = {f.id: f.detail for f in db.findings if f.id in ("PROF022", "PROF024", "PROF025")}
    theirs = {f.id: f.detail for f in text.findings if f.id in ("PROF022", "PROF024", "PROF025")}
    assert shaped["PROF022"] == theirs["PROF022"] and shaped["PROF025"] == theirs["PROF025"]
    assert shaped["PROF024"].split(" (")[0] == theirs["PROF024"].split(" (")[0]
    assert "MaxPoolGradWithArgmaxV1" in shaped["PROF024"] and "191 task(s)" in shaped["PROF025"]
    ours, theirs = numbers(db), numbers(text)
    assert ours["PROF002 "]["operators"][:3] == theirs["PROF002 "]["operators"][:3] == [
        "TransData", "Conv2DBackpropFilter", "TensorMove"]
    assert ours["PROF002 "]["max_share"] == pytest.approx(theirs["PROF002 "]["max_share"], abs=0.01)
    by_id = {f.id: f for f in db.findings}
    assert by_id["PROF008"].status.value == "skip" and by_id["PROF003"].status.value == "skip"
    # Host timeline from CANN_API / PYTORCH_API: launches and stream syncs are there (the text copy has none).
    assert by_id["PROF015"].status.value == "pass"
    db_file = tmp_path / "db" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    assert db_file.read_bytes() == before
    assert sorted(p.name for p in db_file.parent.iterdir()) == ["analysis.db", "ascend_pytorch_profiler_0.db"]


# The operator checks fed by per-shape groups and the task sequence (COMPUTE_TASK_INFO's names, shapes and
# dtypes through STRING_IDS, TASK in start order, TASK_PMU_INFO's ratios and pipe times).
FROM_SHAPES = ("PROF022", "PROF023", "PROF024", "PROF025")


@pytest.mark.parametrize("kernel", KERNELS)
def test_csv_and_db_of_one_run_give_the_same_findings(tmp_path: Path, kernel: str) -> None:
    text = analyze([str(profdirs.torch_npu_rank(tmp_path / "text", rank=0, kernel=kernel))])
    db = analyze([str(profdb.torch_npu_db_rank(tmp_path / "db", rank=0, kernel=kernel))])
    assert verdicts(db) == verdicts(text)
    if "pipeutil" in kernel:  # PROF022/PROF023 fire there from the CSV: from the .db too, with the same details
        assert {v[0] for v in verdicts(db) if v[1] == "warn"} >= {"PROF022", "PROF023"}
    details = {f.id: f.detail for f in text.findings if f.id in FROM_SHAPES}
    assert {f.id: f.detail for f in db.findings if f.id in FROM_SHAPES} == details
    ours, theirs = numbers(db), numbers(text)
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert ours[key].keys() == theirs[key].keys(), key
        for name in ("count", "max_share", "cube_utilization_pct"):
            if name in theirs[key]:
                assert ours[key][name] == pytest.approx(theirs[key][name], rel=1e-4, abs=1e-3), (key, name)
        assert ours[key].get("operators") == theirs[key].get("operators"), key
        if isinstance(theirs[key].get("dynamic_share"), dict):
            assert ours[key]["dynamic_share"] == pytest.approx(theirs[key]["dynamic_share"], abs=1e-3), key
    text_rank, db_rank = text.to_dict()["ranks"][0], db.to_dict()["ranks"][0]
    assert db_rank["by_core"] == text_rank["by_core"]
    assert db_rank["device_time_us"] == pytest.approx(text_rank["device_time_us"], abs=0.01)
    assert db_rank["label"] == text_rank["label"] == "rank 0"
    assert set(db_rank["tables"]) == {"db", "analysis_db"}
    assert db_rank["memory"]["peaks"]["PTA"]["reserved_mb"] == pytest.approx(8664.0)


@pytest.mark.parametrize("recorded, expected", [
    ('{"ASCEND_LAUNCH_BLOCKING": "1", "HCCL_RDMA_TC": ""}', ("PROF019", "warn", "ASCEND_LAUNCH_BLOCKING")),
    ('{"ASCEND_LAUNCH_BLOCKING": ""}', ("PROF019", "pass", "")),
    ("not json" + "[" * 5000, ("PROF019", "skip", "")),
])
def test_the_environment_recorded_in_meta_data(tmp_path: Path, recorded: str, expected: Tuple[str, str, str]) -> None:
    path = profdb.write_profiler_db(tmp_path / "ascend_pytorch_profiler_0.db", KERNELS[0], extras=False)
    with_sql(path, f"INSERT INTO META_DATA VALUES ('ENV_VARIABLES', '{recorded}')")
    assert expected in [v for v in verdicts(analyze([str(path)])) if v[0] == "PROF019"]


def test_dynamic_shape_from_the_db_opstate(tmp_path: Path) -> None:
    pt = profdb.torch_npu_db_rank(tmp_path, rank=3, kernel=KERNELS[1], extras=False)
    (dynamic,) = [f for f in analyze([str(pt)]).findings if f.id == "PROF008"]
    assert dynamic.status.value == "warn" and dynamic.evidence["dynamic_share"]["rank 3"] == pytest.approx(1.0)


def test_an_opstate_column_of_only_na_is_unknown_not_static(tmp_path: Path) -> None:
    """The memory-metrics run has no OP State: the db holds N/A in every row (as CANN writes it): SKIP."""
    pt = profdb.torch_npu_db_rank(tmp_path, rank=0, kernel=KERNELS[0], extras=False)
    (dynamic,) = [f for f in analyze([str(pt)]).findings if f.id == "PROF008"]
    assert dynamic.status.value == "skip" and dynamic.detail.startswith("unknown")


def test_a_db_given_by_path_and_an_msprof_collection_are_read(tmp_path: Path) -> None:
    path = profdb.write_profiler_db(tmp_path / "ascend_pytorch_profiler_2.db", KERNELS[1], extras=False)
    result = analyze([str(path)])
    assert result.ranks[0].tables_read["db"] == [str(path)]
    assert result.unreadable == []  # read, so not "1 input could not be read" and exit 1 (it was)
    prof = tmp_path / "PROF_000001_20260323031749197_00815596RKPKAHRB"
    prof.mkdir()
    profdb.write_profiler_db(prof / "msprof_20260323031749.db", KERNELS[1], extras=False)
    profdirs.put(prof / "device_0", {"info.json.0": "prof_msprof_device_info_json_910.json"})
    (rank,) = analyze([str(prof)]).ranks
    assert rank.source.layout == "msprof" and rank.kernel is not None and rank.core_count()[0] == 32


def test_text_beside_db_reads_the_text_and_lists_the_db_as_not_used(tmp_path: Path) -> None:
    pt = profdirs.torch_npu_rank(tmp_path, rank=0)
    profdb.write_profiler_db(pt / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db", KERNELS[0])
    doc = analyze([str(tmp_path)]).to_dict()["ranks"][0]
    assert "kernel_details" in doc["tables"] and "db" not in doc["tables"]
    assert any(p.endswith("ascend_pytorch_profiler_0.db") for p in doc["not_used"])
    assert any(p.endswith("communication_matrix.json") for p in doc["not_used"])
    assert any(p.endswith("npu_module_mem.csv") for p in doc["not_used"])


# --- hostile files --------------------------------------------------------------------------------------------

def hostile(tmp_path: Path, name: str = "ascend_pytorch_profiler_0.db") -> Path:
    return profdb.write_profiler_db(tmp_path / name, KERNELS[1], extras=False)


def with_sql(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


CASES = {
    "not sqlite": (lambda p: (p.write_bytes(b"PK\x03\x04" + os.urandom(4096)), p)[1], "not an SQLite database"),
    "encrypted": (lambda p: (p.write_bytes(os.urandom(8192)), p)[1], "not an SQLite database"),
    "truncated": (lambda p: (p.write_bytes(hostile(p.parent, "x.db").read_bytes()[:3000]), p)[1], ""),
    "view": (lambda p: with_sql(hostile(p.parent, p.name), "CREATE VIEW V AS SELECT * FROM TASK"), "holds a view"),
    "trigger": (lambda p: with_sql(hostile(p.parent, p.name), "CREATE TRIGGER T AFTER INSERT ON TASK BEGIN "
                                   "DELETE FROM TASK; END"), "holds a trigger"),
    "wal beside": (lambda p: (hostile(p.parent, p.name), (p.parent / (p.name + "-wal")).write_bytes(b"\0" * 32),
                              p)[2], "wal file lies beside it"),
    "empty file": (lambda p: (p.write_bytes(b""), p)[1], "not an SQLite database"),
    "without rowid": (lambda p: with_sql(hostile(p.parent, p.name), "CREATE TABLE W (a INTEGER PRIMARY KEY, b) "
                                         "WITHOUT ROWID"), "holds a WITHOUT ROWID table"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_db_is_a_one_line_error(tmp_path: Path, case: str) -> None:
    build, fragment = CASES[case]
    path = build(tmp_path / "ascend_pytorch_profiler_0.db")
    (tmp_path / "x.db").unlink(missing_ok=True)
    outcome = run_npudoctor(["prof", "analyze", str(path)])
    outcome.assert_one_line_error(fragment)
    outcome.assert_cheap()


def kernel_groups_of(path: Path) -> List[Tuple[Any, ...]]:
    from npudoctor.prof import dbreader
    from npudoctor.prof.columns import column_map

    cmap = column_map("kernel_details")
    ratios = {name: cmap.spellings.get(name, (name,)) for name in cmap.groups.get("pipe_ratios", ())}
    with database.ProfileDb(str(path)) as db:
        rows, _ = database.kernel_groups(db, 20.0, 0.8, ratios, dbreader.CUBE_SPELLINGS)
    return sorted(tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in rows)


def test_passes_by_task_id_and_sparse_rowids_give_the_same_groups(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A TASK table bigger than one pass is read in passes by globalTaskId (bounded memory); rowids far apart
    are skipped by seeks; metric ids far apart are matched too: the groups are those of one plain read."""
    path = profdb.write_profiler_db(tmp_path / "ascend_pytorch_profiler_0.db", KERNELS[1], extras=False,
                                    rows_to=3000)
    plain = kernel_groups_of(path)
    assert sum(row[10] for row in plain) == 3000 and any(row[8] == 0 for row in plain)  # tasks, PMU read
    monkeypatch.setattr(database, "TASKS_PER_PASS", 700)
    assert kernel_groups_of(path) == plain
    monkeypatch.undo()
    with_sql(path, "UPDATE TASK SET rowid = rowid * 1000000007", "UPDATE TASK_PMU_INFO SET rowid = rowid * 999983")
    assert kernel_groups_of(path) == plain
    # A metric's string id far from the others: tested by IN, not the bit mask.
    far = "(SELECT id FROM STRING_IDS WHERE value = 'aic_mac_ratio')"
    with_sql(path, f"UPDATE TASK_PMU_INFO SET name = name + 100000 WHERE name = {far}",
             "UPDATE STRING_IDS SET id = id + 100000 WHERE value = 'aic_mac_ratio'")
    assert kernel_groups_of(path) == plain


def test_a_virtual_table_is_refused(tmp_path: Path) -> None:
    path = hostile(tmp_path)
    try:
        with_sql(path, "CREATE VIRTUAL TABLE V USING rtree(id, minx, maxx)")
    except sqlite3.OperationalError:
        pytest.skip("this sqlite has no rtree module")
    with pytest.raises(ProfInputError, match="virtual table"):
        analyze([str(path)])


def test_size_cap_and_query_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = hostile(tmp_path)
    monkeypatch.setattr(database, "MAX_DB_BYTES", 1024)
    with pytest.raises(ProfInputError, match="larger than"):
        analyze([str(path)])
    monkeypatch.setattr(database, "MAX_DB_BYTES", 1 << 30)
    conn = sqlite3.connect(path)  # enough rows that the grouping query runs past a zero deadline
    conn.executemany("INSERT INTO TASK (startNs, endNs, deviceId, globalTaskId) VALUES (?, ?, 0, ?)",
                     [(i, i + 50_000, 1000 + i) for i in range(60_000)])
    conn.executemany("INSERT INTO COMPUTE_TASK_INFO (globalTaskId, taskType, opType) VALUES (?, 1, 1)",
                     [(1000 + i,) for i in range(60_000)])
    conn.commit()
    conn.close()
    monkeypatch.setattr(database, "QUERY_SECONDS", 0.0)
    with pytest.raises(ProfInputError, match="ran past"):
        analyze([str(path)])


def test_a_huge_string_value_is_refused_not_loaded(tmp_path: Path) -> None:
    path = hostile(tmp_path)
    with_sql(path, f"UPDATE STRING_IDS SET value = '{'A' * (database.MAX_VALUE_BYTES + 10)}' WHERE value = 'AI_CORE'")
    with pytest.raises(ProfInputError) as caught:
        analyze([str(path)])
    assert "\n" not in str(caught.value)


def test_the_db_is_opened_read_only_and_never_written(tmp_path: Path) -> None:
    path = hostile(tmp_path)
    before = (path.stat().st_mtime_ns, path.read_bytes())
    with database.ProfileDb(str(path)) as db:
        for statement in ("DELETE FROM TASK", "SELECT * FROM sqlite_master",  # only the mapped tables are read
                          "ATTACH DATABASE ':memory:' AS other", "PRAGMA query_only = OFF"):
            with pytest.raises(TableError):
                list(db.rows(statement))
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before
    assert sorted(os.listdir(tmp_path)) == [path.name]  # no journal, no WAL left behind


def test_seeded_mutations_of_a_db_raise_nothing_but_the_readers_error(tmp_path: Path) -> None:
    """Random bytes of a real-schema .db flipped, a few hundred times: a result or ProfInputError, no other
    exception (the sqlite3 errors of a corrupt file become one line). NPUDOCTOR_FUZZ_TRIALS raises the count."""
    import random

    source = profdb.write_profiler_db(tmp_path / "base.db", KERNELS[1], extras=True).read_bytes()
    rng = random.Random(20)
    trials = int(os.environ.get("NPUDOCTOR_FUZZ_TRIALS", "150"))
    outcomes = {"read": 0, "refused": 0}
    for trial in range(trials):
        data = bytearray(source)
        for _ in range(rng.choice((1, 4, 32))):
            data[rng.randrange(100, len(data))] = rng.randrange(256)  # past the magic: the pages themselves
        folder = tmp_path / f"t{trial}"
        folder.mkdir()
        path = folder / "ascend_pytorch_profiler_0.db"
        path.write_bytes(bytes(data))
        try:
            analyze([str(path)])
            outcomes["read"] += 1
        except ProfInputError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert sum(outcomes.values()) == trials and outcomes["read"] > 0


def test_null_and_odd_cells_give_valid_json(tmp_path: Path) -> None:
    """NULL durations, text in number columns, 1e999: a machine format never holds NaN or Infinity."""
    import json

    pt = profdb.torch_npu_db_rank(tmp_path, rank=0, kernel=KERNELS[1])
    out = pt / "ASCEND_PROFILER_OUTPUT"
    with_sql(out / "ascend_pytorch_profiler_0.db", "UPDATE TASK SET endNs = NULL WHERE rowid % 3 = 0",
             "UPDATE TASK SET startNs = 'x' WHERE rowid % 5 = 0", "UPDATE COMPUTE_TASK_INFO SET blockNum = 'NO'",
             "UPDATE MEMORY_RECORD SET totalReserved = 1e999", "UPDATE OP_MEMORY SET size = NULL")
    with_sql(out / "analysis.db", "UPDATE CommAnalyzerBandwidth SET bandwidth = 'fast', transit_size = NULL",
             "UPDATE StepTraceTime SET free = 1e999")
    outcome = run_npudoctor(["prof", "analyze", str(pt), "--format", "json"])
    assert outcome.rc in (0, 1), outcome.stderr[-2000:]
    json.loads(outcome.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))


def test_rowids_far_apart_cost_what_dense_ones_do(tmp_path: Path) -> None:
    """Issue 33: TASK rowids 2^40 apart made the window reader run two queries per row (10^5 rows: 108 s). The
    windows follow the rows: sparse rowids run about as many statements as dense ones."""
    path = profdb.write_profiler_db(tmp_path / "ascend_pytorch_profiler_0.db", KERNELS[1], extras=False,
                                    rows_to=3000)
    plain = kernel_groups_of(path)
    dense = _statements(path)
    with_sql(path, "UPDATE TASK SET rowid = rowid * (1 << 40)")
    assert kernel_groups_of(path) == plain
    assert _statements(path) <= dense + 4  # a window or two more (where the spread is found), never one per row


def _statements(path: Path) -> int:
    """SQL statements one read of TASK's columns runs."""
    ran: List[str] = []
    with database.ProfileDb(str(path)) as db:
        db.conn.set_trace_callback(ran.append)
        rows = sum(len(window[0]) for window in db.columns("task", [("t.rowid", database.INT)]))
    assert rows == 3000
    return len(ran)


@pytest.mark.parametrize("value", ["1e308", "-1e308", "9e999"])
def test_pmu_values_no_measurement_can_hold_read_as_unknown_without_numpy_warnings(tmp_path: Path, value: str,
                                                                                   capfd: pytest.CaptureFixture[str]
                                                                                   ) -> None:
    """Issue 33: PMU values of +-1e308 in a .db printed numpy overflow warnings (with source lines) on stderr."""
    import warnings

    from npudoctor.cli import main

    out = tmp_path / "rank"
    out.mkdir()
    path = profdb.write_profiler_db(out / "ascend_pytorch_profiler_0.db", KERNELS[1], extras=False)
    with_sql(path, f"UPDATE TASK_PMU_INFO SET value = CASE WHEN rowid % 2 = 0 THEN {value} ELSE -({value}) END")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any numpy RuntimeWarning fails the run
        result = cli_runner().invoke(main, ["prof", "analyze", str(out), "--format", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1), result.stderr
    assert "Warning" not in result.stderr + capfd.readouterr().err
    json.loads(result.stdout)
