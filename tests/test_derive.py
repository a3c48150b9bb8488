"""`npudoctor profile derive BUNDLE|REPORT -o site.yaml`: a known-good node becomes the site profile, and
`check --profile site.yaml` on another node reports every difference."""

from __future__ import annotations

import os

import yaml

from npudoctor import api
from npudoctor.cli import main
from npudoctor.fleet import demo
from npudoctor.model import Status
from tests.clirunner import cli_runner
from tests.nodes import healthy_910b_node


def derive(*args):
    return cli_runner().invoke(main, ["profile", "derive", *args])


def site_findings(site, bundle):
    report = api.run_checks(api.make_runner(bundle=bundle), api.load_profile(str(site)), only=("site",))
    return report.findings


def test_derived_profile_pins_the_node_and_passes_on_it(tmp_path):
    site = tmp_path / "site.yaml"
    result = derive(demo.scenario_path("healthy"), "-o", str(site), "--base", "atlas800t-a2-8x910b")
    assert result.exit_code == 0, result.stderr
    data = yaml.safe_load(site.read_text())
    assert data["extends"] == "atlas800t-a2-8x910b" and data["name"] == "site-from-atlas-healthy"
    pins = data["inventory"]
    assert pins["chips"] == {"model": "910B3", "family": "910B", "count": 8, "hbm_mib": 65536, "link_width": 16,
                             "link_speed_gts": 16.0, "bus_ids": pins["chips"]["bus_ids"]}
    assert (pins["driver"], pins["cann_toolkit"], pins["torch_npu"]) == ("24.1.0.3", "8.0.0", "2.1.0.post10")
    assert "nnae" not in pins  # not known on the reference node: not pinned, and the file says so
    pinned_lines = [line for line in site.read_text().splitlines()
                    if line.startswith("  ") and not line.strip().startswith("#") and not line.endswith(":")]
    assert len(pinned_lines) == 18
    assert all("  # " in line for line in pinned_lines)  # every value says where it came from
    # Thresholds come from the base profile; the same node passes every pin.
    profile = api.load_profile(str(site))
    assert profile.get("hccl.connect_timeout_s.min") == 120 and profile.get("node.npu_count") == 8
    statuses = {(f.id, f.status) for f in site_findings(site, demo.scenario_path("healthy"))}
    assert statuses == {("SITE001", Status.PASS)}


def test_another_node_reports_each_difference(tmp_path):
    site = tmp_path / "site.yaml"
    report = tmp_path / "good.json"
    report.write_text(cli_runner().invoke(main, ["check", "--demo", "healthy", "--format", "json"]).output)
    assert derive(str(report), "-o", str(site)).exit_code == 0  # from a report too
    different = [f for f in site_findings(site, demo.scenario_path("version-mismatch")) if f.status is Status.FAIL]
    assert [(f.id, f.subject, f.evidence["actual"]) for f in different] == [("SITE001", "inventory:torch", "2.2.0")]


def test_link_width_and_chip_count_differences_on_a_live_node(node, tmp_path):
    site = tmp_path / "site.yaml"
    assert derive(demo.scenario_path("healthy"), "-o", str(site)).exit_code == 0
    healthy_910b_node(node)
    node.file("/sys/bus/pci/devices/0000:c1:00.0/current_link_width", "8\n")
    report = api.run_checks(node.runner(), api.load_profile(str(site)), only=("site",))
    failed = {f.subject for f in report.findings if f.status is Status.FAIL}
    assert "inventory:chips.link_width" in failed


def test_never_overwrites_and_bad_input_is_one_line(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("mine\n")
    result = derive(demo.scenario_path("healthy"), "-o", str(site))
    assert result.exit_code == 2 and "already exists" in result.stderr and site.read_text() == "mine\n"
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\x00\x01 not json")
    bad = derive(str(junk), "-o", str(tmp_path / "x.yaml"))
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and not (tmp_path / "x.yaml").exists()
    missing = derive(str(tmp_path / "none.tar.gz"), "-o", str(tmp_path / "y.yaml"))
    assert missing.exit_code == 2 and missing.stderr.startswith("npudoctor: error:")


def test_a_fifo_or_a_device_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    for source in (str(fifo), "/dev/zero"):
        result = derive(source, "-o", str(tmp_path / "site.yaml"))
        assert result.exit_code == 2 and "not a regular file" in result.stderr, result.stderr
        assert not (tmp_path / "site.yaml").exists()
