"""`npudoctor dashboard` as a real terminal program: under tmux at 80x24 it draws, follows a growing training
log, and quits on `q` leaving the terminal usable (cooked mode, echo on). Skips without tmux or textual."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

pytest.importorskip("textual")
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10).stdout


def _wait_for(session: str, needle: str, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if needle in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} never appeared; the screen was:\n{screen}")


def _record(step: int) -> str:
    return json.dumps({"schema": "npudoctor.memlog/1", "run": "r", "step": step, "step_s": 0.5, "data_wait_s": 0.1,
                       "loss": 2.5, "device": "npu:0", "allocated_bytes": 8 << 30, "reserved_bytes": 9 << 30}) + "\n"


def test_dashboard_draws_follows_a_log_and_quits_cleanly_under_tmux(tmp_path):
    session = f"npudoctor-test-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "mem.jsonl"
    after = tmp_path / "after.txt"
    command = (f"{shlex.quote(sys.executable)} -m npudoctor dashboard --demo --no-check --speed 4 "
               f"--follow {shlex.quote(str(log))}; echo rc=$? > {shlex.quote(str(after))}; "
               f"stty -a >> {shlex.quote(str(after))}; echo QUIT-DONE; sleep 30")
    env_prefix = f"cd {shlex.quote(os.getcwd())} && "
    _tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", env_prefix + command)
    try:
        screen = _wait_for(session, "NPU 7")
        assert "Health" in screen and "HBM used / total" in screen
        assert all(len(line) <= 80 for line in screen.splitlines())
        log.write_text("".join(_record(s) for s in range(5)))
        _tmux("send-keys", "-t", session, "3")
        _wait_for(session, "step 4")
        with open(log, "a") as handle:
            handle.write("".join(_record(s) for s in range(5, 12)))
        _wait_for(session, "step 11")
        _tmux("send-keys", "-t", session, "q")
        screen = _wait_for(session, "QUIT-DONE")
        state = after.read_text()
        assert state.startswith("rc=0")
        assert " icanon" in state and " echo " in state  # the terminal is back in cooked mode with echo
    finally:
        _tmux("kill-session", "-t", session)
