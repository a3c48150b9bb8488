"""Golden files for every output format of `npudoctor check`: the contracts scripts and CI parse.

Regenerate after an intended change with `NPUDOCTOR_REGEN_GOLDEN=1 python -m pytest tests/test_golden_outputs.py`
and review the diff like code.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from npudoctor import api
from npudoctor.model.finding import Status
from npudoctor.report import console, json_report, junit
from tests.nodes import WARNING_TABLE, healthy_910b_node, target_python
from tests.samples import sample_text

GOLDEN = Path(__file__).parent / "data" / "golden"


def _fixed_context(result, node):
    """What differs between machines and runs, made stable for the golden files (before rendering: the
    length of the temporary folder's name must not change where lines wrap)."""
    result.tool["version"] = "<version>"
    result.tool["python"] = "<python>"
    result.started = 1796121600.0  # 2026-12-01 10:40 UTC
    # The inventory names this machine (host facts, /etc/os-release) where the report's host is fixed below.
    result.inventory.update(hostname=(result.host or {}).get("hostname"), kernel="<kernel>", arch="<arch>",
                            os="<os>")

    def short(text):
        return text.replace(str(node.base), "/node")

    def steady(evidence):
        return {key: 0 if key == "duration_s" else short(value) if isinstance(value, str) else value
                for key, value in evidence.items()}

    result.findings = [replace(f, detail=short(f.detail), cause=short(f.cause), evidence=steady(f.evidence))
                       for f in result.findings]
    return result


@pytest.fixture
def report(node):
    """A node with one Warning chip and one NPU unbound from its driver (pcie and npu-smi stages)."""
    healthy_910b_node(node)
    node.command("npu-smi", stdout=sample_text(WARNING_TABLE))
    node.path("/sys/bus/pci/devices/0000:41:00.0/driver").unlink()
    result = api.run_checks(node.runner(), api.load_profile("atlas800t-a2-8x910b"), only=("pcie", "npu-smi"))
    result.host = {"hostname": "node-a2-01", "kernel": "5.10.0", "arch": "aarch64", "root": "<root>"}
    result.source = "root:<root>"
    return _fixed_context(result, node)


@pytest.fixture
def cpu_box(node):
    """A machine without NPUs, as a new user first runs npudoctor: torch CPU only, no Ascend software."""
    node.pci_device("0000:00:01.0", vendor_id="8086", device_id="7010", class_code="0x010100")
    target_python(node, "3.11.7", torch="2.13.0+cpu")
    result = api.run_checks(node.runner())
    result.host = {"hostname": "laptop", "kernel": "6.1.0", "arch": "x86_64", "root": "<root>"}
    result.source = "live"
    return _fixed_context(result, node)


@pytest.fixture
def stable(node):
    """Text without what differs between runs: the fake node's temporary folder and measured durations."""

    def without_run_details(text: str) -> str:
        text = text.replace(str(node.base), "<node>")
        return re.sub(r'("duration_s": |duration_s&quot;: )[0-9.]+', r"\g<1>0", text)

    return without_run_details


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("NPUDOCTOR_REGEN_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with NPUDOCTOR_REGEN_GOLDEN=1 once"
    assert text == path.read_text(encoding="utf-8")


def test_json_golden(report, stable):
    check_golden("check_warning_unbound.json", stable(json_report.render(report)))


def test_junit_golden(report, stable):
    check_golden("check_warning_unbound.junit.xml", stable(junit.render(report)))


def render_text(report, width, color=False, verbose=False):
    buffer = io.StringIO()
    console.render(report, console.make_console(file=buffer, color=color, width=width), verbose=verbose)
    return buffer.getvalue()


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("color", [False, True])
def test_text_golden(report, stable, width, color):
    text = stable(render_text(report, width, color))
    check_golden(f"check_warning_unbound.{width}{'.color' if color else ''}.txt", text)
    if not color:
        assert max(len(line) for line in text.splitlines()) <= width


def test_text_verbose_golden(report, stable):
    check_golden("check_warning_unbound.verbose.txt", stable(render_text(report, 80, verbose=True)))


@pytest.mark.parametrize("width", [80, 120])
def test_cpu_box_golden(cpu_box, stable, width):
    """The first thing a user on a machine without NPUs sees: short, one line per shared cause, a verdict."""
    text = stable(render_text(cpu_box, width))
    check_golden(f"check_cpu_box.{width}.txt", text)
    lines = text.splitlines()
    assert len(lines) <= 40
    verdict = lines[lines.index(next(line for line in lines if line.startswith("32 findings"))) + 1:]
    assert verdict[0].startswith("This is not an Ascend node: no Ascend NPU on the PCI bus")
    assert max(len(line) for line in lines) <= width


def test_cpu_box_json_and_junit_golden(cpu_box, stable):
    check_golden("check_cpu_box.json", stable(json_report.render(cpu_box)))
    check_golden("check_cpu_box.junit.xml", stable(junit.render(cpu_box)))


def test_junit_testcases_fail_by_fail_on_in_every_command(report, tmp_path):
    """Issue 18 point 4: a WARN testcase fails only under --fail-on warn, in check as in prof analyze and logs
    scan; FAIL always fails."""
    import xml.etree.ElementTree as ET

    def failing(document: str) -> set:
        return {case.get("name") for case in ET.fromstring(document).iter("testcase")
                if case.find("failure") is not None}

    warned = {f.id for f in report.findings if f.status is Status.WARN} - {
        f.id for f in report.findings if f.status is Status.FAIL}
    failed = {f.id for f in report.findings if f.status is Status.FAIL}
    assert warned and failed
    assert failing(junit.render(report)) == failed
    assert failing(junit.render(report, fail_on="warn")) == failed | warned
