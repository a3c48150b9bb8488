"""``ops audit`` as an attacker or a CI runner meets it (issue 33): a recording the program rewrote, a program that
fails, a link out of the --torch-npu folder, SIGINT/SIGTERM/SIGKILL of npudoctor (nothing may run on, no folder
may stay)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, List

import pytest

from npudoctor.ops import engine, judge, oplist, recording
from npudoctor.probes import proctree
from tests.clirunner import cli_runner

REPO = Path(__file__).resolve().parent.parent
TOKEN = "hf_" + "abcdefghijklmnopqrstuvwxyz123456"


def _invoke(args: List[str]) -> Any:
    from npudoctor.cli import main

    return cli_runner().invoke(main, ["ops", "audit", *args], env={"NO_COLOR": "1"})


# --- the recording is untrusted input -------------------------------------------------------------------------

GOOD_OP = {"count": 2, "kernels": ["CPU"], "sites": {"model.py:3": 2}, "dtypes": {"Float": 2}, "parts": {}}


@pytest.mark.parametrize("document", [
    {"calls": float("nan"), "ops": {"aten::isin.Tensor_Tensor_out": GOOD_OP}},
    {"calls": 1, "ops": {"aten::isin.Tensor_Tensor_out": {**GOOD_OP, "count": float("nan")}}},
    {"calls": 10 ** 3999, "ops": {"aten::isin.Tensor_Tensor_out": {**GOOD_OP, "count": 10 ** 3999}}},
    {"calls": 1, "ops": [["aten::isin.Tensor_Tensor_out", GOOD_OP]]},
    {"calls": 1, "ops": {"aten::isin.Tensor_Tensor_out": {**GOOD_OP, "sites": ["model.py:3"]}}},
    {"calls": 1, "ops": {"aten::isin.Tensor_Tensor_out": GOOD_OP}, "run": "raised"},
    {"calls": "1", "torch": 7, "ops": {"aten::isin.Tensor_Tensor_out": {**GOOD_OP, "kernels": "CPU",
                                                                      "parts": {"x": 1e308}}},
     "run": {"ended": ["x"], "exit_code": 10 ** 40, "error": {"a": 1}, "forks": -1}, "timing": []},
], ids=["nan-calls", "nan-count", "4000-digits", "ops-list", "sites-list", "run-string", "every-field"])
def test_a_rewritten_recording_is_judged_on_its_valid_fields_with_one_note(tmp_path: Path, document: Any) -> None:
    path = tmp_path / "recording.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    found = engine._read_recording(str(path))
    assert found is not None and "left out of the judgement" in found["damage"]
    result = judge.judge(found, oplist.read_shipped("2.1.0.post6"), run=found["run"], notes=[found["damage"]])
    json.dumps(result.to_dict(), allow_nan=False)  # every number is one JSON can hold
    result.verdict_line()
    engine.run_line({**found["run"], "seconds": 1.0})


@pytest.mark.parametrize("text, says", [
    ('{"calls": ' + "9" * 5000 + "}", "digits"),
    ("[1, 2]", "not an object"),
    ('{"ops": ', "not valid JSON"),
])
def test_a_recording_that_is_no_object_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "recording.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(engine.OpsError, match=says) as caught:
        engine._read_recording(str(path))
    assert "\n" not in str(caught.value)


def test_a_clean_recording_is_kept_whole() -> None:
    document = {"torch": "2.1.0", "calls": 2, "ops": {"aten::add.Tensor": GOOD_OP},
                "run": {"ended": "returned", "exit_code": 0, "error": None, "forks": 0, "started": 1.5},
                "timing": {"plain_step_s": 0.5, "audited_step_s": 1.0}}
    checked, dropped = recording.validate(document)
    assert dropped == 0 and checked["ops"]["aten::add.Tensor"]["sites"] == {"model.py:3": 2}
    assert checked["run"]["ended"] == "returned" and checked["timing"]["audited_step_s"] == 1.0


# --- the operator list: '' and links -------------------------------------------------------------------------

def _list_folder(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "torch_npu" / "csrc" / "aten").mkdir(parents=True)
    return site


def test_an_empty_torch_npu_is_refused_like_every_path_option(tmp_path: Path) -> None:
    script = tmp_path / "model.py"
    script.write_text("print(1)\n", encoding="utf-8")
    result = _invoke(["--torch-npu", "", "--", str(script)])
    assert result.exit_code == 2 and "an empty name" in result.stderr and result.stderr.count("\n") == 1


def test_the_torch_npu_folder_follows_no_link_out(tmp_path: Path) -> None:
    secret = tmp_path / "credentials"
    secret.write_text(f"supported:\n  - add.Tensor\n  - {TOKEN}\n", encoding="utf-8")
    site = _list_folder(tmp_path)
    (site / oplist.CODEGEN_MEMBER).symlink_to(secret)
    with pytest.raises(oplist.OpListError, match="symbolic link"):
        oplist.read_path(str(site))
    outside = tmp_path / "elsewhere"
    (outside / "csrc" / "aten").mkdir(parents=True)
    (outside / "csrc" / "aten" / "npu_native_functions_by_codegen.yaml").write_text(secret.read_text())
    other = tmp_path / "other"
    other.mkdir()
    (other / "torch_npu").symlink_to(outside)
    with pytest.raises(oplist.OpListError, match="symbolic link"):
        oplist.read_path(str(other))
    linked = tmp_path / "linked-site"
    linked.symlink_to(site)
    with pytest.raises(oplist.OpListError, match="give the file it points to"):
        oplist.read_path(str(linked))


def test_an_operator_list_with_a_huge_integer_is_one_line(tmp_path: Path) -> None:
    site = _list_folder(tmp_path)
    (site / oplist.CODEGEN_MEMBER).write_text("supported:\n  - add.Tensor\nversion: " + "9" * 5000 + "\n")
    script = tmp_path / "model.py"
    script.write_text("print(1)\n", encoding="utf-8")
    result = _invoke(["--torch-npu", str(site), "--", str(script)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "4,300" in result.stderr and "Traceback" not in result.stderr + result.stdout


# --- a program that fails, and signals: real processes (the point is the process) -------------------------------

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the audit records torch")


@needs_torch
@pytest.mark.parametrize("body, says", [
    (f"import torch\ntorch.ones(2).sum()\nimport no_such_module_{TOKEN}\n", "ModuleNotFoundError"),
    ("import sys, torch\ntorch.ones(2).sum()\nsys.exit(3)\n", "exited 3"),
])
def test_a_program_that_fails_is_no_audit_exit_2_and_its_error_line(tmp_path: Path, body: str, says: str) -> None:
    script = tmp_path / "model.py"
    script.write_text(body, encoding="utf-8")
    result = _invoke(["--torch-npu", "2.14.0", "--fail-on", "fallback", "--", str(script)])
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stdout == "" and says in result.stderr and "no verdict" in result.stderr
    assert TOKEN not in result.stderr and result.stderr.count("\n") == 1


SLEEPER = """\
import os, subprocess, sys, time
import torch
torch.ones(2).sum()
# a detached grandchild (its own session), as a server or a data loader daemon would be
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
with open({pids!r} + ".tmp", "w") as handle:
    handle.write(f"{{os.getpid()}} {{child.pid}}")
os.replace({pids!r} + ".tmp", {pids!r})
time.sleep(600)
"""


def _wait_for(predicate: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what} after {seconds} s")
        time.sleep(0.05)


@needs_torch
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_signal_to_npudoctor_leaves_nothing_running_and_no_folder(tmp_path: Path, sig: int, code: int) -> None:
    pids = tmp_path / "pids"
    script = tmp_path / "model.py"
    script.write_text(SLEEPER.format(pids=str(pids)), encoding="utf-8")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temp), "NO_COLOR": "1"}
    audit = subprocess.Popen([sys.executable, "-m", "npudoctor", "ops", "audit", "--torch-npu", "2.14.0", "--",
                              str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             # a test run in the background (CI) inherits SIGINT ignored: back to its default
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _wait_for(pids.exists, 240, "the script to start")
        started = [int(pid) for pid in pids.read_text().split()]
        audit.send_signal(sig)
        _, err = audit.communicate(timeout=120)
    finally:
        if audit.poll() is None:
            audit.kill()
    assert audit.returncode == code, err
    assert "Traceback" not in err
    # after a SIGKILL the child hears of it from the kernel (PR_SET_PDEATHSIG) and cleans up itself
    _wait_for(lambda: not any(proctree._alive(pid) for pid in started), 60, f"{started} to end")
    _wait_for(lambda: not [p for p in temp.rglob("*") if p.is_dir() and p.name.startswith("ops-")], 30,
              "the private folder to go")


def test_a_folder_a_killed_run_left_is_removed_by_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    first = proctree.private_folder("ops")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = Path(first).parent / f"ops-{dead.pid}-abcd"
    left.mkdir()
    second = proctree.private_folder("ops")
    assert not left.exists() and os.path.isdir(first) and os.path.isdir(second)
    assert Path(second).parent.stat().st_mode & 0o777 == 0o700


def test_the_child_asks_to_die_with_its_parent() -> None:
    """PR_SET_PDEATHSIG in a real child: its parent exits, the child gets SIGTERM at once."""
    code = textwrap.dedent("""\
        import os, signal, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", '''
        import os, signal, sys, time
        from npudoctor.probes.proctree import die_with_parent
        assert die_with_parent(signal.SIGTERM, int(sys.argv[1]))
        print("ready", flush=True)
        time.sleep(60)
        ''', str(os.getpid())], stdout=subprocess.PIPE, text=True)
        child.stdout.readline()
        print(child.pid, flush=True)
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    pid = int(done.stdout.split()[-1])
    _wait_for(lambda: not proctree._alive(pid), 30, "the orphaned child to end")


def test_ctrl_c_exits_130_in_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """One rule after Ctrl-C (issue 33 point 4): 130 and one line, as `prof run` did; click said "Aborted!", 1."""
    from npudoctor import api

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "make_runner", interrupted)
    result = _invoke(["--", "model.py"])  # ops audit: interrupted while it looks for the installed torch_npu
    assert result.exit_code == 130 and result.stderr == "npudoctor: interrupted\n", result.stderr
    from npudoctor.cli import main

    check = cli_runner().invoke(main, ["check", "--root", "/"], env={"NO_COLOR": "1"})
    assert check.exit_code == 130 and "interrupted" in check.stderr and "Traceback" not in check.stderr
