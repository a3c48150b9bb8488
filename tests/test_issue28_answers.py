"""Issue 28: answers a user can act on: the verdict names the most severe thing found, every command takes
one ``--fail-on`` vocabulary, and the smaller points, each in a test that failed before the fix."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from npudoctor.cli import main
from tests import profdirs
from tests.clirunner import cli_runner
from tests.samples import sample_path


def _verdict(output: str) -> str:
    """The verdict sentence, unwrapped: the lines after the summary line ("N findings in M checks")."""
    lines = output.rstrip("\n").splitlines()
    summary = max(i for i, line in enumerate(lines) if " findings in " in line or " finding in " in line)
    return " ".join(lines[summary + 1:])


def test_check_verdict_names_the_warning_instead_of_no_problems_found():
    result = cli_runner().invoke(main, ["check", "--demo", "chip-warning"])
    verdict = _verdict(result.stdout)
    assert result.exit_code == 0
    assert verdict.startswith("1 warning on 8x Ascend 910B3: SMI002 npu:3/chip:0 910B3: health Warning"), verdict
    assert "No problems found" not in verdict


def test_npd_does_not_say_ok_beside_a_chip_in_warning():
    result = cli_runner().invoke(main, ["check", "--demo", "chip-warning", "--format", "npd"])
    assert result.exit_code == 0 and "OK" not in result.output and "SMI002" in result.output


def test_github_error_annotation_says_what_failed_the_run():
    result = cli_runner().invoke(main, ["check", "--demo", "chip-warning", "--format", "github", "--fail-on", "warn"])
    last = result.stdout.splitlines()[-1]
    assert result.exit_code == 1 and last.startswith("::error ")
    assert "No problems found" not in last and "SMI002" in last and last.endswith("exit 1")


def test_prof_verdict_names_a_warning_for_a_step_half_communication(tmp_path: Path):
    profdirs.torch_npu_rank(tmp_path, rank=0)  # the step: 50% non-overlapped communication, 24% idle
    result = cli_runner().invoke(main, ["prof", "analyze", str(tmp_path)])
    verdict = _verdict(result.stdout)
    assert "No problems found" not in verdict and verdict.startswith("5 warnings in 1 rank: PROF"), verdict


@pytest.mark.parametrize("args", [
    ["check", "--demo", "chip-warning"],
    ["logs", "scan", str(sample_path("atc_success_W11001_constructed.txt"))],
])
@pytest.mark.parametrize("word, fails", [("fail", False), ("error", False), ("FAIL", False), ("warn", True)])
def test_one_fail_on_vocabulary_for_check_and_logs_scan(args, word, fails):
    """check took warn|fail, logs scan error|warn|... and refused fail: both take fail, error and warn now
    (both demos hold warnings and no error)."""
    result = cli_runner().invoke(main, [*args, "--fail-on", word])
    assert result.exit_code == (1 if fails else 0), result.output


@pytest.mark.parametrize("args", [["prof", "analyze", "x"], ["onboard"], ["ops", "audit", "--model", "tiny"]])
def test_every_command_refuses_an_unknown_fail_on_word_naming_the_one_vocabulary(args):
    result = cli_runner().invoke(main, [*args, "--fail-on", "bogus"])
    assert result.exit_code == 2
    assert result.stderr.startswith("npudoctor: error: Invalid value for '--fail-on': 'bogus': expected fail (or "
                                    "error), warn")
    assert result.stderr.count("\n") == 1


def test_ops_audit_takes_the_common_words_beside_fallback():
    from npudoctor.cli.common import FailOn

    kind = FailOn(["fallback"])
    assert [kind.convert(w, None, None) for w in ("fail", "Error", "warn", "fallback")] == [
        "fail", "fail", "warn", "fallback"]


@pytest.mark.parametrize("args, says", [
    (["chek"], "No such command 'chek'"),
    (["--bogus"], "No such option '--bogus'"),
    (["check", "--level", "9"], "Invalid value for '--level'"),
    (["logs", "scan"], "Missing argument 'PATH...'"),
])
def test_click_usage_errors_are_one_npudoctor_error_line(args, says):
    result = cli_runner().invoke(main, args)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"npudoctor: error: {says}") and result.stderr.count("\n") == 1
    assert "--help)" in result.stderr


@pytest.mark.parametrize("option", ["--logs", "--prof"])
def test_check_demo_with_a_folder_of_this_machine_is_refused_in_one_line(tmp_path, option):
    result = cli_runner().invoke(main, ["check", "--demo", "healthy", option, str(tmp_path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"npudoctor: error: --demo replays a shipped scenario; {option}")
    assert result.stderr.count("\n") == 1


def test_check_from_a_report_says_it_is_a_report_not_a_bundle(tmp_path):
    report = tmp_path / "report.json"
    report.write_text(cli_runner().invoke(main, ["check", "--demo", "healthy", "--format", "json"]).stdout)
    result = cli_runner().invoke(main, ["check", "--from", str(report)])
    assert result.exit_code == 2 and "could not be opened" not in result.stderr
    assert "a report (npudoctor.report/1), not a bundle" in result.stderr and "npudoctor fleet" in result.stderr


def test_demo_list_and_banner_fit_80_columns():
    listing = cli_runner().invoke(main, ["check", "--demo", "list"])
    assert listing.exit_code == 0 and max(len(line) for line in listing.stdout.splitlines()) <= 80
    assert "driver-not-reloaded" in listing.stdout
    for name in ("driver-not-reloaded", "healthy", "setenv-not-sourced"):
        banner = cli_runner().invoke(main, ["check", "--demo", name, "--only", "DRV"]).stderr
        assert f"demo scenario {name}:" in banner and max(len(line) for line in banner.splitlines()) <= 80


def test_a_node_whose_driver_passed_is_not_told_to_install_the_driver():
    result = cli_runner().invoke(main, ["check", "--demo", "healthy"])
    text = " ".join(result.stdout.split())
    assert "install the NPU driver" not in text and "the driver is installed without its tools" in text


def test_profile_derive_refuses_a_node_that_is_not_accepted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the names as a user types them: the lines printed then fit 80 columns
    Path("node.json").write_text(cli_runner().invoke(main, ["check", "--demo", "unbound-device", "--format",
                                                            "json"]).stdout)
    refused = cli_runner().invoke(main, ["profile", "derive", "node.json", "-o", "site.yaml"])
    assert refused.exit_code == 1 and not Path("site.yaml").exists()
    assert "not accepted (FAIL/ERROR: PCI002)" in refused.stderr and refused.stderr.count("\n") == 1
    forced = cli_runner().invoke(main, ["profile", "derive", "node.json", "-o", "site.yaml", "--allow-failing"])
    assert forced.exit_code == 0 and Path("site.yaml").exists() and "PCI002" in forced.stderr
    assert max(len(line) for line in forced.stdout.splitlines()) <= 80


def _audit_text(ops, release="2.1.0"):
    from npudoctor.ops import oplist
    from npudoctor.ops.judge import AuditResult
    from npudoctor.report import ops_console
    from npudoctor.report.console import make_console

    result = AuditResult(ops, oplist.read_shipped(release), "2.13.0+cpu", 3, {}, [])
    buffer = io.StringIO()
    ops_console.render(result, make_console(buffer, color=False, width=80), what="train.py", run_line="ran")
    return result, " ".join(buffer.getvalue().split())


def test_ops_audit_says_one_operator_in_the_singular():
    from npudoctor.ops.judge import JudgedOp

    result, text = _audit_text([JudgedOp("aten::add.Tensor", "native", 3, "in the list")])
    assert "All 1 operators" not in text
    assert result.verdict_line() == "The one operator reached runs on the NPU with torch_npu 2.1.0"


def test_ops_audit_fallback_names_the_release_that_runs_it_on_the_npu():
    from npudoctor.ops import oplist
    from npudoctor.ops.judge import JudgedOp

    fallback = "no NPU kernel and no composite kernel: torch_npu runs it on the CPU"
    _, text = _audit_text([JudgedOp("aten::isin.Tensor_Tensor_out", "fallback", 5, fallback),
                           JudgedOp("aten::no_kernel_anywhere", "fallback", 1, fallback)])
    assert "fix: torch_npu 2.1.0.post8 runs it on the NPU (shipped list)" in text
    newest = oplist.shipped_releases()[-1]
    assert f"fix: no shipped torch_npu list (up to {newest}) runs it on the NPU" in text


@pytest.mark.parametrize("spread", [1, 1_000_000_007])
def test_a_db_table_with_rowids_far_apart_is_read_in_windows_of_rows_not_of_rowids(tmp_path, monkeypatch, spread):
    """The .db test that took 126 s: TASK rowids 10**9 apart were read one row per window (two queries a row)."""
    from npudoctor.prof import database
    from tests import profdb
    from tests.test_prof_db import KERNELS, with_sql

    path = profdb.write_profiler_db(tmp_path / "ascend_pytorch_profiler_0.db", KERNELS[1], extras=False,
                                    rows_to=3000)
    with_sql(path, f"UPDATE TASK SET rowid = rowid * {spread}")
    monkeypatch.setattr(database, "CHUNK_ROWS", 500)
    with database.ProfileDb(str(path)) as db:
        windows = [ids for (ids,) in db.columns("task", [(db.col("task", "global_task_id", "t"), database.INT)])]
    assert sum(len(ids) for ids in windows) == 3000
    assert len(windows) <= 3000 // 500 + 2


def test_prof_analyze_folds_the_checks_that_could_not_apply_into_one_line_naming_each(tmp_path: Path):
    profdirs.torch_npu_rank(tmp_path, rank=0)
    text = cli_runner().invoke(main, ["prof", "analyze", str(tmp_path)]).stdout
    skip_lines = [line for line in text.splitlines() if line.startswith("  - ")]
    assert len(skip_lines) == 1 and skip_lines[0].startswith("  - 17 checks could not apply (PROF002, PROF003,")
    assert "PROF031, PROF032, PROF033, PROF034, PROF035): -v shows what each needs" in " ".join(text.split())
    verbose = cli_runner().invoke(main, ["prof", "analyze", str(tmp_path), "-v"]).stdout
    assert len([line for line in verbose.splitlines() if line.startswith("  - PROF")]) == 17


def test_onboard_memlog_is_judged_as_leak_analyze_judges_it(node, tmp_path):
    """onboard --memlog drew the plot and judged nothing (Workload pass) where leak analyze failed TRN003."""
    from npudoctor.fleet import onboard as engine
    from tests.nodes import healthy_910b_node
    from tests.samples import sample_data
    from tests.test_commands_house_style import LEAK_LOG

    log = tmp_path / "mem.jsonl"
    log.write_bytes(sample_data(LEAK_LOG))
    analyzed = cli_runner().invoke(main, ["leak", "analyze", str(log), "--format", "json"])
    assert analyzed.exit_code == 1
    healthy_910b_node(node)
    result = engine.onboard(str(tmp_path / "accept"), "atlas800t-a2-8x910b", engine.CollectiveOptions(run=False),
                            {"python": None, "logs_dirs": ()}, root=str(node.root), environ=node.env,
                            memory=engine.read_memory(str(log)), memlog_path=str(log))
    judged = [f for f in result.report.findings if f.id == "TRN003"]
    assert [f.status.value for f in judged][-1:] == ["fail"] and "leak" in judged[-1].detail
    assert result.report.exit_code() == 1


def test_memory_plot_axis_spans_the_values_not_zero():
    from npudoctor.report import html

    series = {"rss": [(float(step), 4000.0 + step) for step in range(20)]}
    chart = html.line_chart(series, "training step", "MiB", "Memory over training steps", from_zero=False)
    y_labels = re.findall(r'text-anchor="end">([^<]*)<', chart)
    assert y_labels == ["4019", "3999"]
    assert re.findall(r'text-anchor="end">([^<]*)<', html.line_chart(series, "x", "y", "t")) == ["4019", "0"]


def test_a_clean_memory_log_shows_no_sign_of_a_rise_not_half_a_confidence(tmp_path):
    from npudoctor.workload import memlog

    log = tmp_path / "flat.jsonl"
    log.write_text("".join(json.dumps(memlog.make_record(step, "run1", allocated_bytes=400 * 2 ** 20 + (step % 3),
                                                          reserved_bytes=512 * 2 ** 20)) + "\n"
                           for step in range(60)))
    result = cli_runner().invoke(main, ["leak", "analyze", str(log)])
    assert result.exit_code == 0 and "confidence of a rise" not in result.stdout
    assert "no sign of a rise in allocated_bytes (trend confidence " in result.stdout


def test_a_kernel_details_csv_under_another_name_is_known_by_its_columns(tmp_path):
    from tests.samples import sample_text

    mine = tmp_path / "my_kernels.csv"
    mine.write_text(sample_text("prof_kernel_details_memory_metrics.csv"))
    result = cli_runner().invoke(main, ["prof", "analyze", str(mine), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["ranks"][0]["kernel_rows"] == 20
    other = tmp_path / "people.csv"
    other.write_text("name,age,town\nada,36,london\n")
    refused = cli_runner().invoke(main, ["prof", "analyze", str(other)])
    assert refused.exit_code == 2 and "neither its name nor its header row" in refused.stderr
    assert len(refused.stderr.strip()) - len(str(other)) <= 160


@pytest.mark.parametrize("key", ["dcmi-8020_device", "partial-ellipsis"])
def test_parse_npu_smi_failure_header_and_partial_note_fit_80_columns(tmp_path, key):
    from tests.samples import smi

    path = tmp_path / "paste.txt"
    path.write_text(smi(key))
    result = cli_runner().invoke(main, ["parse", "npu-smi", str(path)])
    lines = (result.stdout + result.stderr).splitlines()
    assert lines and max(len(line) for line in lines) <= 80


def test_onboard_console_has_the_house_header_fix_lines_and_the_verdict_last(node, tmp_path):
    from tests.nodes import healthy_910b_node

    healthy_910b_node(node)
    node.setenv(HCCL_CONNECT_TIMEOUT="5")  # a FAIL with a fix: HCCL005
    result = cli_runner().invoke(main, ["onboard", "--profile", "atlas800t-a2-8x910b", "-o", str(tmp_path / "o"),
                                        "--root", str(node.root), "--no-collective"], env=node.env)
    lines = result.stdout.splitlines()
    assert re.match(r"npudoctor \S+ onboard on \S+, \d{4}-\d\d-\d\d \d\d:\d\d UTC$", lines[0]), lines[0]
    assert "HCCL005" in result.stdout and "      fix: " in result.stdout
    assert result.exit_code == 1 and _verdict(result.stdout).startswith("NOT ACCEPTED: ")
    assert max(len(line) for line in lines) <= 80


def test_collective_verdict_is_worded_as_every_command_words_it():
    from npudoctor import api
    from npudoctor.fleet import collective as probe
    from tests.test_rulebook import _collective_document

    document = _collective_document(False, True, 150)
    text = probe.render_text(document, probe.findings(document, api.load_profile()))
    assert text.startswith("npudoctor ") and " collective, " in text.splitlines()[0]
    assert _verdict(text).startswith("1 warning in 8 ranks: COL003 rank:7 slowest rank 7")


def test_dashboard_texts_say_each_thing_once_and_never_a_placeholder():
    from types import SimpleNamespace

    from npudoctor.live.devices import DeviceReading
    from npudoctor.live.history import History
    from npudoctor.tui import views

    device = DeviceReading("npu:0", "NPU 0", "910B3", "OK", 90, 32768, 65536, 50, 300)
    assert "health OK (OK)" not in views.detail_lines(device, History())[0]
    view = SimpleNamespace(path="train.jsonl", status="following", last={"step": 3, "device": "cpu"},
                           data_wait_share=None, allocated=[None, None], reserved=[None, None], loss=[1.0, 0.9],
                           step_s=[0.1, 0.1], rss=[1.0, 2.0], verdict=None, verdict_at_step=None, cpu_fallbacks=[])
    text = "\n".join(line for line, _ in views.training_lines(view))
    assert text.splitlines()[0] == "following train.jsonl"
    assert "allocated" not in text and "reserved" not in text and "host RSS" in text
