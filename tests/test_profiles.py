"""Profiles and YAML someone else wrote: one safe loader, a schema, and keys that mean what they say."""

from __future__ import annotations

import os
from typing import List

import pytest

from npudoctor import api, knowledge
from npudoctor.api import findings_by_id
from npudoctor.model import Status
from npudoctor.model.profile import PROFILE_SCHEMA, NodeProfile, flatten
from tests.bounded import run_npudoctor

# 1 KB that expands to 9**9 nodes (the "billion laughs").
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)
DEEP = "[" * 200_000 + "]" * 200_000  # crashes libyaml's recursive composer (SIGSEGV) when not refused


def test_alias_bomb_and_deep_nesting_are_refused_fast_in_any_yaml():
    for text in (ALIAS_BOMB, DEEP, "x: " + "[" * 100 + "]" * 100):
        with pytest.raises(knowledge.KnowledgeError) as info:
            knowledge.load_yaml_text(text, "site.yaml")
        assert str(info.value).startswith("site.yaml: ") and "\n" not in str(info.value)
    assert knowledge.load_yaml_text("a: &x [1, 2]\nb: *x\n", "ok.yaml") == {"a": [1, 2], "b": [1, 2]}


@pytest.mark.parametrize("option", ["--profile", "--rules"])
def test_alias_bomb_profile_or_rule_file_is_one_line_cheaply(tmp_path, option):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB, encoding="utf-8")
    args = ["check", "--profile", str(bomb), "--only", "PCI001"] if option == "--profile" else [
        "logs", "scan", "--rules", str(bomb), str(bomb)]
    result = run_npudoctor(args)
    result.assert_one_line_error("bomb.yaml", "alias")
    result.assert_cheap()


def test_profile_from_dev_zero_or_a_fifo_does_not_hang_or_grow(tmp_path):
    fifo = tmp_path / "site.yaml"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        result = run_npudoctor(["check", "--profile", path, "--only", "PCI001"])
        result.assert_one_line_error(path, "not a regular file")
        result.assert_cheap()
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as handle:
        handle.truncate(knowledge.MAX_YAML_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(api.UsageError, match=r"huge\.yaml: too large"):
        api.load_profile(str(huge))


def site(tmp_path, text: str, name: str = "site.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("text, message", [
    ("node:\n  npu_cuont: 8\n", "site.yaml: node.npu_cuont: unknown key (did you mean node.npu_count?)"),
    ("nodes:\n  npu_count: 8\n", "site.yaml: nodes: unknown key (did you mean node?)"),
    ("commands:\n  timeout_s: .inf\n", "site.yaml: commands.timeout_s: expected a finite number, got inf"),
    ("commands:\n  timeout_s: .nan\n", "site.yaml: commands.timeout_s: expected a finite number, got nan"),
    ("commands:\n  timeout_s: [1, 2]\n", "site.yaml: commands.timeout_s: expected a number, got a list"),
    ("commands:\n  timeout_s: true\n", "site.yaml: commands.timeout_s: expected a number, got bool True"),
    ("commands:\n  timeout_s: 0\n", "site.yaml: commands.timeout_s: 0 is out of range (0.1 to 3600)"),
    ("node:\n  npu_count: 8.5\n", "site.yaml: node.npu_count: expected an integer, got 8.5"),
    ("hccl: 5\n", "site.yaml: hccl: expected a mapping (section), got int 5"),
    ("hccl:\n  device_ip_missing: fial\n",
     "site.yaml: hccl.device_ip_missing: 'fial' is not a severity (warn or fail) (did you mean fail?)"),
    ("pcie:\n  link_width_downgrade: error\n",
     "site.yaml: pcie.link_width_downgrade: 'error' is not a severity (warn or fail)"),
    ("- a\n- b\n", "site.yaml: a profile must be a YAML mapping, got a list"),
])
def test_profile_schema_errors_name_file_and_key(tmp_path, text, message):
    with pytest.raises(api.UsageError) as info:
        api.load_profile(site(tmp_path, text))
    assert str(info.value).endswith(message) and "\n" not in str(info.value)


def test_profile_schema_error_through_the_cli_is_exit_2_one_line(tmp_path):
    from npudoctor.cli import main
    from tests.clirunner import cli_runner

    result = cli_runner().invoke(main, ["check", "--profile", site(tmp_path, "node:\n  npu_cuont: 8\n")])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"npudoctor: error: {tmp_path / 'site.yaml'}: node.npu_cuont: unknown key (did you mean node.npu_count?)"]


def test_extends_cycles_and_chains(tmp_path):
    site(tmp_path, "extends: b.yaml\n", "a.yaml")
    site(tmp_path, "extends: a.yaml\n", "b.yaml")
    with pytest.raises(api.UsageError, match=r"b\.yaml: extends: cycle \(a\.yaml -> b\.yaml -> a\.yaml\)"):
        api.load_profile(str(tmp_path / "a.yaml"))
    site(tmp_path, "extends: self.yaml\n", "self.yaml")
    with pytest.raises(api.UsageError, match=r"extends: cycle"):
        api.load_profile(str(tmp_path / "self.yaml"))
    # A chain: the site file builds on a shipped profile and on its own parent, nearest wins.
    site(tmp_path, "extends: atlas800t-a2-8x910b\ncommands:\n  timeout_s: 3\n", "rack.yaml")
    profile = api.load_profile(site(tmp_path, "name: n7\nextends: rack.yaml\nlogs:\n  newest_files: 2\n", "n7.yaml"))
    assert profile.name == "n7"
    assert (profile.get("node.npu_count"), profile.get("commands.timeout_s"), profile.get("logs.newest_files"),
            profile.get("commands.npu_smi_timeout_s")) == (8, 3, 2, 15)
    with pytest.raises(api.UsageError, match=r"n8\.yaml: extends: unknown profile 'nosuch'"):
        api.load_profile(site(tmp_path, "extends: nosuch\n", "n8.yaml"))


def test_severity_is_one_rule_case_insensitive_everywhere(tmp_path):
    profile = api.load_profile(site(tmp_path, "hccl:\n  device_ip_missing: WARN\nversions:\n"
                                              "  driver_cann_mismatch: Fail\n"))
    assert profile.get("hccl.device_ip_missing") == "warn" and profile.get("versions.driver_cann_mismatch") == "fail"


def pcie_run(node, profile=None):
    return {f.subject: f.status for f in findings_by_id(
        api.run_checks(node.runner(), profile or api.load_profile(), only=("pcie",)), "PCI003")}


def test_pcie_downgrade_severities_from_a_site_profile(node, tmp_path):
    node.pci_device("0000:01:00.0", speed="16.0 GT/s PCIe", max_speed="32.0 GT/s PCIe")
    node.pci_device("0000:02:00.0", width=8, max_width=16)
    assert pcie_run(node) == {"0000:01:00.0": Status.WARN, "0000:02:00.0": Status.WARN}
    both = api.load_profile(site(tmp_path, "pcie:\n  link_width_downgrade: fail\n  link_speed_downgrade: fail\n"))
    assert pcie_run(node, both) == {"0000:01:00.0": Status.FAIL, "0000:02:00.0": Status.FAIL}
    width = api.load_profile(site(tmp_path, "pcie:\n  link_width_downgrade: fail\n", "w.yaml"))
    assert pcie_run(node, width) == {"0000:01:00.0": Status.WARN, "0000:02:00.0": Status.FAIL}


def test_pcie_fail_profile_exits_1_from_the_cli(node, tmp_path):
    from npudoctor.cli import main
    from tests.clirunner import cli_runner

    node.pci_device("0000:01:00.0", speed="16.0 GT/s PCIe", max_speed="32.0 GT/s PCIe")
    strict = site(tmp_path, "pcie:\n  link_speed_downgrade: fail\n", "strict.yaml")
    result = cli_runner().invoke(main, ["check", "--root", str(node.root), "--only", "PCI003", "--profile", strict])
    assert result.exit_code == 1, result.output


def shipped_keys() -> List[str]:
    keys = set()
    for name in knowledge.profile_names():
        keys |= set(flatten(knowledge.load_yaml_file(knowledge.data_dir("profiles") / f"{name}.yaml")))
    return sorted(keys - {"name", "description", "extends"})


def test_every_shipped_profile_key_is_in_the_schema_and_every_schema_key_is_shipped():
    # A room adding `prof:` keys to default.yaml lists them in model/profile.PROFILE_SCHEMA too.
    schema = set(PROFILE_SCHEMA) - {"name", "description", "extends"}
    assert set(shipped_keys()) == schema
    for name in knowledge.profile_names():
        api.load_profile(name)  # every shipped profile passes its own schema


def test_every_profile_key_is_read_by_the_checks(node, tmp_path, monkeypatch):
    """Each schema key is consulted by a check or probe on the way to a verdict (the severities' effect on
    the verdict is shown by the PCI003, HCCL012 and VER004 tests; the thresholds' by their stage tests)."""
    from tests.nodes import healthy_910b_node
    from tests.samples import sample_text

    read: set = set()
    original = NodeProfile.get

    def spy(self, dotted, default=None):
        read.add(dotted)
        return original(self, dotted, default)

    monkeypatch.setattr(NodeProfile, "get", spy)
    healthy_910b_node(node)
    node.interfaces = {"lo": ["127.0.0.1"], "enp189s0f0": ["192.0.2.10"]}
    # Problems that make the severity keys matter: a downgraded link, an NPU without a RoCE IP, and a
    # Warning chip (its health detail is read).
    node.file("/sys/bus/pci/devices/0000:c1:00.0/current_link_width", "8\n")
    node.file("/sys/bus/pci/devices/0000:c1:00.0/max_link_speed", "32.0 GT/s PCIe\n")
    node.command("npu-smi", stdout=sample_text("npu-smi-info_910B3_8card_NPU3-Warning_misaligned_constructed.txt"),
                 by_args={"info -t ecc -i 3": sample_text("npu-smi-info_t-ecc_mindcluster-doc.txt").replace(
                     "NPU ID                                   : 1", "NPU ID                                   : 3")})
    node.command("hccn_tool", stdout=sample_text("hccn_tool_ip-g_empty.txt"))
    node.file("/root/ascend/log/debug/plog/plog-1_20250101000000000.log", "[INFO] fine\n")
    api.run_checks(node.runner(), api.load_profile("atlas800t-a2-8x910b"), level=2,
                   options={"logs_dirs": ("/root/ascend/log",)})
    node_keys = {key for key in shipped_keys() if not key.startswith(tuple(f"{room}." for room in ROOMS))}
    assert node_keys - read == set(ELSEWHERE)


# Sections read by a feature of its own rather than by the node checks, and the package that reads them.
ROOMS = {"train": "workload", "prof": "prof"}


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_every_room_key_is_read_by_its_room(room):
    """A room's keys are not reached by a node check run; each one must at least be read by its room's code
    (its last name appears there), so a key nothing reads cannot ship."""
    from pathlib import Path

    import npudoctor

    source = "".join(path.read_text() for path in (Path(npudoctor.__file__).parent / ROOMS[room]).glob("*.py"))
    unread = [key for key in shipped_keys() if key.startswith(room + ".")
              and key.split(".")[-1] not in source and key.split(".")[-2] not in source]
    assert unread == []


COLLECTIVE_TEST = "test_collective.py::test_findings_wrong_values_low_bandwidth_and_a_slow_rank"
# Keys this run does not reach, and the test that shows what each one changes.
ELSEWHERE = {
    "versions.cann_newer_than_matrix": "test_versions_checks.py::test_newer_cann_severity_comes_from_the_profile",
    "versions.driver_cann_mismatch": "test_profiles.py::test_driver_cann_mismatch_severity",
    "libraries.set_env_timeout_s": "test_libs_checks.py::test_set_env_not_sourced_is_diagnosed_and_fix_checked",
    "fleet.pin_mismatch": "test_inventory.py::test_pins_warn_when_the_profile_says_so_and_skip_without_pins",
    "fleet.collective.busbw_gbps.all_reduce": COLLECTIVE_TEST,
    "fleet.collective.busbw_gbps.all_gather": COLLECTIVE_TEST,
    "fleet.collective.busbw_gbps.broadcast": COLLECTIVE_TEST,
    "fleet.collective.min_busbw_fraction": COLLECTIVE_TEST,
    "fleet.collective.slow_rank_factor": COLLECTIVE_TEST,
}


def test_driver_cann_mismatch_severity(node, tmp_path):
    from tests.nodes import DRIVER, TOOLKIT_850_NEW_LAYOUT, install_toolkit, target_python
    from tests.samples import sample_text

    # The real driver 23.0.7 version.info, edited here to a release train CANN 8.5.0 does not list.
    driver = sample_text(DRIVER).replace("V100R001C15SPC012B220", "V100R001C09SPC001B001")
    node.file("/usr/local/Ascend/driver/version.info", driver.replace("[V100R001C13],[V100R001C15]", ""))
    install_toolkit(node, "8.5.0", TOOLKIT_850_NEW_LAYOUT)
    target_python(node, "3.10.14", torch="2.1.0", torch_npu="2.1.0.post10")
    strict = api.load_profile(site(tmp_path, "versions:\n  driver_cann_mismatch: FAIL\n"))
    for profile, status in ((api.load_profile(), Status.WARN), (strict, Status.FAIL)):
        (finding,) = findings_by_id(api.run_checks(node.runner(), profile, only=("VER007",)), "VER007")
        assert finding.status is status, finding.detail
