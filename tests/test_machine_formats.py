"""Every command's result through every format it offers (issue 18 point 4), each read back as its format:
JSON parses and names its schema, JUnit parses with one testcase per check or cause, GitHub lines are
workflow commands, Prometheus and NPD follow their text formats, CSV has a header. The formats are read from
the commands themselves, so a format added without a case here fails."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Tuple

import click
import pytest

from npudoctor.cli import main
from tests.clirunner import cli_runner
from tests.fakenode import FakeNode
from tests.samples import sample_path

PLOG = "plog_runtime_ffts_vector_core_exception_3lines.log"
SMI = "npu-smi-info_910B3_8card_NPU3-Warning_misaligned_constructed.txt"
MEMLOG = "memlog_tiny_cpu_inject_leak_1MiB_constructed.jsonl.txt"
# Commands whose inputs only their own tests build (an ELF library, torch): where their formats are shown.
ELSEWHERE = {
    ("libs", "json"): "test_libs_cli.py", ("libs", "text"): "test_libs_cli.py",
    ("collective", "json"): "test_collective.py", ("collective", "text"): "test_collective.py",
    ("train-step", "json"): "test_workload_train.py", ("train-step", "text"): "test_workload_train.py",
    ("profile derive", "text"): "test_derive.py", ("profile derive", "json"): "test_derive.py",
}


def _command(path: str) -> click.Command:
    command: click.Command = main
    for name in path.split():
        command = command.get_command(click.Context(command), name)  # type: ignore[attr-defined]
    return command


def offered() -> List[Tuple[str, str]]:
    """(command, format) for every command with a --format option."""
    pairs = []
    for path in ("check", "list-checks", "logs scan", "prof analyze", "parse npu-smi", "leak analyze", "fleet",
                 "libs", "collective", "train-step", "profile derive"):
        for param in _command(path).params:
            if param.name == "fmt":
                pairs += [(path, choice) for choice in param.type.choices]  # type: ignore[attr-defined]
    return pairs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Dict[str, List[str]]:
    from npudoctor import api
    from tests import profdirs

    tmp_path = tmp_path_factory.mktemp("formats")
    # A node with something to check whatever python3 is on PATH (with torch or not): never "nothing checked".
    node = FakeNode(tmp_path)
    node.file("/usr/local/Ascend/driver/version.info", "Version=23.0.7\n")
    root = node.root
    profdirs.torch_npu_rank(tmp_path / "prof", rank=0)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "node.json").write_text(json.dumps(api.run_checks(api.make_runner(root=str(root))).to_dict()))
    return {"check": ["check", "--root", str(root)], "list-checks": ["list-checks"],
            "logs scan": ["logs", "scan", str(sample_path(PLOG))],
            "prof analyze": ["prof", "analyze", str(tmp_path / "prof")],
            "parse npu-smi": ["parse", "npu-smi", str(sample_path(SMI))],
            "leak analyze": ["leak", "analyze", str(sample_path(MEMLOG))], "fleet": ["fleet", str(reports)]}


def _read_back(fmt: str, text: str, exit_code: int = 0) -> None:
    if fmt == "json":
        document = json.loads(text)
        assert isinstance(document, list) or document.get("schema", "").startswith("npudoctor.") or "verdict" in \
            document or "chips" in document or "kind" in document, sorted(document)[:8]
    elif fmt == "junit":
        root = ET.fromstring(text)
        assert root.tag == "testsuites" and list(root.iter("testcase"))
    elif fmt == "github":  # the one writer: annotations, then the command's verdict with its exit code
        lines = text.splitlines()
        assert lines and all(line.startswith("::") for line in lines)
        level = "error" if exit_code else "notice"
        assert lines[-1].startswith(f"::{level} title=npudoctor ") and lines[-1].endswith(f"; exit {exit_code}")
    elif fmt == "prometheus":
        assert "# TYPE npudoctor_" in text and all(line.startswith(("#", "npudoctor_")) for line in text.splitlines())
    elif fmt == "npd":
        assert text.strip()
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        assert len(rows) >= 2 and rows[0]
    else:
        assert text.strip()


def test_every_offered_format_has_a_case():
    inputs = {"check", "list-checks", "logs scan", "prof analyze", "parse npu-smi", "leak analyze", "fleet"}
    missing = [pair for pair in offered() if pair[0] not in inputs and pair not in ELSEWHERE]
    assert missing == []
    here = Path(__file__).resolve().parent
    assert all((here / name).read_text(encoding="utf-8").count(command.split()[0]) for (command, _), name
               in ELSEWHERE.items())


@pytest.mark.parametrize("command, fmt", [pair for pair in offered() if pair not in ELSEWHERE])
def test_every_command_through_every_format_it_offers(inputs, command, fmt):
    args = inputs[command]
    result = cli_runner().invoke(main, [*args, "--format", fmt])
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr[-500:])
    _read_back(fmt, result.stdout, result.exit_code)


SECRET = "hf_abcdefghijklmnopqrstuvwxyz0123456789"
HOSTILE = f" --hf_token={SECRET}\x1b]52;c;aGk=\x07\x1b[2J"


@pytest.fixture(scope="module")
def hostile_inputs(tmp_path_factory) -> Dict[str, List[str]]:
    """The node's text with a secret and terminal escapes where each command reads it: a driver version file
    (check: a finding's detail and the inventory), a plog line (logs scan: the cause, its sample), an operator
    type in the kernel table (prof: PROF001's subject and the JSON's operator lists)."""
    from tests import profdirs

    tmp_path = tmp_path_factory.mktemp("hostile")
    kernels = profdirs.torch_npu_rank(tmp_path / "prof", rank=0) / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kernels.write_text(kernels.read_text(encoding="utf-8").replace("Cast", f"Cast{HOSTILE}"), encoding="utf-8")
    driver = tmp_path / "root" / "usr" / "local" / "Ascend" / "driver"
    driver.mkdir(parents=True)
    (driver / "version.info").write_text(f"Version=23.0.7{HOSTILE}\n", encoding="utf-8")
    line = sample_path(PLOG).read_text(encoding="utf-8").splitlines()[-1]
    (tmp_path / "plog-1.log").write_text(line.replace("_high", f"_high{HOSTILE}") + "\n", encoding="utf-8")
    return {"check": ["check", "--root", str(tmp_path / "root")], "logs scan": ["logs", "scan", str(tmp_path)],
            "prof analyze": ["prof", "analyze", str(tmp_path / "prof")]}


@pytest.mark.parametrize("command, fmt", [pair for pair in offered()
                                          if pair[0] in ("check", "logs scan", "prof analyze")])
def test_every_format_cleans_the_nodes_text_alike(hostile_inputs, command, fmt):
    """One policy for someone else's text in every format: redacted and without control characters (JSON
    escapes would carry them as data: \\u001b is refused too), then the format's own escaping."""
    result = cli_runner().invoke(main, [*hostile_inputs[command], "--format", fmt])
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.stderr[-500:])
    assert fmt in ("npd", "clusterd") or any(planted in result.stdout for planted in ("23.0.7", "Add_ee98c66280",
                                                                     "Cast"))
    for unwanted in (SECRET, "\x1b", "\x07", "\\u001b", "\\u0007", "\\x1b", "52;c;"):
        assert unwanted not in result.stdout, (unwanted, result.stdout[:800])
