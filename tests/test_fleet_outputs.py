"""`check --format prometheus|npd` and `--textfile`: the contracts node_exporter and node-problem-detector read,
checked with the Prometheus client library's own parser and NPD's plugin protocol."""

from __future__ import annotations

import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from npudoctor import api
from npudoctor.cli import main
from npudoctor.fleet import demo
from npudoctor.model.finding import Finding, Report, Status
from npudoctor.report import npd, prometheus
from tests.clirunner import cli_runner


def demo_report(name: str) -> Report:
    bundle, profile = demo.check_arguments(name, None, None, None)
    return api.run_checks(api.make_runner(bundle=bundle), api.load_profile(profile))


def samples(text: str):
    """Every sample as (name, labels, value), through prometheus_client's parser."""
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def test_prometheus_text_parses_with_one_series_per_check_and_status():
    report = demo_report("unbound-device")
    parsed = samples(prometheus.render(report))
    findings = {(lab["check"], lab["status"]): v for name, lab, v in parsed if name == "npudoctor_check_findings"}
    assert findings[("PCI002", "fail")] == 1 and findings[("PCI002", "pass")] == 7
    assert findings[("SMI002", "fail")] == 0  # every status present, zeros included: alerts see it go back to 0
    assert {status for _check, status in findings} == {"pass", "warn", "fail", "skip", "error"}
    totals = {lab["status"]: v for name, lab, v in parsed if name == "npudoctor_findings"}
    assert totals == {k: float(v) for k, v in report.summary.to_dict().items()}
    info = next(lab for name, lab, _v in parsed if name == "npudoctor_node_info")
    assert info["hostname"] == "atlas-unbound-device" and info["chip_model"] == "910B3"
    assert info["driver"] == "24.1.0.3" and info["torch_npu"] == "2.1.0.post10" and info["cann_toolkit"] == "8.0.0"
    values = {name: v for name, _lab, v in parsed}
    assert values["npudoctor_node_ok"] == 0 and values["npudoctor_chips"] == 8
    assert values["npudoctor_last_run_timestamp_seconds"] == prometheus.started_epoch(report) > 1.7e9
    assert 0 <= values["npudoctor_last_run_duration_seconds"] < 60


def test_label_values_with_quotes_backslashes_and_newlines_survive_the_parser():
    report = Report([], inventory={"hostname": 'a"b\\c\nd', "chips": {"model": ["910B3", "910B4"]}})
    info = next(lab for name, lab, _v in samples(prometheus.render(report)) if name == "npudoctor_node_info")
    assert info["hostname"] == 'a"b\\c\nd' and info["chip_model"] == "910B3,910B4"


def test_textfile_is_written_atomically_and_replaced(tmp_path):
    target = tmp_path / "npudoctor.prom"
    target.write_text("old\n")
    result = cli_runner().invoke(main, ["check", "--demo", "healthy", "--format", "npd", "--textfile", str(target)])
    assert result.exit_code == 0
    assert os.listdir(tmp_path) == ["npudoctor.prom"]  # no temporary file left behind
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert any(name == "npudoctor_node_ok" and v == 1 for name, _l, v in samples(target.read_text()))


@pytest.mark.parametrize("where", ["missing/dir/x.prom", "."])
def test_textfile_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, where):
    result = cli_runner().invoke(main, ["check", "--demo", "--format", "npd", "--textfile", str(tmp_path / where)])
    assert result.exit_code == 2 and result.stderr.startswith("npudoctor: error: --textfile")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc, where nobody can create a file")
def test_textfile_in_a_folder_nobody_can_write_is_one_line_and_exit_2():
    result = cli_runner().invoke(main, ["check", "--demo", "--format", "npd", "--textfile", "/proc/npudoctor.prom"])
    assert result.exit_code == 2 and result.stderr.startswith("npudoctor: error: --textfile"), result.stderr


@pytest.mark.parametrize(("name", "code", "start"), [
    ("healthy", npd.OK, "NPU node OK"),
    ("chip-warning", npd.OK, "NPU node has 1 warning: SMI002 npu:3/chip:0"),
    ("unbound-device", npd.PROBLEM, "NPU node problem: PCI002 0000:41:00.0"),
    ("dcmi-8005", npd.PROBLEM, "NPU node problem: SMI001"),
])
def test_npd_plugin_protocol(name, code, start):
    result = cli_runner().invoke(main, ["check", "--demo", name, "--format", "npd"])
    assert result.exit_code == code
    assert result.output.startswith(start)
    assert result.output.count("\n") == 1 and len(result.output.strip()) <= npd.MAX_MESSAGE


def test_npd_warn_is_a_problem_under_fail_on_warn_and_errors_alone_are_unknown():
    result = cli_runner().invoke(main, ["check", "--demo", "chip-warning", "--format", "npd", "--fail-on", "warn"])
    assert result.exit_code == npd.PROBLEM and "SMI002" in result.output
    hung = Report([Finding("SMI001", Status.ERROR, "npu-smi available and runs", "npu-smi", "timed out")])
    assert npd.verdict(hung)[0] == npd.UNKNOWN
    assert npd.verdict(hung)[1].startswith("npudoctor could not tell: SMI001")
    unusable = cli_runner().invoke(main, ["check", "--demo", "--profile", "no-such-profile", "--format", "npd"])
    assert unusable.exit_code == npd.UNKNOWN  # usage errors are exit 2 already: NPD reads them as Unknown
