"""deploy/prometheus and deploy/grafana against the real programs: the alert rules pass ``promtool test
rules``; node_exporter's textfile collector reads what ``check --textfile`` wrote and Prometheus (started
once for the module, on localhost ports, stopped at the end) answers the failing demo's series, the
dashboard's every query, and the rules' pending alert."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from npudoctor.cli import main
from tests.clirunner import cli_runner
from tests.engines import Prometheus, prometheus_stack, require, wait_for

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
RULES = DEPLOY / "prometheus" / "npudoctor-rules.yml"
DASHBOARD = DEPLOY / "grafana" / "npudoctor-dashboard.json"


def test_alert_rules_pass_promtool():
    promtool = require("promtool")["promtool"]
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", "npudoctor-rules.test.yml"], cwd=RULES.parent,
                            capture_output=True, text=True, timeout=30)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_alert_has_a_for_and_a_runbook():
    (group,) = yaml.safe_load(RULES.read_text())["groups"]
    for rule in group["rules"]:
        assert rule["for"] and rule["annotations"]["runbook"] and rule["labels"]["severity"], rule["alert"]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    folder = tmp_path_factory.mktemp("prometheus")
    textfiles = folder / "textfile_collector"
    textfiles.mkdir()
    result = cli_runner().invoke(main, ["check", "--demo", "unbound-device", "--format", "npd",
                                        "--textfile", str(textfiles / "npudoctor.prom")])
    assert result.exit_code == 1, result.output
    config_rules = folder / "rules.yml"
    config_rules.write_text(RULES.read_text())
    with prometheus_stack(folder, textfiles, rules=config_rules) as stack:
        wait_for("the textfile's first scrape", lambda: stack.query("npudoctor_node_ok"), logs=stack.logs)
        yield stack


def test_the_failing_demo_reaches_prometheus(prometheus: Prometheus):
    (node,) = prometheus.query("npudoctor_node_ok")
    assert node["value"][1] == "0"
    (check,) = prometheus.query('npudoctor_check_findings{check="PCI002",status="fail"}')
    assert check["value"][1] == "1"
    (chip,) = prometheus.query("npudoctor_chip_ok == 0")
    assert (chip["metric"]["npu_id"], chip["metric"]["bus_id"]) == ("6", "0000:41:00.0")
    (info,) = prometheus.query("npudoctor_node_info")
    assert info["metric"]["hostname"] == "atlas-unbound-device"


def test_the_rules_alert_on_it(prometheus: Prometheus):
    alerts = wait_for("NpudoctorNodeProblem to be pending",
                      lambda: prometheus.query('ALERTS{alertname="NpudoctorNodeProblem"}'), logs=prometheus.logs)
    assert alerts[0]["metric"]["alertstate"] == "pending"  # for: 10m


def test_every_dashboard_query_runs(prometheus: Prometheus):
    dashboard = json.loads(DASHBOARD.read_text())
    answers = {panel["title"]: prometheus.query(target["expr"])
               for panel in dashboard["panels"] for target in panel["targets"]}
    assert answers["Nodes with a problem"][0]["value"][1] == "1"
    failing = answers["Failing checks by node"]
    assert {series["metric"]["check"] for series in failing} == {"PCI002"}
