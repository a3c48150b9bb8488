"""What each command loads (issue 18 point 6): the heavy libraries only where the command needs them.

Each command runs in a fresh interpreter; the test reads which of torch, torch_npu, pandas, pyarrow, numpy and
textual it imported. `--help` of every command, `check`, the rulebook and the log, npu-smi, leak and fleet
readers load none; `prof analyze` loads pandas (and what it brings), never torch or textual.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import List, Sequence, Set

import pytest

from tests.samples import sample_path

HEAVY = ("torch", "torch_npu", "pandas", "pyarrow", "numpy", "textual")
PANDAS = {"pandas", "numpy", "pyarrow"}


def loaded_by(*invocations: List[str], names: Sequence[str] = HEAVY) -> Set[str]:
    """The modules of ``names`` (the heavy ones) a fresh interpreter holds after running ``invocations`` through
    the CLI."""
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from npudoctor.cli import main\n"
        f"for args in {json.dumps(invocations)}:\n"
        "    result = CliRunner().invoke(main, args)\n"
        "    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.output)\n"
        f"print(json.dumps(sorted(m for m in {tuple(names)!r} if m in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_help_of_every_command_loads_nothing_heavy():
    from npudoctor.cli import main

    commands = [[name, "--help"] for name in main.list_commands(None)]
    groups = [["logs", "scan", "--help"], ["prof", "analyze", "--help"], ["leak", "analyze", "--help"],
              ["parse", "npu-smi", "--help"], ["profile", "derive", "--help"]]
    assert loaded_by(["--help"], *commands, *groups) == set()


@pytest.mark.parametrize("name", ["check", "rulebook", "readers"])
def test_the_light_commands_load_nothing_heavy(tmp_path, name):
    empty = tmp_path / "root"
    empty.mkdir()
    report = tmp_path / "reports" / "node.json"
    report.parent.mkdir()
    runs = {
        "check": [["check", "--root", str(empty), "--format", "json"],
                  ["check", "--root", str(empty), "--format", "junit"],
                  ["collect", "--root", str(empty), "-o", str(tmp_path / "b.tar.gz")]],
        "rulebook": [["list-checks"], ["list-checks", "--format", "json"],
                     ["explain", "PCI001", "PROF001", "COL002", "hccl-socket-timeout", "EZ9999"]],
        "readers": [["logs", "scan", str(sample_path("plog_runtime_ffts_vector_core_exception_3lines.log"))],
                    ["parse", "npu-smi", str(sample_path("npu-smi-info_910B3_8card_NPU3-Warning_misaligned_"
                                                         "constructed.txt"))],
                    ["leak", "analyze", str(sample_path("memlog_tiny_cpu_inject_leak_1MiB_constructed.jsonl.txt"))],
                    ["check", "--root", str(empty), "--format", "json"]],
    }[name]
    if name == "readers":
        from npudoctor import api

        report.write_text(json.dumps(api.run_checks(api.make_runner(root=str(empty))).to_dict()))
        runs.append(["fleet", str(report.parent)])
    assert loaded_by(*runs) == set()


def test_prof_analyze_loads_pandas_and_never_torch_or_textual(tmp_path):
    from tests import profdirs

    profdirs.torch_npu_rank(tmp_path, rank=0)
    loaded = loaded_by(["prof", "analyze", str(tmp_path)])
    assert "pandas" in loaded and loaded <= PANDAS


def test_prof_analyze_in_a_machine_format_loads_no_node_check_and_no_renderer(tmp_path):
    """`prof analyze --format json` runs no node check and draws nothing on a terminal: the node checks, rich and
    the other writers are start-up time on every run (issue 20 point 4, the 1M-row table's whole command)."""
    from tests import profdirs

    profdirs.torch_npu_rank(tmp_path, rank=0)
    unneeded = ("npudoctor.checks", "npudoctor.checks.registry", "rich", "npudoctor.report.console",
                "npudoctor.report.junit", "npudoctor.report.github")
    assert loaded_by(["prof", "analyze", str(tmp_path), "--format", "json"], names=unneeded) == set()
