"""Issue 33 point 2: one YAML loader (``knowledge.load_yaml_text``) for every reader, and a scalar Python cannot
hold (an integer over its 4,300-digit limit, a date that is none) is one clear line in each: ``--profile``
(check, prof analyze, explain), ``--rules`` (logs scan, explain), the ``--torch-npu`` wheel's operator list."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from npudoctor.ops import oplist
from tests.test_untrusted_outputs import invoke

HUGE = "9" * 5000


@pytest.fixture
def files(tmp_path: Path):
    profile = tmp_path / "site.yaml"
    profile.write_text(f"name: site\nextends: default\nnode:\n  npu_count: {HUGE}\n", encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"rules:\n  - id: site-x\n    pattern: x\n    weight: {HUGE}\n", encoding="utf-8")
    dated = tmp_path / "dated.yaml"
    dated.write_text("name: site\nextends: default\nwhen: 2024-13-45\n", encoding="utf-8")
    wheel = tmp_path / "torch_npu-2.1.0.post6-cp311-cp311-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(oplist.CODEGEN_MEMBER, f"supported:\n  - add.Tensor\nversion: {HUGE}\n")
    log = tmp_path / "plog.log"
    log.write_text("nothing\n", encoding="utf-8")
    script = tmp_path / "model.py"
    script.write_text("print(1)\n", encoding="utf-8")
    return {"profile": profile, "rules": rules, "dated": dated, "wheel": wheel, "log": log, "script": script,
            "root": tmp_path}


@pytest.mark.parametrize("args, says", [
    (["check", "--profile", "{profile}", "--root", "{root}"], "4,300"),
    (["prof", "analyze", "{root}", "--profile", "{profile}"], "4,300"),
    (["explain", "PCI001", "--profile", "{profile}"], "4,300"),
    (["check", "--profile", "{dated}", "--root", "{root}"], "month must be in 1..12"),
    (["logs", "scan", "{log}", "--rules", "{rules}"], "4,300"),
    (["explain", "EZ9999", "--rules", "{rules}"], "4,300"),
    (["ops", "audit", "--torch-npu", "{wheel}", "--", "{script}"], "4,300"),
], ids=["check-profile", "prof-profile", "explain-profile", "check-date", "logs-rules", "explain-rules",
        "ops-wheel"])
def test_a_number_python_cannot_hold_is_one_clear_line(files, args, says) -> None:
    result = invoke([a.format(**files) for a in args])
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "sys.set_int_max_str_digits" not in result.stderr
