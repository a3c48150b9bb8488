"""What the verdict says is true (issue 17 point 4): a run that checked nothing is not "no problems", a machine
without NPUs is called what it is, and the NPD line names the problem, not the check's title."""

from __future__ import annotations

import os
import subprocess
import sys

from npudoctor import api
from npudoctor.report import npd
from npudoctor.report.console import verdict
from tests.nodes import healthy_910b_node


def _check(args, tmp_path, path="/usr/bin:/bin"):
    env = {**os.environ, "PATH": path, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("PYTHONSTARTUP", None)
    return subprocess.run([sys.executable, "-m", "npudoctor", "check", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_an_empty_root_with_nothing_to_ask_checks_nothing_and_says_so(tmp_path, node):
    # PATH has only the fake node's empty bin: no interpreter, no npu-smi; the root is empty
    report = api.run_checks(node.runner())
    assert report.nothing_checked
    line = verdict(report)
    assert line.startswith("Nothing was checked; "), line
    assert "No problems" not in line
    # through the CLI, npudoctor's own interpreter answers for the versions: with those left out, the empty
    # root checks nothing, and that is exit 2 (the doctor could not tell), never "no problems" with 0
    done = _check(["--root", str(node.root), "--skip", "versions,libraries"], tmp_path, path=str(node.bin))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("Nothing was checked")
    whole = _check(["--root", str(node.root)], tmp_path, path=str(node.bin))
    assert whole.returncode == 0 and "No problems found in the 1 check that ran (VER005)" in whole.stdout
    assert npd.verdict(report) == (npd.UNKNOWN, f"npudoctor could not tell: nothing was checked "
                                                f"({len(report.findings)} skip)")


def test_a_run_where_most_checks_could_not_apply_names_the_few_that_ran(node):
    node.command("python3", stdout="")  # an interpreter that answers nothing useful
    from tests.nodes import target_python

    target_python(node, "3.10.14", torch="2.1.0")
    report = api.run_checks(node.runner())
    line = verdict(report)
    assert line.startswith("No problems found in the 1 check that ran (VER005) on "), line


def test_a_machine_without_npus_is_called_not_an_ascend_node_on_the_last_line(node):
    node.pci_device("0000:00:01.0", vendor_id="8086", device_id="1237", class_code="0x060000", driver=None)
    report = api.run_checks(node.runner())
    line = verdict(report)
    assert line.startswith("This is not an Ascend node: no Ascend NPU on the PCI bus (1 PCI functions scanned)")
    assert "problem" not in line.split(";")[0]
    # nothing else is wrong there, so no "other problems"; the exit code stays 1 (PCI001 fails)
    assert "other problem" not in line and report.exit_code() == 1


def test_not_an_ascend_node_with_another_problem_counts_it_apart(node):
    node.pci_device("0000:00:01.0", vendor_id="8086", device_id="1237", class_code="0x060000", driver=None)
    node.setenv(HCCL_CONNECT_TIMEOUT="5")
    report = api.run_checks(node.runner())
    other = [f for f in report.findings if f.status.value in ("fail", "error") and f.id != "PCI001"]
    line = verdict(report)
    assert line.startswith("This is not an Ascend node: ")
    if other:
        assert f"; {len(other)} other problem" in line


def test_the_npd_line_names_the_problem_not_the_checks_title(node):
    healthy_910b_node(node)
    node.path("/sys/bus/pci/devices/0000:41:00.0/driver").unlink()
    report = api.run_checks(node.runner())
    code, line = npd.verdict(report)
    first = next(f for f in report.findings if f.status.value == "fail")
    assert code == npd.PROBLEM
    assert line.startswith(f"NPU node problem: {first.id} {first.subject} {first.detail[:20]}"), line
    assert first.title not in line and len(line) <= npd.MAX_MESSAGE
