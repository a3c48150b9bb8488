"""The npu-smi stage on fake nodes built from real npu-smi captures (and the PCI side from FakeNode)."""

from __future__ import annotations

import time

from npudoctor import api
from npudoctor.api import findings_by_id
from npudoctor.model import Status
from npudoctor.parsers.npu_smi import parse_npu_smi_info
from tests.findings import statuses_of
from tests.nodes import B3_8CARD, collect_and_replay
from tests.samples import sample_text, smi

A3_16DIE = "npu-smi-info_A3_Ascend910_8npu-16die_25.2.1_collect_env_vllm-ascend-5850.txt"


def run(node, profile=None):
    return api.run_checks(node.runner(), profile or api.load_profile(), only=("pcie", "npu-smi"))


def bus_ids_of(sample):
    return [chip.bus_id.lower() for chip in parse_npu_smi_info(sample_text(sample)).chips]


def test_healthy_8x910b_passes_the_whole_stage(node):
    node.npu_node(8, device_id="d802")
    node.command("npu-smi", stdout=sample_text(B3_8CARD))
    report = run(node, api.load_profile("atlas800t-a2-8x910b"))
    (runs,) = findings_by_id(report, "SMI001")
    assert runs.status is Status.PASS and "24.1.0.3" in runs.detail and runs.evidence["chips"] == 8
    assert statuses_of(report, "SMI002") == [Status.PASS] * 8
    assert findings_by_id(report, "SMI002")[0].subject == "npu:0/chip:0"
    (count,) = findings_by_id(report, "SMI003")
    assert count.status is Status.PASS and count.evidence["npus_on_pci"] == 8
    assert statuses_of(report, "SMI004") == [Status.PASS]
    assert report.exit_code() == 0


def test_warning_chip_warns_and_names_the_chip(node):
    node.npu_node(8)
    node.command("npu-smi", stdout=smi("NPU3-Warning"))
    report = run(node)
    not_ok = [f for f in findings_by_id(report, "SMI002") if f.status is not Status.PASS]
    assert [(f.status, f.subject) for f in not_ok] == [(Status.WARN, "npu:3/chip:0")]
    assert "Warning" in not_ok[0].detail and "npu-smi info -t health -i 3 -c 0" in not_ok[0].fix
    assert report.exit_code() == 0 and report.exit_code("warn") == 1


def test_health_query_of_a_chip_that_is_not_ok_adds_its_error_code(node):
    node.npu_node(8)
    node.command("npu-smi", stdout=smi("NPU3-Warning"),
                 by_args={"info -t health -i 3 -c 0": smi("t-health_Warning")})
    (warning,) = [f for f in findings_by_id(run(node), "SMI002") if f.status is Status.WARN]
    assert warning.detail == ("910B3: health Warning (Error Code A1B2C3D4; "
                              "Error Information placeholder text of a constructed sample): "
                              "A1B2C3D4 not in MindCluster's fault table")
    assert warning.evidence["health_query"]["Health Status"] == "Warning"


def test_health_query_that_prints_nothing_useful_is_said_so(node):
    node.command("npu-smi", stdout=smi("310B4_Alarm"))  # answers every query with the main table
    (alarm,) = findings_by_id(run(node), "SMI002")
    assert alarm.status is Status.FAIL and alarm.detail == "310B4: health Alarm"
    assert "npu-smi info -t health -i 0 -c 0" in alarm.evidence["health_query"]["query_error"]


def test_alarm_chip_fails(node):
    # An Atlas 200I DK A2 class SoC: no PCI NPU, Bus-Id NA.
    node.command("npu-smi", stdout=smi("310B4_Alarm"))
    report = run(node)
    (health,) = findings_by_id(report, "SMI002")
    assert health.status is Status.FAIL and "Alarm" in health.detail
    # Nothing to compare the count with: no PCI NPU, no count in the profile.
    assert statuses_of(report, "SMI003") == [Status.SKIP]
    assert report.exit_code() == 1


def test_more_chips_than_pci_devices_fails(node):
    node.npu_node(7)
    node.command("npu-smi", stdout=sample_text(B3_8CARD))
    (count,) = findings_by_id(run(node), "SMI003")
    assert count.status is Status.FAIL
    assert "npu-smi lists 8 PCI function(s) (distinct Bus-Id), the PCI bus has 7 NPU(s)" in count.detail
    assert count.evidence["npus_on_pci"] == 7


def test_card_on_the_bus_missing_from_npu_smi_is_named(node):
    for bdf in bus_ids_of(B3_8CARD):
        node.pci_device(bdf)
    node.pci_device("0000:c3:00.0")  # a ninth card the driver did not bring up
    node.command("npu-smi", stdout=sample_text(B3_8CARD))
    (count,) = findings_by_id(run(node), "SMI003")
    assert count.status is Status.FAIL and count.evidence["missing_from_npu_smi"] == ["0000:c3:00.0"]
    assert "not listed by npu-smi: 0000:c3:00.0" in count.detail and "container" not in count.detail


def test_container_given_a_subset_of_the_bus_is_told_apart_in_the_detail(node):
    node.npu_node(8)  # /sys shows the host's 8 NPUs ...
    for index in range(1, 8):
        node.path(f"/dev/davinci{index}").unlink()  # ... but only /dev/davinci0 was passed in
    node.command("npu-smi", stdout=smi("310P3_NPUID2144"))
    (count,) = findings_by_id(run(node), "SMI003")
    assert count.status is Status.FAIL and count.evidence["dev_davinci_nodes"] == 1
    assert "a container given only these devices" in count.detail and "--skip SMI003" in count.fix


def test_a3_dies_are_matched_by_distinct_bus_id(node):
    for bdf in bus_ids_of(A3_16DIE):
        node.pci_device(bdf, device_id="d803")
    node.command("npu-smi", stdout=sample_text(A3_16DIE))
    report = run(node)
    (count,) = findings_by_id(report, "SMI003")
    assert count.status is Status.PASS and count.evidence == {
        "npus": 8, "chips": 16, "npu_smi_functions": 16, "npus_on_pci": 16}
    assert statuses_of(report, "SMI002") == [Status.PASS] * 16


def test_duo_card_two_chips_one_pci_function(node):
    node.pci_device("0000:01:00.0", device_id="d500")
    node.command("npu-smi", stdout=smi("310P3-Duo"))
    report = run(node)
    assert statuses_of(report, "SMI002") == [Status.PASS, Status.PASS]
    # That capture is cut off after the first card: counts are not the node's, so no verdict.
    (count,) = findings_by_id(report, "SMI003")
    assert count.status is Status.SKIP and "partial" in count.detail


def test_profile_count_mismatch_fails(node):
    node.command("npu-smi", stdout=smi("910A_2card"))
    (count,) = findings_by_id(run(node, api.load_profile("atlas800-9000-8x910")), "SMI003")
    assert count.status is Status.FAIL and "expects 8" in count.detail


def test_dcmi_8005_fails_with_cause_and_fix_and_blocks_the_rest(node):
    node.npu_node(8)
    node.command("npu-smi", stdout=smi("dcmi-8005"), rc=255)
    report = run(node)
    (runs,) = findings_by_id(report, "SMI001")
    assert runs.status is Status.FAIL and "ret is -8005" in runs.detail
    assert "container" in runs.detail and "--device=/dev/davinci_manager" in runs.fix
    assert runs.evidence["code"] == -8005
    for later in ("SMI002", "SMI003", "SMI004"):
        assert [(f.status, f.detail) for f in findings_by_id(report, later)] == [(Status.SKIP, "blocked by SMI001")]


def test_dcmi_8020_device_used_points_at_the_holder(node):
    node.npu_node(8)
    text = smi("dcmi-8020_device")
    node.command("npu-smi", stdout=text.split("\n", 1)[1])  # without the captured shell prompt line
    (runs,) = findings_by_id(run(node), "SMI001")
    assert runs.status is Status.FAIL and "device is used" in runs.detail and "-8020" in runs.detail
    assert "fuser -v /dev/davinci*" in runs.fix


def test_libc_sec_missing_on_stderr_explains_the_container_mount(node):
    node.npu_node(1)
    node.command("npu-smi", stderr=smi("libc_sec"),
                 rc=127)
    (runs,) = findings_by_id(run(node), "SMI001")
    assert runs.status is Status.FAIL and "libc_sec.so" in runs.detail
    assert runs.evidence["library"] == "libc_sec.so" and runs.evidence["rc"] == 127
    assert "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro" in runs.fix


def test_not_found_without_npus_skips(node):
    node.pci_device("0000:00:1f.0", vendor_id="8086", device_id="a1c8", class_code="0x060100")
    report = run(node)
    (runs,) = findings_by_id(report, "SMI001")
    assert runs.status is Status.SKIP and "no Ascend NPU" in runs.detail
    assert statuses_of(report, "SMI002") == [Status.SKIP]


def test_not_found_with_npus_on_the_bus_fails(node):
    node.npu_node(8)
    (runs,) = findings_by_id(run(node), "SMI001")
    assert runs.status is Status.FAIL and "8 Ascend NPU(s) are on the PCI bus" in runs.detail
    assert "/usr/local/sbin/npu-smi" in runs.fix


def test_probe_looks_beyond_path_and_uses_the_profile_timeout(tmp_path):
    """npu-smi is often in /usr/local/sbin, off a user's PATH: the probe asks the runner to look there too."""
    from npudoctor.checks.registry import CheckContext
    from npudoctor.probes.npu_smi import npu_smi_facts
    from npudoctor.probes.runner import Runner
    from npudoctor.probes.sources import CommandResult

    class Answering(Runner):
        def __init__(self):
            self.asked = []

        def run(self, command):
            self.asked.append(command)
            return CommandResult(command.argv, 0, sample_text(B3_8CARD),
                                 resolved_path="/usr/local/sbin/npu-smi")

    site = tmp_path / "site.yaml"
    site.write_text("name: site\ncommands:\n  npu_smi_timeout_s: 7\n", encoding="utf-8")
    runner = Answering()
    facts = npu_smi_facts(CheckContext(runner, api.load_profile(str(site))))
    assert [command.argv for command in runner.asked] == [("npu-smi", "info"), ("npu-smi", "info", "-m")]
    for command in runner.asked:  # both with the profile's limit, both looked up beyond PATH
        assert command.timeout_s == 7 and command.extra_dirs == ("/usr/local/sbin", "/usr/local/bin")
    assert facts.path == "/usr/local/sbin/npu-smi" and len(facts.table.chips) == 8


def test_hanging_npu_smi_costs_its_timeout_and_is_an_error(node, tmp_path):
    node.npu_node(8)
    node.command("npu-smi", stdout=sample_text(B3_8CARD), sleep_s=30)
    site = tmp_path / "site.yaml"
    site.write_text("name: site\ncommands:\n  npu_smi_timeout_s: 1\n", encoding="utf-8")
    started = time.monotonic()
    report = run(node, api.load_profile(str(site)))
    assert time.monotonic() - started < 5
    (runs,) = findings_by_id(report, "SMI001")
    assert runs.status is Status.ERROR and "within 1 s" in runs.detail
    assert statuses_of(report, "PCI001") == [Status.PASS]  # the other checks still report
    assert statuses_of(report, "SMI002") == [Status.SKIP]


def test_processes_holding_npus_warn_with_pid_name_memory(node):
    node.npu_node(8)
    node.command("npu-smi", stdout=smi("with-processes"))
    held = findings_by_id(run(node), "SMI004")
    assert [f.status for f in held] == [Status.WARN] * 8
    assert held[0].subject == "npu:0/chip:0"
    assert held[0].detail == "pid 139667 python, 30780 MiB device memory"
    assert held[0].evidence == {"pid": 139667, "name": "python", "memory_mib": 30780,
                                "chip": {"npu_id": 0, "chip_id": 0, "logic_id": None, "phy_id": None,
                                         "bus_id": held[0].evidence["chip"]["bus_id"]}}


def test_the_watched_jobs_own_processes_pass_as_the_followed_job(node):
    node.npu_node(8)
    node.command("npu-smi", stdout=smi("with-processes"))
    report = api.run_checks(node.runner(), only=("npu-smi",), options={"job_pids": frozenset({139667})})
    held = findings_by_id(report, "SMI004")
    assert [f.status for f in held] == [Status.PASS] + [Status.WARN] * 7
    assert held[0].detail == "the followed job: pid 139667 python, 30780 MiB device memory"
    assert held[0].evidence["job"] is True and "job" not in held[1].evidence


def test_process_without_a_name_still_listed(node):
    node.npu_node(8)
    node.command("npu-smi", stdout=smi("empty-process-names"))
    held = findings_by_id(run(node), "SMI004")
    assert [f.subject for f in held] == ["npu:0/chip:0", "npu:1/chip:0", "npu:6/chip:0", "npu:7/chip:0"]
    assert "(no name shown)" in held[0].detail


def test_every_check_has_user_documentation():
    for check_id in ("SMI001", "SMI002", "SMI003", "SMI004"):
        spec = api.find_check(check_id)
        assert spec is not None and spec.stage == "npu-smi"
        assert "npu-smi" in spec.summary and len(spec.doc.split("\n\n")) >= 2


def test_recorded_bundle_replays_the_same_npu_smi_findings(node, tmp_path):
    node.npu_node(8)
    node.command("npu-smi", stdout=smi("NPU3-Warning"),
                 by_args={"info -t health -i 3 -c 0": smi("t-health_Warning")})
    live, _, replayed = collect_and_replay(node, tmp_path / "node.tar.gz", only=("pcie", "npu-smi"))

    def stage(report):
        return [(f.id, f.status, f.subject, f.detail) for f in report.findings if f.stage == "npu-smi"]

    assert stage(replayed) == stage(live)
    assert Status.WARN in [status for _, status, _, _ in stage(live)]
