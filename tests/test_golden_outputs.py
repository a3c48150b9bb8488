"""Golden files for every output format of `npudoctor check`: the contracts scripts and CI parse.

Regenerate after an intended change with `NPUDOCTOR_REGEN_GOLDEN=1 python -m pytest tests/test_golden_outputs.py`
and review the diff like code.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest

from npudoctor import api
from npudoctor.report import console, json_report, junit
from tests.nodes import WARNING_TABLE, healthy_910b_node
from tests.samples import sample_text

GOLDEN = Path(__file__).parent / "data" / "golden"


@pytest.fixture
def report(node):
    """A node with one Warning chip and one NPU unbound from its driver (pcie and npu-smi stages)."""
    healthy_910b_node(node)
    node.command("npu-smi", stdout=sample_text(WARNING_TABLE))
    node.path("/sys/bus/pci/devices/0000:41:00.0/driver").unlink()
    result = api.run_checks(node.runner(), api.load_profile("atlas800t-a2-8x910b"), only=("pcie", "npu-smi"))
    result.host = {"hostname": "node-a2-01", "kernel": "5.10.0", "arch": "aarch64", "root": "<root>"}
    result.source = "root:<root>"
    result.tool["version"] = "<version>"
    result.tool["python"] = "<python>"
    result.run["started"] = "<started>"
    result.inventory.update(hostname="node-a2-01", kernel="5.10.0", arch="aarch64", os="<os>")
    return result


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


@pytest.mark.parametrize("verbose", [False, True])
def test_text_golden(report, stable, verbose):
    buffer = io.StringIO()
    console.render(report, console.make_console(file=buffer, color=False), verbose=verbose)
    check_golden(f"check_warning_unbound{'.verbose' if verbose else ''}.txt", stable(buffer.getvalue()))
