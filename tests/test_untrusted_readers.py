"""Untrusted input, round three (issue 19): every reader bounded, one error class, one line for the user.

Each hostile input is built here; commands run in a child bounded by ``tests/bounded.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from npudoctor.parsers import jsondoc
from npudoctor.workload import memlog
from tests.bounded import run_npudoctor
from tests.test_runner import _alive

DEEP = "[" * 20000 + "]" * 20000  # 40 KB: a RecursionError in json.loads
DEEP_OBJECT = '{"a":' * 15000 + "1" + "}" * 15000  # 90 KB


def good_line(step: int, allocated: int = 1 << 30, **extra) -> str:
    record = memlog.make_record(step, "run1", allocated_bytes=allocated, reserved_bytes=2 << 30, device="npu:0")
    record.update(extra)
    return json.dumps(record) + "\n"


# -- point 3: one JSON loader with a depth guard ----------------------------------------------------------------
@pytest.mark.parametrize("text", [DEEP, DEEP_OBJECT, "[" * 100000, '{"a": ' + DEEP + "}"])
def test_the_loader_refuses_deep_nesting_in_one_line(text):
    for data in (text, text.encode()):
        with pytest.raises(jsondoc.JsonDocumentError, match=r"^x.json: nested deeper than 64 levels$"):
            jsondoc.loads(data, "x.json")


def test_the_loader_reads_ordinary_documents_and_counts_brackets_in_strings_as_text():
    assert jsondoc.loads('\ufeff{"a": "[[[[{{{{", "b": [1, {"c": "\\"]]]"}]}') == \
        {"a": "[[[[{{{{", "b": [1, {"c": '"]]]'}]}
    nested = "[" * 64 + "]" * 64
    assert jsondoc.loads(nested) is not None
    with pytest.raises(jsondoc.JsonDocumentError):
        jsondoc.loads("[" + nested + "]")
    for bad in ("", "{", b"\xff\xfe", "1" * 5000, "[1,]", '"unterminated'):
        with pytest.raises(jsondoc.JsonDocumentError):
            jsondoc.loads(bad)


def test_deep_json_is_one_line_in_leak_analyze_fleet_and_derive(tmp_path):
    log = tmp_path / "deep.jsonl"
    log.write_text(good_line(0) + "[" * 60000 + "\n")  # a line under the 64 KiB line cap
    result = run_npudoctor(["leak", "analyze", str(log)])
    assert result.rc in (0, 1) and "Traceback" not in result.stderr, result.stderr[-800:]
    only_deep = tmp_path / "only-deep.jsonl"
    only_deep.write_text("[" * 60000 + "\n")
    run_npudoctor(["leak", "analyze", str(only_deep)]).assert_one_line_error("no npudoctor.memlog/1 or /2 records")

    report = tmp_path / "report.json"
    report.write_text('{"schema": "npudoctor.report/1", "inventory": ' + DEEP_OBJECT + "}")
    result = run_npudoctor(["fleet", str(report)])
    result.assert_one_line_error("nested deeper than 64 levels")
    result.assert_cheap()
    result = run_npudoctor(["profile", "derive", str(report), "-o", str(tmp_path / "site.yaml")])
    result.assert_one_line_error("nested deeper than 64 levels")
    assert not (tmp_path / "site.yaml").exists()


def test_deep_info_json_is_a_problem_of_its_file_in_prof_analyze_and_check_prof(tmp_path):
    from tests.profdirs import msprof_collection

    prof = msprof_collection(tmp_path / "run")
    (prof / "device_0" / "info.json.0").write_text(DEEP)
    result = run_npudoctor(["prof", "analyze", str(tmp_path / "run"), "--format", "json"])
    assert "Traceback" not in result.stderr and result.rc in (0, 1), result.stderr[-800:]
    document = json.loads(result.stdout)
    assert "nested deeper than 64 levels" in json.dumps(document)
    result = run_npudoctor(["check", "--prof", str(tmp_path / "run"), "--format", "json"], kill_after_s=60)
    assert "Traceback" not in result.stderr and result.rc in (0, 1), result.stderr[-800:]
    json.loads(result.stdout)


def test_the_dashboard_follower_skips_a_deep_line(tmp_path):
    from npudoctor.live.training import TrainingFollow

    log = tmp_path / "mem.jsonl"
    log.write_text(good_line(0) + "[" * 60000 + "\n" + good_line(1))
    view = TrainingFollow(str(log)).poll()
    assert view.steps_seen == 2 and view.last["step"] == 1


def test_a_crash_of_the_dashboard_app_is_exit_1(monkeypatch):
    from click.testing import CliRunner

    pytest.importorskip("textual")
    from npudoctor.cli import main
    from npudoctor.report import terminal
    from npudoctor.tui import app as tui_app

    class Crashing:
        return_code = 1

        def __init__(self, *args, **kwargs):
            pass

        def run(self):
            pass

    monkeypatch.setattr(tui_app, "DashboardApp", Crashing)
    monkeypatch.setattr(terminal, "is_terminal", lambda stream: True)
    result = CliRunner().invoke(main, ["dashboard", "--demo", "--no-check"])
    assert result.exit_code == 1


# -- points 5 and 6: the memlog reader checks every field -------------------------------------------------------
HOSTILE_RECORDS = [
    {"allocated_bytes": int("9" * 4000)},  # json parses it; every float() of it overflows
    {"step": int("9" * 4000)},
    {"rss_bytes": -(1 << 70)},
    {"step_s": int("1" * 400)},
    {"run": [1]},
    {"run": {"a": 1}},
    {"device": 5},
    {"device": ["npu:0"]},
    {"allocated_bytes": "1024"},
    {"allocated_bytes": [1]},
    {"loss": {"x": 1}},
    {"step": 1.5},
    {"step": True},
    {"step": -3},
    {"device": "x" * 5000},
]


@pytest.mark.parametrize("change", HOSTILE_RECORDS, ids=lambda change: next(iter(change)))
def test_a_record_with_a_value_of_the_wrong_type_or_out_of_range_is_refused(change):
    record = json.loads(good_line(4))
    record.update(change)
    assert memlog.parse_line(json.dumps(record)) is None


def test_nan_and_missing_values_read_as_unknown_and_ordinary_records_keep_their_values():
    record = memlog.parse_line('{"schema":"npudoctor.memlog/1","step":3,"loss":NaN,"allocated_bytes":5.0}')
    assert record is not None and record["loss"] is None and record["allocated_bytes"] == 5.0
    assert record["run"] is None and record["device"] is None
    assert memlog.parse_line(good_line(7, allocated=(1 << 62)))["allocated_bytes"] == 1 << 62


def write_hostile_log(path, steps=40):
    lines = [good_line(step, (1 << 30) + step * (1 << 20)) for step in range(steps)]
    for index, change in enumerate(HOSTILE_RECORDS):
        record = json.loads(good_line(steps + index))
        record.update(change)
        lines.insert(3 + index * 2, json.dumps(record) + "\n")
    path.write_text("".join(lines))


def test_leak_analyze_judges_the_good_records_of_a_hostile_log(tmp_path):
    log = tmp_path / "hostile.jsonl"
    write_hostile_log(log)
    for fmt in ("text", "json"):
        result = run_npudoctor(["leak", "analyze", str(log), "--format", fmt])
        assert result.rc == 1 and "Traceback" not in result.stderr, result.stderr[-800:]
        result.assert_cheap()
    verdict = json.loads(result.stdout)
    assert verdict["kind"] == "device" and verdict["steps_total"] == 40 and verdict["device"] == "npu:0"


def test_the_dashboard_follower_refuses_a_4000_digit_integer_per_record(tmp_path):
    from npudoctor.live.training import TrainingFollow
    from npudoctor.tui import views

    log = tmp_path / "mem.jsonl"
    write_hostile_log(log)
    follow = TrainingFollow(str(log), clock=lambda: 1e9)
    view = follow.poll()
    assert view.steps_seen == 40 and view.verdict is not None and view.verdict.kind == "device"
    assert any("LEAK" in text for text, _style in views.training_lines(view))


def test_onboard_reads_the_good_records_of_a_hostile_memlog_and_writes_its_page(tmp_path):
    from npudoctor.fleet import onboard as engine
    from npudoctor.report import html

    log = tmp_path / "hostile.jsonl"
    write_hostile_log(log)
    records = engine.read_memory(str(log))
    assert len(records) == 40
    page = html.render({"schema": "npudoctor.report/1", "findings": []}, records)
    assert "Memory over training steps" in page


# -- point 7 (onboard) and point 15: bounded reading of a memlog ------------------------------------------------
def test_onboard_memlog_of_256_mib_is_read_thin(tmp_path):
    log = tmp_path / "big.jsonl"
    line = good_line(0).encode()
    count = (256 << 20) // len(line)
    with open(log, "wb") as handle:
        block = b"".join(good_line(step).encode() for step in range(4096))
        for _ in range(count // 4096):
            handle.write(block)
    script = ("import sys; from npudoctor.fleet.onboard import read_memory; "
              "records = read_memory(sys.argv[1]); print(len(records))")
    result = _run_python(script, str(log))
    assert result.rc == 0, result.stderr[-800:]
    assert 0 < int(result.stdout) <= 2 * 512 + 1
    assert result.peak_mib < 100, result.peak_mib


def _run_python(script: str, *args: str):
    import subprocess
    import sys
    import tempfile
    import time

    from tests.bounded import Bounded

    with tempfile.NamedTemporaryFile("r", delete=False) as hwm:
        measured = (f"import atexit\n{script}\n"
                    f"kib = next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
                    f"open({hwm.name!r}, 'w').write(kib)\n")
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", measured, *args], capture_output=True, text=True, timeout=120)
        peak = float(Path(hwm.name).read_text() or 0) / 1024
    os.unlink(hwm.name)
    return Bounded(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started, peak)


def test_leak_analyze_on_a_link_to_pagemap_returns(tmp_path):
    link = tmp_path / "pagemap.jsonl"
    os.symlink("/proc/self/pagemap", link)
    result = run_npudoctor(["leak", "analyze", str(link)])
    assert result.rc == 2 and "Traceback" not in result.stderr, result.stderr[-800:]
    result.assert_cheap()


def test_a_last_line_longer_than_the_tail_does_not_hide_the_records_before_it(tmp_path):
    log = tmp_path / "torn.jsonl"
    lines = [good_line(step, (1 << 30) + step * (1 << 20)) for step in range(64)]
    with open(log, "w") as handle:
        handle.write("".join(lines))
        handle.write('{"schema": "npudoctor.memlog/1", "junk": "' + "x" * (3 << 20))  # torn, no newline
    records = memlog.read_records(str(log), max_bytes=1 << 20)
    assert [r["step"] for r in records] == list(range(64))
    # ... and a window that starts inside a line drops only that line
    window = sum(len(line) for line in lines[54:]) + 5
    records = memlog.read_records(str(log), max_bytes=window)
    assert [r["step"] for r in records] == list(range(54, 64))


# -- point 11: npu-smi cells that are no reading ----------------------------------------------------------------
def odd_cell_table() -> str:
    from tests.nodes import B3_8CARD
    from tests.samples import sample_text

    lines = sample_text(B3_8CARD).splitlines()
    # NPU 0: power inf, temperature nan; its HBM total 1e400; NPU 1 is printed "1." and its power 9 x 40.
    lines[6] = lines[6].replace("91.1       ", "inf        ").replace("32  ", "nan ", 1)
    lines[7] = lines[7].replace("3397 / 65536", "3397 / 1e400")
    lines[9] = lines[9].replace("| 1     910B3", "| 1.    910B3").replace("88.6", "9" * 40)
    lines[10] = lines[10].replace("3396 / 65536", "1e309/ 65536")
    return "\n".join(lines) + "\n"


def test_parse_npu_smi_reads_inf_nan_and_huge_cells_as_no_reading(tmp_path):
    path = tmp_path / "odd.txt"
    path.write_text(odd_cell_table())
    result = run_npudoctor(["parse", "npu-smi", "--format", "json", str(path)])
    assert result.rc == 0, result.stderr[-800:]
    chips = json.loads(result.stdout)["chips"]  # json.loads would accept NaN: check the text too
    assert "NaN" not in result.stdout and "Infinity" not in result.stdout
    assert len(chips) == 8 and [c["npu_id"] for c in chips] == list(range(8))
    assert chips[0]["power_w"] is None and chips[0]["temp_c"] is None and chips[0]["hbm_total_mib"] is None
    assert chips[0]["hbm_used_mib"] == 3397 and chips[1]["power_w"] is None and chips[1]["hbm_used_mib"] is None
    assert chips[2]["power_w"] == 89.4
    result = run_npudoctor(["parse", "npu-smi", str(path)])
    assert result.rc == 0 and "Traceback" not in result.stderr, result.stderr[-800:]


def test_odd_npu_smi_cells_do_not_block_the_chip_checks(node):
    from npudoctor import api
    from npudoctor.model import Status

    node.npu_node(8, device_id="d802")
    node.command("npu-smi", stdout=odd_cell_table())
    report = api.run_checks(node.runner(), api.load_profile(), only=("pcie", "npu-smi"))
    statuses = {f.id: f.status for f in report.findings if f.id.startswith("SMI")}
    assert statuses["SMI001"] is Status.PASS, [f.detail for f in report.findings if f.id == "SMI001"]
    assert Status.ERROR not in statuses.values() and {"SMI002", "SMI003", "SMI004"} <= set(statuses)


# -- point 10: report shapes are checked (profile derive, fleet) and capped -------------------------------------
def report(**fields):
    document = {"schema": "npudoctor.report/1", "tool": {"profile": "default"}, "summary": {"pass": 1, "fail": 0},
                "findings": [{"id": "SMI001", "status": "pass", "title": "npu-smi runs"}],
                "inventory": {"hostname": "node-a", "driver": "23.0.7", "chips": {"count": 8, "model": "910B3"}}}
    for path, value in fields.items():
        *parents, leaf = path.split("__")
        target = document
        for parent in parents:
            target = target[parent]
        target[leaf] = value
    return document


WRONG_SHAPES = {
    "summary.fail many": report(summary__fail="many"),
    "summary.fail list": report(summary__fail=[1]),
    "summary list": report(summary=[1]),
    "tool string": report(tool="npudoctor"),
    "tool.profile list": report(tool__profile=["x"]),
    "inventory.chips list": report(inventory__chips=[8]),
    "inventory.chips string": report(inventory__chips="8"),
    "host list": report(host=["node-a"]),
    "host.hostname object": report(host={"hostname": {"a": 1}}),
    "inventory.hostname int": report(inventory__hostname=5),
    "status list": report(findings=[{"id": "SMI001", "status": ["fail"]}]),
    "id object": report(findings=[{"id": {"a": 1}, "status": "fail"}]),
    "finding string": report(findings=["SMI001"]),
    "findings object": report(findings={"SMI001": "fail"}),
    "run list": report(run=[1]),
    "inventory NaN": report(inventory__driver=float("nan")),
}


@pytest.mark.parametrize("name", sorted(WRONG_SHAPES))
def test_profile_derive_names_the_field_of_the_wrong_type(tmp_path, name):
    from npudoctor.fleet import derive

    path = tmp_path / "report.json"
    path.write_text(json.dumps(WRONG_SHAPES[name]))
    with pytest.raises(derive.DeriveError, match=r"report.json: .*expected"):
        derive.load_source(str(path))


def test_derive_and_fleet_on_wrong_shapes_are_one_line_errors(tmp_path):
    paths = []
    for index, name in enumerate(sorted(WRONG_SHAPES)):
        paths.append(tmp_path / f"r{index}.json")
        paths[-1].write_text(json.dumps(WRONG_SHAPES[name]))
    result = run_npudoctor(["profile", "derive", str(paths[0]), "-o", str(tmp_path / "site.yaml")])
    result.assert_one_line_error("expected")
    result = run_npudoctor(["fleet", "--format", "json", *map(str, paths)])
    result.assert_one_line_error("no readable npudoctor report")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report()))
    result = run_npudoctor(["fleet", "--format", "json", str(good), *map(str, paths)])
    assert "Traceback" not in result.stderr, result.stderr[-800:]
    document = json.loads(result.stdout)
    assert document["summary"]["nodes"] == 1 and len(document["unreadable"]) == len(WRONG_SHAPES)
    assert all("expected" in entry["reason"] for entry in document["unreadable"]), document["unreadable"]


def test_a_good_report_derives_and_reads_as_before(tmp_path):
    from npudoctor.fleet import derive, view

    path = tmp_path / "report.json"
    path.write_text(json.dumps(report()))
    document, _source = derive.load_source(str(path))
    assert "910B3" in derive.derive(document, "report")
    assert view.build([str(path)]).nodes[0].name == "node-a"


def test_reports_that_bring_too_much_are_refused_with_bounded_memory(tmp_path):
    ids = [{"id": f"X{i:06d}", "status": "fail"} for i in range(100_000)]
    keys = {f"k{i:06d}": 1 for i in range(250_000)}
    too_many_ids, too_many_keys = json.dumps(report(findings=ids)), json.dumps(report(inventory=keys))
    paths = []
    for index in range(3):
        paths.append(tmp_path / f"ids{index}.json")
        paths[-1].write_text(too_many_ids)
        paths.append(tmp_path / f"keys{index}.json")
        paths[-1].write_text(too_many_keys)
    result = run_npudoctor(["fleet", *map(str, paths)], kill_after_s=60)
    result.assert_one_line_error("findings: more than 20000")
    assert "inventory: more than 1000 fields" in result.stderr
    assert result.peak_mib < 150, result.peak_mib


def test_the_fleet_compares_a_bounded_number_of_fields_and_says_so():
    from npudoctor.fleet import view

    documents = [(report(inventory={"hostname": f"n{n}", **{f"k{n}_{i}": i for i in range(900)}}), f"r{n}")
                 for n in range(6)]
    fleet = view.from_documents(documents)
    assert len(fleet.nodes) == 6 and len(fleet.fields) == view.MAX_FLEET_FIELDS
    assert fleet.fields_not_compared == 1 + 6 * 900 - view.MAX_FLEET_FIELDS  # hostname is shared
    assert "not compared" in view.render_text(fleet)
    assert view.to_dict(fleet)["fields_not_compared"] == fleet.fields_not_compared


# -- point 8: profiler tables of odd shapes; numbers out of range are unreadable cells --------------------------
def prof_run(tmp_path, api_statistic=None, edit_op_summary=None):
    from tests.profdirs import TS, msprof_collection

    prof = msprof_collection(tmp_path / "run")
    out = prof / "mindstudio_profiler_output"
    if api_statistic is not None:
        (out / f"api_statistic_{TS}.csv").write_text(api_statistic)
    if edit_op_summary is not None:
        path = out / f"op_summary_{TS}.csv"
        path.write_text(edit_op_summary(path.read_text()))
    return str(tmp_path / "run")


def analyze_json(folder):
    result = run_npudoctor(["prof", "analyze", folder, "--format", "json"], kill_after_s=60)
    assert result.rc in (0, 1) and "Traceback" not in result.stderr, result.stderr[-1500:]
    assert "NaN" not in result.stdout and "Infinity" not in result.stdout
    return json.loads(result.stdout)


def edit_cells(text, row, cells):
    """``text`` (a CSV table) with ``cells`` (column name -> new text) changed in data row ``row``."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(text)))
    for name, value in cells.items():
        rows[row + 1][rows[0].index(name)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


API_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"


@pytest.mark.parametrize("table", [
    "Device_id,Level,API Name,Time(us),Avg(us)\nhost,acl,aclnnInplaceCopy,351.99,17.6\n",  # no Count
    API_HEADER,  # a header only
    API_HEADER + "host,acl,aclnnInplaceCopy,351.99,1e309,17.6,10.27,71.45,181.029\n",  # Count 1e309
    API_HEADER + "host,acl,aclnnInplaceCopy,inf,20,17.6,10.27,71.45,181.029\n"
                 "host,acl,aclrtLaunch,nan,20,17.6,10.27,71.45,181.029\n"
                 "host,acl,aclrtSync,48.11,-1e400,17.6,10.27,71.45,181.029\n",
], ids=["no-count", "header-only", "count-1e309", "time-inf-nan"])
def test_api_statistic_of_odd_shapes_is_read_or_said(tmp_path, table):
    document = analyze_json(prof_run(tmp_path, api_statistic=table))
    assert document["findings"], document


def test_an_out_of_range_count_is_an_unreadable_cell_and_counted(tmp_path):
    table = API_HEADER + ("host,acl,aclnnInplaceCopy,351.99,1e309,17.6,10.27,71.45,181.029\n"
                          "host,acl,aclrtSync,48.11,2,24.055,13.63,34.48,108.681\n")
    document = analyze_json(prof_run(tmp_path, api_statistic=table))
    assert "1 cell(s) with a number out of range" in json.dumps(document)


def test_block_dim_1e309_does_not_crash_prof004(tmp_path):
    def edit(text):
        return edit_cells(text, 0, {"Block Num": "1e309", "Task Duration(us)": "1e309"})

    document = analyze_json(prof_run(tmp_path, edit_op_summary=edit))
    prof004 = [f for f in document["findings"] if f["id"] == "PROF004"]
    assert prof004 and all(f["status"] != "error" for f in prof004), prof004
    assert "cell(s) with a number out of range" in json.dumps(document)


def test_the_json_writer_never_writes_nan_or_infinity():
    from npudoctor.report import json_report

    text = json_report.dumps({"a": float("nan"), "b": [float("inf"), {"c": -float("inf")}], "d": 1.5})
    assert json.loads(text) == {"a": None, "b": [None, {"c": None}], "d": 1.5}


# -- point 18: a cell over 1 MiB; a library truncated while libs maps it ---------------------------------------
def test_a_cell_over_a_mib_does_not_drop_the_rest_of_the_table(tmp_path):
    def edit(text):
        return edit_cells(text, 2, {"Input Shapes": "1;" * (1 << 20)})  # 2 MiB, over Arrow's 1 MiB block

    plain = analyze_json(prof_run(tmp_path / "plain"))
    wide = analyze_json(prof_run(tmp_path / "wide", edit_op_summary=edit))
    assert "straddl" not in json.dumps(wide)

    # The checks that read Input Shapes see the edited shape as a shape of its own: only the rest must match,
    # and the edited task must still be counted (PROF024 judges all 20 Slice tasks in both).
    shape_checks = {"PROF022", "PROF023", "PROF024", "PROF025"}

    def verdicts(document):
        return [(f["id"], f["subject"], f["status"], f["detail"]) for f in document["findings"]
                if f["id"] not in shape_checks]

    assert verdicts(wide) == verdicts(plain)

    def vector_tasks(document):
        (finding,) = [f for f in document["findings"] if f["id"] == "PROF024"]
        return finding["status"], sum(entry["count"] for entry in finding["evidence"]["operators"])

    assert vector_tasks(wide) == vector_tasks(plain) == ("warn", 20)


@pytest.mark.parametrize("arrow", [True, False], ids=["arrow", "pandas"])
def test_both_table_readers_empty_and_count_numbers_out_of_range(tmp_path, monkeypatch, arrow):
    from npudoctor.prof import tables
    from npudoctor.prof.columns import column_map

    monkeypatch.setattr(tables, "USE_ARROW", arrow)
    path = tmp_path / "api_statistic.csv"
    path.write_text(API_HEADER + "".join(f"host,acl,api{i},{t},{c},1,1,1,1\n" for i, (t, c) in enumerate(
        [("1.5", "2"), ("inf", "3"), ("2.5", "1e309"), ("-1e400", "-inf"), ("1e19", "4"), ("3.5", "5")])))
    problems = []
    _resolved, frame = tables.read_small(str(path), column_map("api_statistic"), ["api_name", "total_us", "count"],
                                         ["total_us", "count"], problems)
    assert frame["total_us"].tolist()[0] == 1.5 and frame["total_us"].isna().tolist() == [
        False, True, False, True, True, False]
    assert frame["count"].isna().tolist() == [False, False, True, True, False, False]
    assert problems == [f"{path}: 5 cell(s) with a number out of range read as empty"]


# -- point 14: a PROF_* entry that is a file or a FIFO ---------------------------------------------------------
def test_prof_run_passes_over_a_prof_file_or_fifo_and_analyses_the_rest(tmp_path):
    from tests.test_prof_run import fake_env, npudoctor

    env = fake_env(tmp_path)
    made = "touch out/PROF_000001_1_FILE && mkfifo out/PROF_000002_2_FIFO && ln -s / out/PROF_000003_3_LINK"
    out = npudoctor(["prof", "run", "-o", "out", "--format", "json", "--", "sh", "-c", made], env, tmp_path)
    assert "Traceback" not in out.stderr and out.returncode in (0, 1), out.stderr[-1500:]
    document = json.loads(out.stdout)
    assert document["ranks"] and document["ranks"][0]["by_core"] == {"AI_VECTOR_CORE": 20}
    for name in ("PROF_000001_1_FILE", "PROF_000002_2_FIFO", "PROF_000003_3_LINK"):
        assert f"{name}: not a folder" in out.stderr


# -- point 9: nothing npudoctor started runs after it returns ---------------------------------------------------
LEFTOVERS = r"""
(trap '' INT TERM; exec sleep 600) & echo $! > "$D/ignoring"
setsid sh -c 'sleep 600 & echo $! > "$D/daemon"' &
sleep 600 & echo $! > "$D/background"
while [ ! -s "$D/daemon" ]; do sleep 0.02; done
echo $$ > "$D/ready.tmp" && mv "$D/ready.tmp" "$D/ready"
[ "$MODE" = exit ] && exit 0
sleep 600
"""


def _wait_for(path, process, what):
    import time

    while not path.exists():  # the event: the command has started all its children
        assert process.poll() is None, (what, process.communicate())
        time.sleep(0.02)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
@pytest.mark.parametrize("mode", ["exit", "ctrl-c", "timeout"])
def test_prof_run_leaves_no_process_behind(tmp_path, mode):
    import signal
    import subprocess
    import sys

    from tests.test_prof_run import fake_env

    env = fake_env(tmp_path, D=str(tmp_path), MODE=mode)
    script = tmp_path / "app.sh"
    script.write_text(LEFTOVERS)
    timeout_s = 8.0 if mode == "timeout" else 600.0
    launcher = ("import shutil, sys; from npudoctor.prof import launch; "
                "o = launch.run_profiled(shutil.which('msprof'), sys.argv[1], ['sh', sys.argv[2]], "
                f"timeout_s={timeout_s}, grace_s=0.5); print(o.exit_code, o.timed_out, o.interrupted)")
    process = subprocess.Popen([sys.executable, "-c", launcher, str(tmp_path / "out"), str(script)], env=env,
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if mode == "ctrl-c":
        _wait_for(tmp_path / "ready", process, mode)
        process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-1500:]
    assert (tmp_path / "ready").exists(), (stdout, stderr)
    assert stdout.splitlines()[-1].split() == {"exit": ["0", "False", "False"], "ctrl-c": ["130", "False", "True"],
                              "timeout": ["124", "True", "False"]}[mode]
    pids = {name: int((tmp_path / name).read_text()) for name in ("ignoring", "daemon", "background", "ready")}
    left = [name for name, pid in pids.items() if _alive(pid)]
    for name in left:  # a failing run must not leave them to the rest of the suite either
        os.kill(pids[name], signal.SIGKILL)
    assert not left, pids


# torchrun stands for itself: workers in sessions of their own (start_new_session=True, as torchrun starts them),
# one ignoring SIGTERM, one detaching further (a double fork), then the parent waits or exits.
FAKE_TORCHRUN = r"""
import os, signal, subprocess, sys, time
d, mode = sys.argv[1], sys.argv[2]
stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
workers = [subprocess.Popen([sys.executable, "-c", stubborn], start_new_session=True),
           subprocess.Popen(["sh", "-c", "sleep 600 & echo $! > " + d + "/detached"], start_new_session=True)]
workers[1].wait()
pids = [w.pid for w in workers[:1]] + [int(open(d + "/detached").read())]
with open(d + "/pids.tmp", "w") as handle:
    handle.write(" ".join(map(str, pids + [os.getpid()])))
os.rename(d + "/pids.tmp", d + "/pids")
print("rank 0 waiting", flush=True)
if mode == "exit":
    sys.exit(0)
time.sleep(600)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
@pytest.mark.parametrize("mode", ["exit", "ctrl-c", "timeout"])
def test_collective_leaves_no_rank_behind(tmp_path, mode):
    import signal
    import subprocess
    import sys

    fake = tmp_path / "torchrun.py"
    fake.write_text(FAKE_TORCHRUN)
    timeout_s = 8.0 if mode == "timeout" else 600.0
    launcher = ("import os, sys; from npudoctor.fleet import collective as probe; probe.STOP_GRACE_S = 0.5\n"
                "try:\n"
                f"    code, output = probe.run_group([sys.executable, sys.argv[1], sys.argv[2], sys.argv[3]], "
                f"{timeout_s}, os.environ)\n"
                "    print(code, 'rank 0 waiting' in output)\n"
                "except KeyboardInterrupt:\n"
                "    print('interrupted')\n")
    process = subprocess.Popen([sys.executable, "-c", launcher, str(fake), str(tmp_path), mode],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if mode == "ctrl-c":
        _wait_for(tmp_path / "pids", process, mode)
        process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-1500:]
    assert stdout.split() == {"exit": ["0", "True"], "ctrl-c": ["interrupted"], "timeout": ["None", "True"]}[mode]
    pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
    left = [pid for pid in pids if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, pids


def test_collective_keeps_a_bounded_head_and_tail_of_a_gigabyte_of_output(tmp_path):
    noisy = ("import sys; block = b'x' * 1023 + b'\\n'; sys.stdout.buffer.write(b'first error EI0006\\n'); "
             "[sys.stdout.buffer.write(block * 1024) for _ in range(1024)]; "
             "sys.stdout.buffer.write(b'last line of torchrun\\n'); sys.exit(1)")
    script = ("import os, sys; from npudoctor.fleet import collective as probe\n"
              "code, output = probe.run_group([sys.executable, '-c', sys.argv[1]], 600, os.environ)\n"
              "print(code, len(output), output.startswith('first error EI0006'), "
              "output.rstrip().endswith('last line of torchrun'), 'bytes of output not kept' in output)\n")
    result = _run_python(script, noisy)
    assert result.rc == 0, result.stderr[-1500:]
    code, size, head, tail, said = result.stdout.split()
    assert (code, head, tail, said) == ("1", "True", "True", "True") and int(size) < 400 << 10
    assert result.peak_mib < 100, result.peak_mib


# -- point 7: many tiny rank folders ----------------------------------------------------------------------------
KERNEL = ("Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\n"
          "1,0,op,MatMul,AI_CORE,1,30,0,20\n")


def tiny_ranks(root, count):
    for index in range(count):
        output = root / f"worker{index:05d}_1_20230628101435_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        output.mkdir(parents=True)
        (output / "kernel_details.csv").write_text(KERNEL)
    return root


def test_prof_analyze_caps_the_number_of_sources_and_says_so(tmp_path):
    root = tiny_ranks(tmp_path / "ranks", 60)
    script = ("import sys; from npudoctor.prof import layout; layout.MAX_SOURCES = 25\n"
              "from npudoctor.cli import main\n"
              "main(['prof', 'analyze', sys.argv[1], '--format', 'json'])\n")
    result = _run_python(script, str(root))
    assert result.rc in (0, 1), result.stderr[-1500:]
    document = json.loads(result.stdout)
    assert len(document["ranks"]) == 25
    assert any("more than 25 profiling sources" in p for p in document["problems"]), document["problems"]


def test_the_walk_stops_after_max_folders(tmp_path, monkeypatch):
    from npudoctor.prof import layout

    for index in range(40):
        (tmp_path / "empty" / f"d{index:03d}").mkdir(parents=True)
    tiny_ranks(tmp_path / "empty" / "zzz", 1)
    monkeypatch.setattr(layout, "MAX_FOLDERS", 30)
    sources, problems = layout.discover([str(tmp_path / "empty")])
    assert sources == [] and problems == [f"{tmp_path / 'empty'}: more than 30 folders; the walk stopped there"]


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGBUS"), reason="SIGBUS is a POSIX signal")
def test_a_library_truncated_while_mapped_is_a_one_line_error_not_sigbus(tmp_path):
    import _ctypes
    import shutil

    library = _ctypes.__file__  # any shared object larger than a few pages
    copy = tmp_path / "libvictim.so"
    shutil.copyfile(library, copy)
    script = ("import os, sys; from npudoctor.elf.reader import open_elf\n"
              "elf = open_elf(sys.argv[1])\n"
              "os.truncate(sys.argv[1], 4096)  # another process replaces the library in place\n"
              "print(len(bytes(elf.data[len(elf.data) - 8192:])))\n")
    result = _run_python(script, str(copy))
    assert result.rc == 2, (result.rc, result.stderr[-800:])
    assert result.stderr.splitlines() == ["npudoctor: error: a library shrank while npudoctor read it (replaced or "
                                          "truncated during the run); run it again"]


def test_onboard_with_a_hostile_memlog_writes_all_three_records(node, tmp_path, monkeypatch):
    from npudoctor.fleet import onboard as engine
    from npudoctor.report import html
    from tests.nodes import healthy_910b_node

    healthy_910b_node(node)
    log = tmp_path / "hostile.jsonl"
    write_hostile_log(log)
    out = tmp_path / "accept"
    engine.onboard(str(out), "atlas800t-a2-8x910b", engine.CollectiveOptions(run=False),
                   {"python": None, "logs_dirs": ()}, root=str(node.root), environ=node.env,
                   memory=engine.read_memory(str(log)))
    assert sorted(p.name for p in out.iterdir()) == ["bundle.tar.gz", "report.html", "report.json"]
    assert "Memory over training steps" in (out / "report.html").read_text()

    def broken(*args):
        raise RuntimeError("a page that cannot be drawn")

    monkeypatch.setattr(html, "render", broken)
    with pytest.raises(RuntimeError):
        engine.onboard(str(tmp_path / "again"), "atlas800t-a2-8x910b", engine.CollectiveOptions(run=False),
                       {"python": None, "logs_dirs": ()}, root=str(node.root), environ=node.env)
    assert "report.json" not in {p.name for p in (tmp_path / "again").iterdir()}  # never one without the other


def test_the_dashboard_follower_reads_nothing_from_a_link_to_pagemap(tmp_path):
    from npudoctor.workload import memlog

    link = tmp_path / "pagemap.jsonl"
    os.symlink("/proc/self/pagemap", link)
    tail = memlog.MemlogTail(str(link))
    assert tail.poll() == [] and tail.poll() == [] and tail._offset == 0


def test_the_dashboard_app_shows_a_hostile_followed_log(tmp_path):
    import asyncio

    pytest.importorskip("textual")
    from tests.test_dashboard_app import make_app, poll, text_of

    log = tmp_path / "hostile.jsonl"
    lines = [good_line(step, (1 << 30) + step * (1 << 20)) for step in range(40)]
    lines.insert(30, good_line(30, int("9" * 4000)))  # the same run: inside the judged window
    log.write_text("".join(lines))

    async def scenario():
        app, _sampler, clock = make_app(follow=str(log))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("3")
            clock.t += 5
            await poll(app, pilot)
            training = text_of(app, "#training-text")
            assert "step 39" in training and "LEAK (device)" in training, training
        assert app.return_code in (None, 0)

    asyncio.run(scenario())
