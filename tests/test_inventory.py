"""The inventory block every report carries, and the `site` stage comparing it with a site profile's pins."""

from __future__ import annotations

from npudoctor import api
from npudoctor.model import Status
from npudoctor.model.profile import NodeProfile, deep_merge
from tests.nodes import collect_and_replay, healthy_910b_node

UBUNTU = 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\n'


def site_profile(**pins):
    base = api.load_profile("atlas800t-a2-8x910b")
    return NodeProfile("site", deep_merge(base.data, {"inventory": pins}))


def test_inventory_of_a_healthy_node_names_chips_and_every_version(node, tmp_path):
    healthy_910b_node(node)
    node.file("/etc/os-release", UBUNTU)
    reports = collect_and_replay(node, tmp_path / "node.tar.gz")
    inventory = reports.live.inventory
    assert inventory["chips"]["model"] == "910B3" and inventory["chips"]["count"] == 8
    assert inventory["chips"]["hbm_mib"] == 65536 and inventory["chips"]["link_width"] == 16
    assert inventory["chips"]["bus_ids"][0] == "0000:01:00.0" and len(inventory["chips"]["bus_ids"]) == 8
    assert (inventory["driver"], inventory["firmware"], inventory["cann_toolkit"]) == ("24.1.0.3", "7.5.0.1.129",
                                                                                      "8.0.0")
    assert (inventory["python"], inventory["torch"], inventory["torch_npu"]) == ("3.10.14", "2.1.0+cpu",
                                                                                "2.1.0.post10")
    assert inventory["os"] == "Ubuntu 22.04.4 LTS" and inventory["nnae"] is None
    first = inventory["chips"]["devices"][0]  # one row per chip: npu-smi's columns and the PCIe link of its bus id
    assert len(inventory["chips"]["devices"]) == 8 and first["health"] == "OK" and first["hbm_mib"] == 65536
    assert first["bus_id"] in inventory["chips"]["bus_ids"] and first["link_width"] == 16
    # The bundle replays to the same inventory on another machine.
    assert reports.replayed.inventory == inventory
    assert reports.live.to_dict()["inventory"] == inventory


def test_a_narrowed_run_starts_nothing_slow_for_its_inventory(node):
    healthy_910b_node(node)
    node.script("npu-smi", f"touch {node.base}/npu-smi-ran\n")
    report = api.run_checks(node.runner(), only=("pcie",))
    assert not (node.base / "npu-smi-ran").exists()
    assert report.inventory["chips"]["count"] == 8 and report.inventory["chips"]["source"] == "pci"
    assert report.inventory["driver"] is None  # not gathered, so not known: never a guess


def test_site_profile_pins_report_each_difference(node):
    healthy_910b_node(node)
    node.file("/sys/bus/pci/devices/0000:42:00.0/current_link_width", "8\n")  # one card trained at x8
    profile = site_profile(chips={"model": "910B3", "count": 8, "link_width": 16},
                           driver="24.1.0", firmware="7.5.0.1.129", torch_npu="2.1.0.post10")
    report = api.run_checks(node.runner(), profile, only=("site",))
    failed = {f.subject: f for f in report.findings if f.status is Status.FAIL}
    assert set(failed) == {"inventory:chips.link_width", "inventory:driver"}
    assert failed["inventory:driver"].evidence == {"expected": "24.1.0", "actual": "24.1.0.3"}
    assert failed["inventory:chips.link_width"].evidence["actual"] == [8, 16]
    passed = [f for f in report.findings if f.status is Status.PASS]
    assert len(passed) == 1 and passed[0].evidence == {"chips.model": "910B3", "chips.count": 8,
                                                       "firmware": "7.5.0.1.129", "torch_npu": "2.1.0.post10"}
    assert report.exit_code() == 1


def test_pins_warn_when_the_profile_says_so_and_skip_without_pins(node):
    healthy_910b_node(node)
    profile = site_profile(torch="2.2.0")
    profile = NodeProfile("site", deep_merge(profile.data, {"fleet": {"pin_mismatch": "warn"}}))
    report = api.run_checks(node.runner(), profile, only=("site",))
    statuses = {f.id: f.status for f in report.findings}
    assert statuses == {"SITE001": Status.WARN}
    assert "pip install 'torch==2.2.0'" in api.findings_by_id(report, "SITE001")[0].fix
    unpinned = api.run_checks(node.runner(), api.load_profile("atlas800t-a2-8x910b"), only=("site",))
    assert [(f.status, f.subject) for f in unpinned.findings] == [(Status.SKIP, "profile")]


def test_a_misspelt_or_nested_pin_is_a_one_line_profile_error(tmp_path):
    import pytest

    cases = (("inventory:\n  drivr: 23.0.7\n", "inventory.drivr: unknown inventory key (did you mean driver?)"),
             ("inventory:\n  chips:\n    bus_ids: [{a: 1}]\n", "inventory.chips.bus_ids: expected a value"))
    for text, says in cases:
        site = tmp_path / "site.yaml"
        site.write_text(text)
        with pytest.raises(api.UsageError) as info:
            api.load_profile(str(site))
        assert says in str(info.value) and "\n" not in str(info.value)
