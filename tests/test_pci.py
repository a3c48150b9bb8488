from __future__ import annotations

from npudoctor import api
from npudoctor.api import findings_by_id
from npudoctor.model import Status


def run(node, profile=None):
    return api.run_checks(node.runner(), api.load_profile(profile), only=("pcie",))


def test_healthy_8x910b_passes_every_pcie_check(node):
    node.npu_node(8)
    report = run(node, "atlas800t-a2-8x910b")
    assert {f.status for f in report.findings} == {Status.PASS}
    (present,) = findings_by_id(report, "PCI001")
    assert present.evidence["npus"] == 8 and present.evidence["families"] == ["910B"]
    assert len(findings_by_id(report, "PCI002")) == 8
    assert report.exit_code() == 0


def test_no_npu_fails_and_blocks_dependent_checks(node):
    node.pci_device("0000:00:1f.0", vendor_id="8086", device_id="a1c8", class_code="0x060100")
    node.pci_device("0000:3b:00.0", device_id="1822", class_code="0x020000")  # a Huawei NIC is no NPU
    report = run(node)
    (present,) = findings_by_id(report, "PCI001")
    assert present.status is Status.FAIL and "no Ascend NPU" in present.detail
    assert findings_by_id(report, "PCI002")[0].detail == "blocked by PCI001"
    assert findings_by_id(report, "PCI004")[0].status is Status.SKIP
    assert report.exit_code() == 1


def test_count_below_profile_fails(node):
    node.npu_node(7)
    (present,) = findings_by_id(run(node, "atlas800t-a2-8x910b"), "PCI001")
    assert present.status is Status.FAIL and "expects 8" in present.detail


def test_unbound_device_fails_with_printed_bind_fix(node):
    node.npu_node(2)
    node.pci_device("0000:c9:00.0", driver=None)
    report = run(node)
    unbound = [f for f in findings_by_id(report, "PCI002") if f.status is Status.FAIL]
    assert [f.subject for f in unbound] == ["0000:c9:00.0"]
    assert "echo 0000:c9:00.0 > /sys/bus/pci/drivers/devdrv_device_driver/bind" in unbound[0].fix


def test_vfio_bound_device_warns(node):
    node.pci_device("0000:c1:00.0", driver="vfio-pci")
    (binding,) = findings_by_id(run(node), "PCI002")
    assert binding.status is Status.WARN and "virtual machine" in binding.detail


def test_downgraded_link_warns_with_both_figures(node):
    # As the real 910B capture shows: LnkCap 32GT/s, LnkSta 16GT/s (downgraded), Width x16.
    node.pci_device("0000:01:00.0", speed="16.0 GT/s PCIe", max_speed="32.0 GT/s PCIe")
    node.pci_device("0000:02:00.0", width=8, max_width=16)
    findings = {f.subject: f for f in findings_by_id(run(node), "PCI003")}
    assert findings["0000:01:00.0"].status is Status.WARN
    assert "16 GT/s (Gen4) of 32 GT/s (Gen5)" in findings["0000:01:00.0"].detail
    assert "width x8 of x16" in findings["0000:02:00.0"].detail


def test_container_without_dev_nodes_fails_with_device_flags(node):
    node.npu_node(2, with_dev=False)
    findings = findings_by_id(run(node), "PCI004")
    assert findings[0].status is Status.FAIL and "--device=/dev/davinci_manager" in findings[0].fix


def test_container_missing_shared_nodes(node):
    node.npu_node(1)
    node.path("/dev/devmm_svm").unlink()
    failed = [f.subject for f in findings_by_id(run(node), "PCI004") if f.status is Status.FAIL]
    assert failed == ["/dev/devmm_svm"]
