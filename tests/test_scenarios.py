"""Whole fake nodes from real samples through every stage of `npudoctor check`, as a user runs it.

Each scenario breaks one thing on an otherwise healthy 8x910B node and asserts that the doctor names it, that
the other stages still report (nothing short-circuits the report), and what the exit code says.
"""

from __future__ import annotations

from npudoctor import api
from npudoctor.model import Status
from tests.nodes import DCMI_8005, WARNING_TABLE, healthy_910b_node
from tests.samples import sample_text

STAGES = ("pcie", "npu-smi", "versions", "hccl")


def run(node, profile="atlas800t-a2-8x910b"):
    node.interfaces = {"lo": ["127.0.0.1"], "enp189s0f0": ["192.0.2.10"]}
    return api.run_checks(node.runner(), api.load_profile(profile))


def failing(report):
    return sorted({f.id for f in report.findings if f.status in (Status.FAIL, Status.ERROR)})


def stage_statuses(report, stage):
    return {f.status for f in report.findings if f.stage == stage}


def test_healthy_node_passes_hardware_npu_smi_versions_and_hccl(node):
    report = run(healthy_910b_node(node))
    for stage in STAGES:
        assert stage_statuses(report, stage) <= {Status.PASS, Status.SKIP}, (stage, failing(report))
    assert {f.stage for f in report.findings} >= set(STAGES) | {"libraries"}
    present = api.findings_by_id(report, "PCI001")[0]
    assert present.status is Status.PASS and present.evidence["npus"] == 8


def test_warning_chip(node):
    healthy_910b_node(node)
    node.command("npu-smi", stdout=sample_text(WARNING_TABLE))
    report = run(node)
    warned = [f for f in api.findings_by_id(report, "SMI002") if f.status is Status.WARN]
    assert [f.subject for f in warned] == ["npu:3/chip:0"]
    assert report.exit_code() == 0 and report.exit_code("warn") == 1


def test_unbound_device(node):
    healthy_910b_node(node)
    node.path("/sys/bus/pci/devices/0000:41:00.0/driver").unlink()
    report = run(node)
    unbound = [f for f in api.findings_by_id(report, "PCI002") if f.status is Status.FAIL]
    assert [f.subject for f in unbound] == ["0000:41:00.0"]
    assert "devdrv_device_driver/bind" in unbound[0].fix
    assert stage_statuses(report, "versions") <= {Status.PASS, Status.SKIP}  # later stages still report


def test_container_without_dev_davinci(node):
    healthy_910b_node(node)
    for path in node.path("/dev").iterdir():
        path.unlink()
    report = run(node)
    assert "PCI004" in failing(report)
    assert "--device=/dev/davinci_manager" in api.findings_by_id(report, "PCI004")[0].fix


def test_dcmi_8005(node):
    healthy_910b_node(node)
    node.command("npu-smi", stdout=sample_text(DCMI_8005), rc=255)
    report = run(node)
    runs = api.findings_by_id(report, "SMI001")[0]
    assert runs.status is Status.FAIL and "-8005" in runs.detail
    assert api.findings_by_id(report, "SMI002")[0].detail == "blocked by SMI001"
    assert stage_statuses(report, "pcie") == {Status.PASS}


def test_torch_and_torch_npu_mismatch(node):
    healthy_910b_node(node)
    from tests.nodes import target_python

    target_python(node, "3.10.14", torch="2.2.0", torch_npu="2.1.0.post10")
    report = run(node)
    mismatch = api.findings_by_id(report, "VER003")[0]
    # torch_npu 2.1.0.post10 is built for the CANN in place (8.0.0): torch goes back to its 2.1.0
    assert mismatch.status is Status.FAIL and mismatch.fix.startswith("pip install torch==2.1.0 ")
    assert report.exit_code() == 1


def test_whitelist_on_without_file(node):
    healthy_910b_node(node)
    node.setenv(HCCL_WHITELIST_DISABLE="0")
    report = run(node)
    whitelist = api.findings_by_id(report, "HCCL002")[0]
    assert whitelist.status is Status.FAIL and "HCCL_WHITELIST_FILE" in whitelist.detail
