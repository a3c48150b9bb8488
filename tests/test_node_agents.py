"""What node agents read (issue 29): ``check --scope``, the per-chip subject, the per-chip Prometheus series,
ClusterD's public-fault document, and the one poller's kept report read back with a maximum age."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from npudoctor.api import rulebook
from npudoctor.cli import main
from npudoctor.fleet import lastreport
from npudoctor.model.chip import Chip, chip_of
from npudoctor.model.finding import Finding, Report, Status
from npudoctor.model.scope import scope_of
from npudoctor.report import clusterd, prometheus
from tests.clirunner import cli_runner

NODE_CHECKS = {"PCI001", "PCI002", "PCI003", "PCI004", "SMI001", "SMI002", "SMI003", "SMI004", "VER001",
               "HCCL006", "HCCL010", "HCCL011", "HCCL012", "HCCL013"}


def run_json(*args: str) -> Dict[str, Any]:
    result = cli_runner().invoke(main, ["check", *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_scope_splits_the_node_checks_between_node_and_job():
    ids = {spec.id for spec in rulebook() if spec.room == "node"}
    assert {i for i in ids if scope_of(i) == "node"} >= NODE_CHECKS
    assert {i for i in ids if scope_of(i) == "node"} - NODE_CHECKS <= {i for i in ids if i[:3] in ("PCI", "SMI")}
    for job in ("VER003", "VER004", "LIB001", "HCCL001", "HCCL002", "HCCL003", "HCCL005", "TRN001", "LOG001"):
        assert scope_of(job) == "job"


@pytest.mark.parametrize(("scenario", "node_code", "job_code"), [
    ("unbound-device", 1, 0), ("version-mismatch", 0, 1), ("whitelist-no-file", 0, 1),
    ("setenv-not-sourced", 0, 1), ("healthy", 0, 0)])
def test_a_node_agent_fails_only_on_the_nodes_problem(scenario, node_code, job_code):
    for scope, code in (("node", node_code), ("job", job_code)):
        result = cli_runner().invoke(main, ["check", "--demo", scenario, "--scope", scope, "--format", "npd"])
        assert result.exit_code == code, (scope, result.output)


def test_scope_runs_only_its_checks_and_says_so():
    node = run_json("--demo", "healthy", "--scope", "node")
    node_ids = {f["id"] for f in node["findings"]}
    assert node_ids >= NODE_CHECKS - {"HCCL010", "HCCL011", "HCCL012", "HCCL013"}  # no RoCE tool in the demo
    assert all(i in NODE_CHECKS or i[:3] in ("PCI", "SMI") for i in node_ids) and node["tool"]["scope"] == "node"
    job = run_json("--demo", "healthy", "--scope", "job")
    assert {f["id"] for f in job["findings"]} and not {f["id"] for f in job["findings"]} & node_ids
    result = cli_runner().invoke(main, ["check", "--demo", "healthy", "--scope", "node", "--only", "LIB001"])
    assert result.exit_code == 2 and "leaves no check of --scope node" in result.output


def finding(subject: str = "", **evidence: Any) -> Finding:
    return Finding(id="SMI002", status=Status.FAIL, title="NPU chip health", subject=subject, evidence=evidence,
                   stage="npu-smi")


def test_chip_of_reads_the_chip_evidence_and_falls_back_to_todays_subject():
    chip = {"npu_id": 3, "chip_id": 0, "logic_id": 3, "phy_id": 5, "bus_id": "0000:82:00.0"}
    assert chip_of(finding("npu:3/chip:0", chip=chip)) == Chip(3, 0, 3, 5, "0000:82:00.0")
    assert chip_of(finding("npu:3/chip:1", npu_id=3, chip_id=1, bus_id="0000:C2:00.0")) == \
        Chip(3, 1, None, None, "0000:c2:00.0")
    assert chip_of(finding("npu:7")) == Chip(7)
    by_bus = {"0000:41:00.0": Chip(6, 0, bus_id="0000:41:00.0")}
    assert chip_of(finding("0000:41:00.0"), by_bus) == by_bus["0000:41:00.0"]
    for node_wide in ("npu-smi", "cann", "npu:x/chip:0", "0000:99:00.0"):
        assert chip_of(finding(node_wide), by_bus) is None


def families(text: str) -> Dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_prometheus_names_the_failing_chip():
    result = cli_runner().invoke(main, ["check", "--demo", "unbound-device", "--format", "prometheus"])
    parsed = families(result.stdout)
    bad = [s.labels for s in parsed["npudoctor_chip_ok"].samples if s.value == 0]
    assert bad == [{"npu_id": "6", "chip_id": "0", "bus_id": "0000:41:00.0"}]
    fails = [s.labels for s in parsed["npudoctor_chip_findings"].samples
             if s.labels["status"] == "fail" and s.value == 1]
    assert [f["check"] for f in fails] == ["PCI002"]
    assert "npudoctor_report_stale" not in parsed  # a fresh run has no age


def report_with(*findings: Finding, host: str = "node07") -> Report:
    return Report(findings=list(findings), inventory={"hostname": host, "chips": {"count": 8}},
                  started=1796000000.0)


def test_clusterd_document_keeps_every_published_constraint():
    chip = {"npu_id": 3, "chip_id": 0, "logic_id": 3, "phy_id": 5, "bus_id": "0000:82:00.0"}
    report = report_with(
        finding("npu:3/chip:0", chip=chip),
        Finding(id="LIB001", status=Status.FAIL, title="CANN", subject="cann", stage="libraries"),  # job's
        Finding(id="SMI001", status=Status.ERROR, title="npu-smi", subject="npu-smi", stage="npu-smi"))
    doc = clusterd.document(report)
    assert clusterd.validate(doc) == []
    (fault,) = doc["faults"]  # LIB001 is the job's, an ERROR is "could not tell": neither is sent
    assert fault["faultType"] == "NPU" and fault["influence"] == [{"nodeName": "node07", "deviceIds": [5]}]
    assert fault["faultCode"] == clusterd.fault_code("SMI002", Status.FAIL) == "830200201"
    assert doc["timestamp"] == fault["faultTime"] == 1796000000000 and doc["resource"] == "npudoctor"
    codes = clusterd.customization([spec.id for spec in rulebook()])
    assert fault["faultCode"] in codes["publicFaultCode"]["SeparateNPUCodes"]
    assert codes["publicFaultResource"] == [doc["resource"]]
    every = [c for level in codes["publicFaultCode"].values() for c in level]
    assert len(every) == len(set(every)) and all(len(c) == 9 and c.isdigit() for c in every)


def test_clusterd_without_a_physical_id_names_every_chip_as_the_api_asks():
    report = report_with(finding("npu:3/chip:0", npu_id=3, chip_id=0, bus_id="0000:82:00.0"))
    (fault,) = clusterd.document(report)["faults"]
    assert fault["influence"][0]["deviceIds"] == list(range(8)) and "every chip named" in fault["description"]


def test_clusterd_merges_per_check_past_100_faults_and_refuses_what_clusterd_would_drop():
    many = [Finding(id=f"SMI{n:03d}", status=Status.FAIL, title="t", subject=f"npu:{c}/chip:0",
                    evidence={"chip": {"npu_id": c, "phy_id": c}}, stage="npu-smi")
            for n in range(1, 5) for c in range(30)]
    doc = clusterd.document(report_with(*many))
    assert len(doc["faults"]) == 4 and clusterd.validate(doc) == []
    assert doc["faults"][0]["influence"][0]["deviceIds"] == list(range(30))
    broken = json.loads(json.dumps(doc))
    broken["faults"][0]["faultCode"] = "83"
    broken["faults"][1]["influence"][0]["deviceIds"] = [32]
    broken["timestamp"] = 1600000000000
    problems = clusterd.validate(broken)
    assert any("faultCode" in p for p in problems) and any("deviceIds" in p for p in problems)
    assert any("timestamp" in p for p in problems)
    with pytest.raises(clusterd.ClusterdError, match="no Kubernetes node name"):
        clusterd.document(report_with(finding("npu:1/chip:0"), host="Node_07"))


def test_clusterd_recover_events_for_what_healed():
    chip = {"npu_id": 3, "chip_id": 0, "phy_id": 3}
    before = clusterd.document(report_with(finding("npu:3/chip:0", chip=chip)))
    (recover,) = clusterd.recovered(before, {"faults": []})
    assert recover["assertion"] == "recover" and recover["faultId"] == before["faults"][0]["faultId"]


def test_check_format_clusterd_on_the_demos():
    result = cli_runner().invoke(main, ["check", "--demo", "unbound-device", "--format", "clusterd"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert clusterd.validate(doc) == [] and doc["faults"][0]["faultCode"] == "830100201"
    healthy = cli_runner().invoke(main, ["check", "--demo", "healthy", "--format", "clusterd"])
    assert healthy.exit_code == 0 and json.loads(healthy.stdout) == {}


def test_one_poller_keeps_the_report_and_readers_judge_it_with_a_max_age(tmp_path):
    kept = tmp_path / "last-report.json"
    first = cli_runner().invoke(main, ["check", "--demo", "unbound-device", "--format", "npd",
                                       "--save-report", str(kept)])
    assert first.exit_code == 1
    read = cli_runner().invoke(main, ["check", "--last-report", str(kept), "--format", "npd"])
    assert read.exit_code == 1 and read.output == first.output
    assert cli_runner().invoke(main, ["check", "--last-report", str(kept), "--scope", "job",
                                      "--format", "npd"]).exit_code == 0
    old = time.time() - 3600
    os.utime(kept, (old, old))
    stale = cli_runner().invoke(main, ["check", "--last-report", str(kept), "--format", "npd", "--max-age", "600"])
    assert stale.exit_code == 2 and stale.output.startswith("npudoctor could not tell: last report 36")
    text = cli_runner().invoke(main, ["check", "--last-report", str(kept), "--format", "prometheus",
                                      "--max-age", "600"])
    assert text.exit_code == 2
    assert families(text.stdout)["npudoctor_report_stale"].samples[0].value == 1
    missing = cli_runner().invoke(main, ["check", "--last-report", str(tmp_path / "none.json"), "--format", "npd"])
    assert missing.exit_code == 2 and "no report there yet" in missing.output
    (tmp_path / "bad.json").write_text('{"schema": "other"}')
    bad = cli_runner().invoke(main, ["check", "--last-report", str(tmp_path / "bad.json")])
    assert bad.exit_code == 2 and "not an npudoctor.report/1 document" in bad.output
    mixed = cli_runner().invoke(main, ["check", "--last-report", str(kept), "--demo", "healthy"])
    assert mixed.exit_code == 2 and "--demo does not apply" in mixed.output


def test_a_kept_report_reads_back_as_the_same_report(tmp_path):
    report = report_with(finding("npu:3/chip:0", npu_id=3, chip_id=0))
    kept = tmp_path / "r.json"
    lastreport.save(str(kept), report)
    again = lastreport.load(str(kept))
    assert {**again.report.to_dict(), "source": None} == report.to_dict() and 0 <= again.age_s < 60
    assert again.report.source == f"report:{kept}"
    assert again.report.started == os.path.getmtime(kept)  # the textfile's npudoctor_last_run_timestamp_seconds
    assert prometheus.render(again.report) == prometheus.render(Report(
        findings=report.findings, inventory=report.inventory, started=os.path.getmtime(kept)))


def test_the_shipped_public_customization_lists_every_code_npudoctor_sends():
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[1] / "deploy" / "mindcluster" / "publicCustomization-npudoctor.json"
    generated = clusterd.customization([spec.id for spec in rulebook()])
    if os.environ.get("NPUDOCTOR_REGEN_GOLDEN"):  # a new node check: its codes join the shipped file
        shipped.write_text(json.dumps(generated, indent=2) + "\n")
    assert json.loads(shipped.read_text()) == generated, \
        "a node check was added: NPUDOCTOR_REGEN_GOLDEN=1 python -m pytest tests/test_node_agents.py"


def test_clusterd_from_the_kept_report_recovers_what_healed_since_the_run_before(tmp_path):
    kept = tmp_path / "last-report.json"
    for scenario in ("unbound-device", "unbound-device"):
        cli_runner().invoke(main, ["check", "--demo", scenario, "--format", "npd", "--save-report", str(kept)])
    still = json.loads(cli_runner().invoke(main, ["check", "--last-report", str(kept), "--format",
                                                  "clusterd"]).stdout)
    assert [f["assertion"] for f in still["faults"]] == ["occur"]  # the same fault: raised, nothing healed
    healed = report_with(finding("npu:0/chip:0"), host="atlas-unbound-device")
    healed.findings[0] = Finding(id="SMI002", status=Status.PASS, title="t", subject="npu:0/chip:0",
                                 stage="npu-smi")
    lastreport.save(str(kept), healed)
    assert (tmp_path / "last-report.json.previous").exists()
    result = cli_runner().invoke(main, ["check", "--last-report", str(kept), "--format", "clusterd"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    (recover,) = doc["faults"]
    assert recover["assertion"] == "recover" and recover["faultId"] == still["faults"][0]["faultId"]
    assert recover["faultTime"] == still["faults"][0]["faultTime"]  # when it occurred, as the API wants
    assert clusterd.validate(doc) == []


def test_save_report_that_can_never_be_written_is_said_before_the_run(tmp_path):
    result = cli_runner().invoke(main, ["check", "--demo", "healthy", "--format", "npd",
                                        "--save-report", str(tmp_path / "no-such-folder" / "r.json")])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"--save-report {tmp_path / 'no-such-folder' / 'r.json'}: no such directory" in result.output
