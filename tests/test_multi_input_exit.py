"""Issue 19 point 13: one exit rule for the commands that read many inputs (npudoctor.model.inputs): 2 when
none could be read, at least 1 with a warning line when some could not, the verdict's code when all were."""

from __future__ import annotations

import json

import pytest

from npudoctor.cli import main
from tests import profdirs
from tests.clirunner import cli_runner


def invoke(*args):
    return cli_runner().invoke(main, [str(a) for a in args])


def assert_partial(result):
    assert result.exit_code == 1, result.output
    assert "1 input(s) could not be read" in result.stderr and "exit 1" in result.stderr


def test_fleet(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"schema": "npudoctor.report/1", "inventory": {"hostname": "a"},
                                "findings": [{"id": "PCI001", "status": "pass"}], "summary": {"pass": 1}}))
    assert invoke("fleet", good).exit_code == 0
    for fmt in ("text", "json", "csv"):
        assert_partial(invoke("fleet", "--format", fmt, good, tmp_path / "missing.json"))
    assert invoke("fleet", tmp_path / "missing.json").exit_code == 2


def test_prof_analyze(tmp_path):
    profdirs.torch_npu_rank(tmp_path / "run", rank=0)
    assert invoke("prof", "analyze", tmp_path / "run").exit_code == 0
    for fmt in ("text", "json", "junit", "github"):
        result = invoke("prof", "analyze", "--format", fmt, tmp_path / "run", tmp_path / "missing")
        assert_partial(result)
    document = json.loads(invoke("prof", "analyze", "--format", "json", tmp_path / "run", tmp_path / "empty.csv"
                                 ).stdout)
    assert document["unreadable"][0]["input"] == str(tmp_path / "empty.csv")
    assert invoke("prof", "analyze", tmp_path / "missing").exit_code == 2


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "github"])
def test_logs_scan(tmp_path, fmt):
    log = tmp_path / "a.log"
    log.write_text("a quiet line\n")
    assert invoke("logs", "scan", "--format", fmt, log).exit_code == 0
    result = invoke("logs", "scan", "--format", fmt, log, tmp_path / "missing.log")
    assert_partial(result)
    if fmt == "json":
        assert json.loads(result.stdout)["exit_code"] == 1
    assert invoke("logs", "scan", tmp_path / "missing.log").exit_code == 2
