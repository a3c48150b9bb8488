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


def test_aer_counters_fail_on_fatal_warn_on_nonfatal_and_a_correctable_storm(node, tmp_path):
    from tests.samples import sample_text

    node.npu_node(4)
    base = "/sys/bus/pci/devices"
    node.file(f"{base}/0000:c1:00.0/aer_dev_correctable", sample_text("sysfs_aer_dev_correctable_kernel-abi-doc.txt"))
    node.file(f"{base}/0000:c2:00.0/aer_dev_fatal", sample_text("sysfs_aer_dev_fatal_CmpltTO_constructed.txt"))
    node.file(f"{base}/0000:c3:00.0/aer_dev_nonfatal", "CmpltTO 3\nTOTAL_ERR_NONFATAL 3\n")
    report = run(node)
    by_bus = {f.subject: f for f in findings_by_id(report, "PCI005")}
    assert len(by_bus) == 4 and by_bus["0000:c4:00.0"].detail == "AER since boot: 0 correctable, no uncorrectable error"
    assert by_bus["0000:c1:00.0"].status is Status.PASS and "2 correctable" in by_bus["0000:c1:00.0"].detail
    assert by_bus["0000:c2:00.0"].status is Status.FAIL
    assert by_bus["0000:c2:00.0"].detail == "AER since boot: 1 fatal (CmpltTO 1)"
    assert by_bus["0000:c3:00.0"].status is Status.WARN
    site = tmp_path / "site.yaml"
    site.write_text("name: site\npcie:\n  aer_correctable_warn: 2\n", encoding="utf-8")
    storm = {f.subject: f for f in findings_by_id(run(node, str(site)), "PCI005")}
    assert storm["0000:c1:00.0"].status is Status.WARN and "Receiver Error 2" in storm["0000:c1:00.0"].detail


def test_aer_counters_absent_is_a_skip(node):
    node.npu_node(2)
    for bus in ("c1", "c2"):
        for name in ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"):
            node.path(f"/sys/bus/pci/devices/0000:{bus}:00.0/{name}").unlink()
    (finding,) = findings_by_id(run(node), "PCI005")
    assert finding.status is Status.SKIP and "4.19" in finding.detail
