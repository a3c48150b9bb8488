"""The command line as users and scripts see it: formats, exit codes, selection, explain."""

from __future__ import annotations

import json
import subprocess
import sys
from xml.etree import ElementTree as ET

from click.testing import CliRunner

from npudoctor.cli import main


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_healthy_pcie_exits_zero_and_prints_summary(node):
    node.npu_node(8)
    result = invoke("check", "--root", str(node.root), "--only", "pcie")
    assert result.exit_code == 0, result.output
    assert "✓ PCI001" in result.output
    assert "36 findings in 5 checks: 36 pass\nNo problems found on 8x Ascend 910B\n" in result.output


def test_fail_exits_one_and_shows_fix(node):
    node.npu_node(1)
    node.pci_device("0000:c9:00.0", driver=None)
    result = invoke("check", "--root", str(node.root), "--only", "PCI002")
    assert result.exit_code == 1
    assert "✗ PCI002" in result.output and "fix: modprobe drv_pcie_host" in result.output


def test_warn_exits_zero_unless_fail_on_warn(node):
    node.pci_device("0000:01:00.0", width=8)
    assert invoke("check", "--root", str(node.root), "--only", "PCI003").exit_code == 0
    assert invoke("check", "--root", str(node.root), "--only", "PCI003", "--fail-on", "warn").exit_code == 1


def test_json_report_schema(node):
    node.npu_node(2)
    result = invoke("check", "--root", str(node.root), "--only", "pcie", "--format", "json")
    document = json.loads(result.output)
    assert document["schema"] == "npudoctor.report/1"
    assert set(document) == {"schema", "tool", "host", "source", "inventory", "findings", "summary"}
    assert document["summary"] == {"pass": len(document["findings"]), "warn": 0, "fail": 0, "skip": 0, "error": 0}
    first = document["findings"][0]
    assert set(first) == {"id", "status", "stage", "title", "subject", "detail", "evidence", "fix"}
    assert first["id"] == "PCI001" and first["evidence"]["npus"] == 2


def test_junit_has_one_testcase_per_check(node):
    node.npu_node(1)
    node.pci_device("0000:c9:00.0", driver=None)
    result = invoke("check", "--root", str(node.root), "--only", "pcie", "--format", "junit")
    root = ET.fromstring(result.output)
    cases = root.findall(".//testcase")
    findings = json.loads(invoke("check", "--root", str(node.root), "--only", "pcie", "--format", "json").output)
    assert [c.get("name") for c in cases] == list(dict.fromkeys(f["id"] for f in findings["findings"]))
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["PCI002"]
    # Which subject failed is in the message and the properties, not in the name.
    assert "1 of 2 subjects: fail: 0000:c9:00.0:" in failed[0].find("failure").get("message")
    assert {p.get("name"): p.get("value") for p in failed[0].iter("property")}["subject 0000:c9:00.0"] == "fail"


def test_skip_and_only_select_by_id_and_stage(node):
    node.npu_node(1)
    result = invoke("check", "--root", str(node.root), "--only", "pcie", "--skip", "PCI003,PCI004,PCI005",
                    "--format", "json")
    assert {f["id"] for f in json.loads(result.output)["findings"]} == {"PCI001", "PCI002"}


def test_usage_errors_exit_two_with_one_line():
    for args in (["check", "--only", "NOPE999"], ["check", "--root", "/does/not/exist"],
                 ["check", "--from", "/does/not/exist.tar.gz"], ["check", "--profile", "no-such-profile"],
                 ["explain", "XYZ123"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.count("\n") == 1 and result.output.startswith("npudoctor: error:"), result.output


def test_bad_profile_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "site.yaml"
    bad.write_text("node: [unclosed\n")
    result = CliRunner().invoke(main, ["check", "--profile", str(bad)])
    assert result.exit_code == 2 and "not valid YAML" in result.output


def test_list_checks_and_explain_use_the_docstring():
    listing = invoke("list-checks").output
    assert "PCI002" in listing and "pcie" in listing
    text = invoke("explain", "pci002").output
    assert text.startswith("PCI002: NPU bound to the Ascend driver")
    assert "devdrv_device_driver/bind" in text


def test_every_check_has_user_documentation():
    rows = json.loads(invoke("list-checks", "--format", "json").output)
    assert rows, "no checks registered"
    for row in rows:
        assert len(row["summary"]) > 20, row


def test_collect_and_check_from_bundle(node, tmp_path):
    node.npu_node(2)
    bundle = tmp_path / "node.tar.gz"
    collected = invoke("collect", "-o", str(bundle), "--root", str(node.root))
    assert collected.exit_code == 0 and "secrets redacted" in collected.output
    replay = invoke("check", "--from", str(bundle), "--only", "pcie", "--format", "json")
    assert json.loads(replay.output)["source"] == f"bundle:{bundle}"


def test_check_on_this_machine_has_no_traceback():
    """On our NPU-less machine `npudoctor check` must run end to end and say so plainly."""
    proc = subprocess.run([sys.executable, "-m", "npudoctor", "check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "PCI001" in proc.stdout
    # the verdict (after the summary line, wrapped to 80 columns) says what this machine is
    verdict = " ".join(proc.stdout.split(" skip\n", 1)[-1].split())
    assert verdict.startswith("This is not an Ascend node: no Ascend NPU on the PCI bus"), proc.stdout


def test_startup_imports_no_heavy_modules():
    """`npudoctor --help` and `check` must stay fast: torch, pandas, textual are never imported by them."""
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from npudoctor.cli import main\n"
        "CliRunner().invoke(main, ['--help'])\n"
        "CliRunner().invoke(main, ['check', '--format', 'json'])\n"
        "heavy = sorted(m for m in ('torch', 'torch_npu', 'pandas', 'textual', 'numpy') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_error_finding_exits_one(node):
    """An ERROR (the check could not finish) fails a CI gate like a FAIL: exit 1, never a silent 0."""
    node.mkdir("/usr/local/Ascend/driver/version.info")  # unreadable as a file
    result = invoke("check", "--root", str(node.root), "--only", "VER001")
    assert "E VER001" in result.output, result.output
    assert result.exit_code == 1
