"""README.md says things a command can check: each claim is read from the README itself and checked against
the tool (issue 28: "28 checks could not apply" where the tool said 29, `LANG=C` printing ASCII, `--level`'s
TRN001-TRN005, `onboard --memlog`'s memlog/1, no word of a venv or of the suite's time)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from npudoctor import api
from npudoctor.checks import ordered_specs
from npudoctor.cli import main
from npudoctor.report.console import verdict
from tests.clirunner import cli_runner

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
ONE_LINE = " ".join(README.split())  # claims wrap across lines


def test_the_not_an_ascend_node_verdict_counts_what_the_tool_counts(node):
    (claimed,) = re.findall(r"This is not an Ascend node: no Ascend NPU on the PCI bus \.\.\.; (\d+) checks could "
                            r"not apply", ONE_LINE)
    node.pci_device("0000:00:01.0", vendor_id="8086", device_id="1237", class_code="0x060000", driver=None)
    line = verdict(api.run_checks(node.runner()))
    assert f"; {claimed} checks could not apply" in line, line


def test_level_help_names_every_training_check():
    training = sorted(spec.id for spec in ordered_specs() if spec.id.startswith("TRN"))
    text = " ".join(cli_runner().invoke(main, ["check", "--help"]).stdout.split())
    assert f"({training[0]}-{training[-1]})" in text


def test_onboard_memlog_help_names_the_schemas_leak_analyze_reads():
    from npudoctor.workload import memlog

    text = " ".join(cli_runner().invoke(main, ["onboard", "--help"]).stdout.split())
    assert "memlog/1 or /2" in text and memlog.SCHEMA.endswith("/2")


def test_setup_and_test_commands_make_a_venv_first_and_the_test_time_is_said():
    for section in ("## Set up and run", "## Test"):
        body = README.split(section, 1)[1].split("```bash", 1)[1].split("```", 1)[0]
        assert body.strip().startswith("python3 -m venv "), section
    assert "externally-managed-environment" in ONE_LINE
    assert re.search(r"The suite \(about [\d,]+ tests\) takes about \d+ minutes on 2 cores", ONE_LINE)


def _symbols(env: Dict[str, str]) -> bytes:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONUTF8", "PYTHONIOENCODING"))}
    base.pop("LANG", None)
    done = subprocess.run([sys.executable, "-m", "npudoctor", "check", "--demo", "unbound-device", "--only", "pcie"],
                          env={**base, "NO_COLOR": "1", **env}, capture_output=True, timeout=120)
    return done.stdout


@pytest.mark.parametrize("claim, env, ascii_symbols", [
    ("`PYTHONIOENCODING=ascii`", {"PYTHONIOENCODING": "ascii"}, True),
    ("`LC_ALL=C` with `PYTHONUTF8=0`", {"LC_ALL": "C", "PYTHONUTF8": "0"}, True),
    ("a plain `LANG=C` as UTF-8, and then ✓/✗ are printed", {"LANG": "C"}, False),
])
def test_the_ascii_symbols_claim(claim, env, ascii_symbols):
    assert claim in ONE_LINE
    out = _symbols(env)
    assert (b"  x PCI002" in out) == ascii_symbols and ("  ✗ PCI002".encode() in out) != ascii_symbols, out[-400:]
