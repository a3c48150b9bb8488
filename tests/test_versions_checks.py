"""The versions stage on fake nodes built from real version files (driver 23.0.7, CANN toolkit and nnae)."""

from __future__ import annotations

import json

from npudoctor import api
from npudoctor.model import Status
from tests.findings import findings_of, one_finding
from tests.nodes import (
    ASCEND,
    NNAE_80RC3,
    TOOLKIT_70T10,
    TOOLKIT_81RC1,
    TOOLKIT_850_NEW_LAYOUT,
    VERSION_CFG_800,
    collect_and_replay,
    install_driver,
    install_toolkit,
    target_python,
)
from tests.samples import sample_text


def run(node, profile=None, options=None):
    return api.run_checks(node.runner(), api.load_profile(profile), only=("versions",), options=options)


def statuses(report):
    return {f"{f.id}:{f.subject}": f.status for f in report.findings}


def test_healthy_node_cann_800_from_version_cfg(node):
    install_driver(node)
    install_toolkit(node, "8.0.0", VERSION_CFG_800)
    node.setenv(ASCEND_HOME_PATH=f"{ASCEND}/ascend-toolkit/latest")
    target_python(node, "3.10.14", torch="2.1.0+cpu", torch_npu="2.1.0.post10", numpy="1.26.4")
    report = run(node)
    assert statuses(report) == {
        "VER001:driver": Status.PASS,
        "VER001:firmware": Status.PASS,
        "VER002:cann": Status.PASS,
        "VER003:python:torch_npu": Status.PASS,
        "VER004:python:torch_npu": Status.PASS,
        "VER005:python": Status.PASS,
        "VER006:python": Status.PASS,
        # version.cfg carries no innerversion, so the driver/CANN train comparison cannot apply
        "VER007:cann": Status.SKIP,
    }
    assert (
        "toolkit 8.0.0 in use (via ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest)"
        in one_finding(report, "VER002").detail
    )
    assert one_finding(report, "VER004").evidence["cann_required"] == "8.0.0"
    assert report.exit_code() == 0


def test_healthy_node_cann_81rc1_checks_driver_train(node):
    install_driver(node)
    install_toolkit(node, "8.1.RC1", TOOLKIT_81RC1)
    target_python(node, "3.11.9", torch="2.1.0", torch_npu="2.1.0.post12")
    report = run(node)
    assert {f.status for f in report.findings} == {Status.PASS}
    driver_cann = one_finding(report, "VER007")
    assert (
        driver_cann.evidence["driver_train"] == "V100R001C15"
        and driver_cann.evidence["cann_train"] == "V100R001C21"
    )
    assert "ASCEND_HOME_PATH is not set here" in one_finding(report, "VER002").detail


def test_torch_and_torch_npu_major_minor_mismatch_names_torch_npu_to_install(node):
    install_driver(node)
    install_toolkit(node, "8.0.0", VERSION_CFG_800)
    target_python(node, torch="2.3.1", torch_npu="2.1.0.post10")
    finding = one_finding(run(node), "VER003")
    assert finding.status is Status.FAIL
    assert "torch 2.3.1 and torch_npu 2.1.0.post10" in finding.detail
    # the matrix's torch_npu for torch 2.3.1 built for the CANN in use (8.0.0)
    assert finding.fix.startswith("pip install torch_npu==2.3.1.post4")


def test_torch_patch_differs_from_the_one_torch_npu_was_built_for(node):
    install_toolkit(node, "8.0.0", VERSION_CFG_800)
    target_python(node, torch="2.7.0", torch_npu="2.7.1")
    finding = one_finding(run(node), "VER003")
    assert finding.status is Status.WARN and finding.fix == "pip install torch==2.7.1"


def test_nnae_only_cann_too_old_for_torch_npu(node):
    install_driver(node)
    node.file(f"{ASCEND}/nnae/8.0.RC3/ascend_nnae_install.info", sample_text(NNAE_80RC3))
    node.symlink(f"{ASCEND}/nnae/latest", "8.0.RC3")
    target_python(node, torch="2.1.0", torch_npu="2.1.0.post12")
    report = run(node)
    assert one_finding(report, "VER002").status is Status.PASS
    assert "nnae 8.0.RC3 in use (via /usr/local/Ascend/nnae/latest)" in one_finding(report, "VER002").detail
    finding = one_finding(report, "VER004")
    assert finding.status is Status.FAIL
    assert "needs CANN 8.1.RC1; the CANN in use is nnae 8.0.RC3 (older)" in finding.detail
    assert "pip install torch_npu==2.1.0.post8" in finding.fix  # built for torch 2.1.0 and CANN 8.0.RC3
    assert "install CANN 8.1.RC1" in finding.fix
    # nnae 8.0.RC3 (C19) lists driver trains C13..C19: driver 23.0.7 (C15) is among them
    assert one_finding(report, "VER007").status is Status.PASS


def test_known_bad_torch_npu_280_on_new_cann_layout(node):
    install_driver(node)
    node.file(
        f"{ASCEND}/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info", sample_text(TOOLKIT_850_NEW_LAYOUT)
    )
    node.symlink(f"{ASCEND}/cann", "cann-8.5.0")
    target_python(node, torch="2.8.0", torch_npu="2.8.0")
    report = run(node)
    cann = one_finding(report, "VER002")
    assert cann.status is Status.PASS and "toolkit 8.5.0 in use (via /usr/local/Ascend/cann)" in cann.detail
    assert cann.evidence["links"] == {f"{ASCEND}/cann": "cann-8.5.0"}
    bad = one_finding(report, "VER006")
    assert bad.status is Status.FAIL and "torch_npu 2.8.0 leaks memory" in bad.detail
    assert "vllm-ascend issue 6299" in bad.detail
    assert bad.fix.startswith("pip install torch_npu==2.8.0.post2")  # for torch 2.8.0 and CANN 8.5.0
    # 2.8.0 was built for CANN 8.3.RC1; 8.5.0 is newer: untested, a WARN by default profile
    pairing = one_finding(report, "VER004")
    assert pairing.status is Status.WARN and "pip install torch_npu==2.8.0.post2" in pairing.fix
    assert report.exit_code() == 1


def test_newer_cann_severity_comes_from_the_profile(node, tmp_path):
    node.file(
        f"{ASCEND}/cann-8.5.0/aarch64-linux/ascend_toolkit_install.info", sample_text(TOOLKIT_850_NEW_LAYOUT)
    )
    target_python(node, torch="2.7.1", torch_npu="2.7.1")
    strict = tmp_path / "strict.yaml"
    strict.write_text("name: strict\nversions:\n  cann_newer_than_matrix: fail\n", encoding="utf-8")
    assert one_finding(run(node), "VER004").status is Status.WARN
    assert one_finding(run(node, str(strict)), "VER004").status is Status.FAIL


def test_nothing_installed_gives_only_skips(node):
    target_python(node, "3.11.7")
    report = run(node)
    assert {f.status for f in report.findings} == {Status.SKIP}
    # The interpreter as found on PATH, not the executable it reports (a venv's python resolves elsewhere).
    assert f"torch_npu not installed in python3 ({node.bin}/python3)" in one_finding(report, "VER004").detail
    assert report.exit_code() == 0


def test_no_interpreter_at_all_skips_with_a_reason(node):
    report = run(node, options={"python": "/nonexistent/bin/python3"})
    finding = one_finding(report, "VER003")
    assert finding.status is Status.SKIP and "not-found" in finding.detail
    assert Status.ERROR not in {f.status for f in report.findings}


def test_several_cann_versions_side_by_side_environment_wins(node):
    install_driver(node)
    install_toolkit(node, "7.0.T10", TOOLKIT_70T10, latest=False)
    install_toolkit(node, "8.1.RC1", TOOLKIT_81RC1)
    node.setenv(ASCEND_HOME_PATH=f"{ASCEND}/ascend-toolkit/7.0.T10")
    target_python(node, torch="2.1.0", torch_npu="2.1.0.post12")
    report = run(node)
    cann = one_finding(report, "VER002")
    assert cann.status is Status.PASS
    assert cann.detail.startswith(
        "toolkit 7.0.T10 in use (via ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/7.0.T10)"
    )
    assert "also installed: toolkit 8.1.RC1" in cann.detail
    assert cann.evidence["links"] == {f"{ASCEND}/ascend-toolkit/latest": "8.1.RC1"}
    pairing = one_finding(report, "VER004")
    assert pairing.status is Status.FAIL
    # no torch_npu for torch 2.1.0 was built for 7.0.T10, so the one fix is to use the other installed CANN
    assert pairing.fix.startswith(
        "use the installed CANN 8.1.RC1 at /usr/local/Ascend/ascend-toolkit/8.1.RC1"
    )


def test_environment_pointing_at_a_removed_cann_fails(node):
    install_toolkit(node, "8.1.RC1", TOOLKIT_81RC1)
    node.setenv(ASCEND_HOME_PATH=f"{ASCEND}/ascend-toolkit/8.2.RC1")
    target_python(node)
    finding = one_finding(run(node), "VER002")
    assert finding.status is Status.FAIL
    assert (
        "ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/8.2.RC1 but no CANN is installed there"
        in finding.detail
    )


def test_garbled_driver_version_info_is_a_clear_error(node):
    node.file(f"{ASCEND}/driver/version.info", "<html><body>502 Bad Gateway</body></html>\n")
    target_python(node)
    report = run(node)
    finding = one_finding(report, "VER001")
    assert finding.status is Status.ERROR
    assert finding.detail == "cannot read /usr/local/Ascend/driver/version.info: garbled: no key=value lines"
    assert "Traceback" not in json.dumps(report.to_dict())


def test_binary_install_info_is_an_error_for_that_file_only(node):
    install_toolkit(node, "8.1.RC1", TOOLKIT_81RC1)
    node.file(f"{ASCEND}/ascend-toolkit/8.0.0/x86_64-linux/ascend_toolkit_install.info",
              b"\x7fELF\x02\x01\x01\x00\x00\x00")
    target_python(node)
    findings = findings_of(run(node), "VER002")
    assert [(f.status, f.subject) for f in findings] == [
        (Status.ERROR, f"{ASCEND}/ascend-toolkit/8.0.0/x86_64-linux/ascend_toolkit_install.info"),
        (Status.PASS, "cann"),
    ]
    assert findings[0].detail.endswith(": binary")


def test_firmware_outside_the_driver_range_fails_with_hdk_version(node):
    install_driver(node, firmware="firmware_version.info_7.5.0.1.129_constructed.txt")
    finding = one_finding(run(node), "VER001", "firmware")
    assert finding.status is Status.FAIL
    assert "firmware 7.5.0.1.129 is outside driver 23.0.7's supported range 7.0.0..7.1.99" in finding.detail
    assert "Ascend-hdk-<chip>-npu-firmware_23.0.7.run --full" in finding.fix


def test_driver_without_firmware_file_skips_the_firmware_part(node):
    install_driver(node, firmware="")
    report = run(node)
    assert one_finding(report, "VER001", "driver").status is Status.PASS
    assert one_finding(report, "VER001", "firmware").status is Status.SKIP


def test_driver_without_cann_fails_with_recommended_cann(node):
    install_driver(node)
    target_python(node)
    finding = one_finding(run(node), "VER002")
    assert finding.status is Status.FAIL and "install CANN 9.1.0" in finding.fix


def test_torch_npu_without_cann_names_the_cann_it_needs(node):
    target_python(node, torch="2.4.0", torch_npu="2.4.0.post2")
    finding = one_finding(run(node), "VER002")
    assert finding.status is Status.FAIL and "torch_npu 2.4.0.post2 needs CANN 8.0.0" in finding.detail


def test_python_too_old_for_torch(node):
    install_toolkit(node, "8.5.0", TOOLKIT_850_NEW_LAYOUT)
    target_python(node, "3.8.18", torch="2.9.0", torch_npu="2.9.0")
    finding = one_finding(run(node), "VER005")
    assert finding.status is Status.FAIL
    assert (
        "Python 3.8.18 is not supported by torch 2.9.0 (supported: 3.10, 3.11, 3.12, 3.13)" in finding.detail
    )
    assert "use Python 3.13" in finding.fix
    assert (
        "pip install torch==2.4.0 torch_npu==2.4.0.post4" in finding.fix
    )  # newest release that supports 3.8


def test_python_minimum_patch_from_the_matrix(node):
    target_python(node, "3.7.3", torch="1.11.0", torch_npu="1.11.0.post14")
    finding = one_finding(run(node), "VER005")
    assert finding.status is Status.FAIL and "at least 3.7.5" in finding.detail


def test_torch_npu_unknown_to_the_matrix_warns(node):
    install_toolkit(node, "8.1.RC1", TOOLKIT_81RC1)
    target_python(node, torch="2.1.0", torch_npu="2.1.0.post99")
    finding = one_finding(run(node), "VER004")
    assert finding.status is Status.WARN and "2.1.0.post17" in finding.fix


def test_cann_under_a_custom_install_path_from_the_install_record(node):
    node.file("/etc/Ascend/ascend_cann_install.info", "Install_Path=/opt/Ascend\n")
    node.file(
        "/opt/Ascend/ascend-toolkit/8.1.RC1/aarch64-linux/ascend_toolkit_install.info",
        sample_text(TOOLKIT_81RC1),
    )
    node.setenv(ASCEND_TOOLKIT_HOME="/opt/Ascend/ascend-toolkit/8.1.RC1")
    target_python(node, torch="2.1.0", torch_npu="2.1.0.post12")
    report = run(node)
    cann = one_finding(report, "VER002")
    assert cann.status is Status.PASS
    assert cann.detail.startswith(
        "toolkit 8.1.RC1 in use (via ASCEND_TOOLKIT_HOME=/opt/Ascend/ascend-toolkit/8.1.RC1)"
    )
    assert one_finding(report, "VER004").status is Status.PASS


def test_recorded_bundle_replays_to_the_same_versions_findings(node, tmp_path):
    install_driver(node)
    install_toolkit(node, "8.1.RC1", TOOLKIT_81RC1)
    target_python(node, torch="2.1.0", torch_npu="2.1.0.post8")
    _, collected, replayed = collect_and_replay(node, tmp_path / "node.tar.gz", only=("versions",))
    versions = [(f.id, f.status, f.detail) for f in collected.findings if f.stage == "versions"]
    assert versions == [(f.id, f.status, f.detail) for f in replayed.findings]
    # torch_npu 2.1.0.post8 was built for CANN 8.0.RC3; 8.1.RC1 is newer: the fix names the matching torch_npu
    assert ("VER004", Status.WARN) in [(f.id, f.status) for f in replayed.findings]


def test_fixes_never_recommend_a_known_bad_release(node):
    # torch 2.8.0 on CANN 8.3.RC1: the matrix's only torch_npu for that pair is the known-bad 2.8.0
    install_toolkit(node, "8.3.RC1", "ascend_toolkit_install.info_8.3.RC1_constructed.txt")
    target_python(node, torch="2.8.0", torch_npu="2.1.0.post17")
    finding = one_finding(run(node), "VER003")
    assert finding.status is Status.FAIL
    assert "torch_npu==2.8.0 " not in finding.fix
    # the CANN in place stays: torch_npu 2.1.0.post17 is built for it, so torch goes back to 2.1.0; the newest
    # pair for CANN 8.3.RC1 that is not known-bad is 2.7.1
    assert finding.fix == (
        "pip install torch==2.1.0   # built for torch 2.1.0 and CANN 8.3.RC1 (in use)\n"
        "or pip install torch==2.7.1 torch_npu==2.7.1   # the newest pair built for CANN 8.3.RC1 (in use)"
    )


def test_every_known_bad_entry_cites_a_public_source_and_its_fix() -> None:
    """Each entry says where it comes from (a public issue or release note, quoted) and which release fixed
    it; this project's own tracker is no source."""
    from npudoctor import knowledge

    for entry in knowledge.load("known_bad")["known_bad"]:
        assert entry["url"].startswith("https://github.com/") and "npudoctor" not in entry["url"]
        assert entry["says"] and entry["source"] and isinstance(entry["fixed"], list)
        assert not set(entry["fixed"]) & set(entry["versions"])
    first = knowledge.load("known_bad")["known_bad"][0]
    assert (first["versions"], first["fixed"][0]) == (["2.8.0"], "2.8.0.post1")


def test_driver_npu_smi_reports_differs_from_version_info_asks_for_a_reboot(node):
    from tests.nodes import B3_8CARD, DRIVER_24, FIRMWARE_24, healthy_910b_node

    healthy_910b_node(node)
    in_use = [f for f in run(node).findings if f.subject == "driver:in-use"]
    assert [(f.id, f.status) for f in in_use] == [("VER001", Status.PASS)]
    assert in_use[0].detail == "npu-smi reports driver 24.1.0.3, as /usr/local/Ascend/driver/version.info records"

    install_driver(node)  # the real 23.0.7 files on disk; npu-smi (the loaded driver) still says 24.1.0.3
    (finding,) = [f for f in run(node).findings if f.subject == "driver:in-use"]
    assert finding.status is Status.WARN and finding.id == "VER001"
    assert "npu-smi reports driver 24.1.0.3 but /usr/local/Ascend/driver/version.info records 23.0.7" in (
        finding.detail)
    assert finding.fix.startswith("reboot the node so that the installed driver 23.0.7 is the one loaded")
    assert finding.evidence == {"version_info": "23.0.7", "npu_smi_driver": "24.1.0.3",
                                "version_info_path": "/usr/local/Ascend/driver/version.info"}

    # the fix applied: after the reboot the loaded driver is the installed one
    node.command("npu-smi", stdout=sample_text(B3_8CARD).replace("24.1.0.3", "23.0.7"))
    after = run(node)
    assert [f.status for f in after.findings if f.subject == "driver:in-use"] == [Status.PASS]
    assert not [f for f in after.findings if f.stage == "versions" and f.status in (Status.WARN, Status.FAIL)]

    # without npu-smi there is nothing to compare: no such finding, and VER001 still judges the files
    node.command("npu-smi", stdout="", stderr="npu-smi: command not found", rc=127)
    install_driver(node, FIRMWARE_24, DRIVER_24)
    assert not [f for f in run(node).findings if f.subject == "driver:in-use"]
