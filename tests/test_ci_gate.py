"""deploy/ci: the model-conversion gates never pass a conversion that did not work.

The workflows' own shell text is run by bash, as the runners run it (GitHub: each step ``bash -eo pipefail``, a
failed step stops the steps that do not run ``if: always()``; GitLab: the script's lines in one shell that stops
at the first failing line), with a stand-in ``atc`` (constructed: it prints ATC's start line, then fails the way
named) and npudoctor from this checkout. The CANN environment script is not on a test machine: its line is
dropped. Also: ``logs scan --expect-success`` itself, on a log of each kind of unfinished run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
import yaml

from npudoctor.cli import main
from tests.clirunner import cli_runner
from tests.samples import sample_text

CI = Path(__file__).resolve().parents[1] / "deploy" / "ci"
START = "ATC start working now, please wait for a moment."
SUCCESS = "..........ATC run success, welcome to the next use."  # tests/data/constructed/atc_success_W11001...
# How the stand-in atc ends (None: there is no atc on PATH at all).
ENDINGS: Dict[str, Optional[str]] = {
    "not found": None,
    "segmentation fault": f'echo "{START}"; kill -SEGV $$',
    "killed": f'echo "{START}"; kill -KILL $$',
    "exit 1 without a line": f'echo "{START}"; exit 1',
    "exit 0 but never finished": f'echo "{START}"',
    "success": f'echo "{START}"; echo "{SUCCESS}"',
}
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the runners' shell, bash, is not here")


def _setup(tmp_path: Path, ending: Optional[str]) -> Dict[str, str]:
    tools = tmp_path / "tools"
    tools.mkdir()
    if ending is not None:
        atc = tools / "atc"
        atc.write_text(f"#!/bin/bash\n{ending}\n")
        atc.chmod(0o755)
    venv_bin = tmp_path / ".npudoctor" / "bin"  # where the workflows install npudoctor: this checkout's
    venv_bin.mkdir(parents=True)
    for folder in (venv_bin, tools):
        wrapper = folder / "npudoctor"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m npudoctor "$@"\n')
        wrapper.chmod(0o755)
    path = os.pathsep.join([str(tools), "/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8", "NO_COLOR": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return env


def _runnable(script: str) -> str:
    """The workflow's shell text less what a test machine cannot run (the CANN environment, the install)."""
    kept = [line for line in script.splitlines()
            if "ascend-toolkit/set_env.sh" not in line and "pip install" not in line]
    return "\n".join(kept)


def _bash(script: str, cwd: Path, env: Dict[str, str]) -> int:
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=str(cwd),
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return done.returncode


def github_job_passes(tmp_path: Path, ending: Optional[str]) -> bool:
    env = _setup(tmp_path, ending)
    workflow = yaml.safe_load((CI / "github-model-conversion.yml").read_text(encoding="utf-8"))
    failed = False
    for step in workflow["jobs"]["convert"]["steps"]:
        if "run" not in step or (failed and step.get("if") != "always()"):
            continue
        failed = _bash(_runnable(step["run"]), tmp_path, env) != 0 or failed
    return not failed


def gitlab_job_passes(tmp_path: Path, ending: Optional[str]) -> bool:
    env = _setup(tmp_path, ending)
    job = yaml.safe_load((CI / "gitlab-model-conversion.yml").read_text(encoding="utf-8"))["convert-model"]
    return _bash(_runnable("\n".join(job["script"])), tmp_path, env) == 0


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_github_gate_passes_only_a_conversion_that_succeeded(tmp_path, ending):
    assert github_job_passes(tmp_path, ENDINGS[ending]) == (ending == "success")


@pytest.mark.parametrize("ending", ["not found", "segmentation fault", "exit 0 but never finished", "success"])
def test_gitlab_gate_passes_only_a_conversion_that_succeeded(tmp_path, ending):
    passes = gitlab_job_passes(tmp_path, ENDINGS[ending])
    assert passes == (ending == "success")
    assert "<testsuite" in (tmp_path / "atc-junit.xml").read_text()  # the report is written in every case


def _scan(tmp_path: Path, text: str, *args: str) -> Any:
    log = tmp_path / "atc.log"
    log.write_text(text, encoding="utf-8")
    return cli_runner().invoke(main, ["logs", "scan", str(log), *args])


SHELL = "shell_job_messages_bash5.2_dash0.5.12.txt"


@pytest.mark.parametrize("line, kind", [
    ("bash: line 1: atc: command not found", "command_not_found"),
    ("sh: 1: atc: not found", "command_not_found"),
    ("bash: line 1: 11193 Segmentation fault      ./fakeatc > /dev/null 2>&1", "ended_by_signal"),
    ("bash: line 1: 11194 Killed                  ./k 2> /dev/null", "ended_by_signal"),
    ("atc exit code 127", "tool_failed"),
])
def test_a_shell_line_of_a_run_that_never_finished_fails_the_default_gate(tmp_path, line, kind):
    assert line in sample_text(SHELL).splitlines()
    result = _scan(tmp_path, f"{START}\n{line}\n", "--format", "json")
    assert result.exit_code == 1, result.output
    assert kind in [f["kind"] for f in json.loads(result.output)["findings"]]


@pytest.mark.parametrize("text", [f"{START}\n", "", f"{START}\nKilled\n"])
def test_expect_success_atc_fails_a_log_without_the_success_line(tmp_path, text):
    result = _scan(tmp_path, text, "--expect-success", "atc", "--format", "github")
    assert result.exit_code == 1
    assert "unfinished run" in result.output.replace("_", " ") and "ATC run success" in result.output


def test_expect_success_passes_the_log_of_a_finished_run(tmp_path):
    text = sample_text("atc_success_W11001_constructed.txt")
    assert _scan(tmp_path, text, "--expect-success", "atc").exit_code == 0
    assert _scan(tmp_path, text, "--expect-success", "welcome to the next use").exit_code == 0
    assert _scan(tmp_path, text, "--expect-success", "model saved to").exit_code == 1


def test_expect_success_is_judged_per_file(tmp_path):
    done, cut = tmp_path / "done.log", tmp_path / "cut.log"
    done.write_text(f"{START}\n{SUCCESS}\n")
    cut.write_text(f"{START}\n")
    result = cli_runner().invoke(main, ["logs", "scan", str(done), str(cut), "--expect-success", "atc",
                                        "--format", "json"])
    findings = [f for f in json.loads(result.output)["findings"] if f["kind"] == "unfinished_run"]
    assert result.exit_code == 1 and [f["subject"] for f in findings] == [str(cut)]


def test_expect_success_refuses_an_empty_text_in_one_line(tmp_path):
    result = _scan(tmp_path, f"{START}\n", "--expect-success", " ")
    assert result.exit_code == 2 and "--expect-success" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_success_line_is_found_in_a_big_file_scanned_by_worker_processes(tmp_path, monkeypatch):
    from npudoctor.logs import engine
    from npudoctor.logs.finished import expectation, extra_rules, judge_finished

    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 1000)
    log = tmp_path / "run.log"
    log.write_text("step done\n" * 400 + "training finished: model saved\n")
    expected = expectation("training finished")
    result = engine.scan_paths([str(log)], jobs=2, extra_rules=extra_rules(expected))
    assert judge_finished(result, expected) == []


def test_an_error_record_no_rule_explains_still_says_what_to_do():
    """issue 28 point 3: the log doctor's error_record findings had no fix."""
    from npudoctor.logs.scanner import Scanner
    from tests.samples import sample_data

    scanner = Scanner()
    scanner.scan_bytes("tsch.log", sample_data("device_2020_tsch_exception_print.log"))
    (record,) = [f for f in scanner.result().findings if f.kind == "error_record"]
    assert "read the first one" in record.fix and "--rules" in record.fix


def test_the_diagnosis_names_the_unfinished_run_as_the_root_cause(tmp_path):
    result = _scan(tmp_path, f"{START}\n", "--expect-success", "atc")
    assert result.exit_code == 1 and "Root cause: unfinished run" in result.stdout
    assert "No failure found" not in result.stdout
