"""`npudoctor check --demo NAME`: scenario bundles shipped in the package, assembled from real captures."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from npudoctor import api
from npudoctor.cli import main
from npudoctor.fleet import demo
from npudoctor.model import Status
from npudoctor.probes.bundle import read_bundle
from tests.clirunner import cli_runner
from tests.samples import sample_path

# What each scenario must show: the checks that FAIL (WARN for chip-warning).
EXPECTED = {
    "healthy": (set(), set()),
    "chip-warning": (set(), {"SMI002"}),
    "hbm-ecc": ({"SMI002"}, set()),
    "old-firmware": (set(), {"SMI006"}),
    "throttled-chip": (set(), {"SMI008"}),
    "version-mismatch": ({"VER003"}, set()),
    "setenv-not-sourced": ({"LIB001"}, set()),
    "unbound-device": ({"PCI002"}, set()),
    "dcmi-8005": ({"SMI001"}, set()),
    "no-dev-davinci": ({"PCI004"}, set()),
    "whitelist-no-file": ({"HCCL002"}, set()),
    "driver-not-reloaded": (set(), {"VER001"}),
}


def test_every_scenario_is_shipped_and_listed():
    assert demo.names() == sorted(EXPECTED)
    listing = cli_runner().invoke(main, ["check", "--demo", "list"])
    assert listing.exit_code == 0
    assert all(name in listing.output for name in EXPECTED) and "assembled from real captures" in listing.output


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scenario_replays_to_what_it_shows(name):
    bundle, profile = demo.check_arguments(name, None, None, None)
    report = api.run_checks(api.make_runner(bundle=bundle), api.load_profile(profile))
    failed = {f.id for f in report.findings if f.status in (Status.FAIL, Status.ERROR)}
    warned = {f.id for f in report.findings if f.status is Status.WARN}
    assert (failed, warned) == EXPECTED[name]
    assert report.inventory["chips"]["count"] == 8 and report.inventory["os"] == "openEuler 22.03 (LTS-SP3)"
    # Each bundle says what real captures it was assembled from, and those are real samples with a source.
    about = demo.about(name)
    assert "assembled from real captures" in about["note"]
    for sample in about["assembled_from"]:
        assert "# source:" in sample_path(sample).read_text(encoding="utf-8")[:2000]
    # Nothing of the machine that generated it leaks into the bundle.
    members = read_bundle(bundle)
    assert not any(b"/tmp/" in data or b"pytest-of" in data for data in members.values())


def test_demo_exit_codes_follow_check():
    runner = cli_runner()
    healthy = runner.invoke(main, ["check", "--demo"])
    assert healthy.exit_code == 0  # healthy by default
    assert healthy.stderr.startswith("demo scenario healthy: ") and "assembled from real captures" in healthy.stderr
    result = runner.invoke(main, ["check", "--demo", "unbound-device", "--format", "json"])
    assert result.exit_code == 1 and json.loads(result.output)["inventory"]["hostname"] == "atlas-unbound-device"
    bad = runner.invoke(main, ["check", "--demo", "nope"])
    assert bad.exit_code == 2 and bad.stderr.startswith("npudoctor: error: unknown demo scenario 'nope'")


def test_scenarios_ship_in_the_wheel(tmp_path, monkeypatch):
    builders = pytest.importorskip("hatchling.builders.wheel")
    monkeypatch.setenv("NPUDOCTOR_PURE_PYTHON_BUILD", "1")
    root = Path(__file__).resolve().parents[1]
    wheel = next(iter(builders.WheelBuilder(str(root)).build(directory=str(tmp_path), versions=["standard"])))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"npudoctor/fleet/scenarios/{name}.tar.gz" for name in EXPECTED} <= names


def test_shipped_scenarios_are_what_the_generator_builds_today(tmp_path):
    """A probe that starts asking something new makes the shipped bundles stale (the new question reads as
    not-recorded on replay): regenerate with `python -m tests.demo_scenarios` when this fails."""
    from tests.demo_scenarios import SCENARIOS, build

    for name in SCENARIOS:
        build(name, tmp_path / "work", tmp_path)
        fresh = api.run_checks(api.make_runner(bundle=str(tmp_path / f"{name}.tar.gz")),
                               api.load_profile(demo.DEMO_PROFILE))
        shipped = api.run_checks(api.make_runner(bundle=demo.scenario_path(name)),
                                 api.load_profile(demo.DEMO_PROFILE))
        assert [(f.id, f.status, f.subject, f.detail) for f in fresh.findings] == [
            (f.id, f.status, f.subject, f.detail) for f in shipped.findings], name
        assert fresh.inventory == shipped.inventory
