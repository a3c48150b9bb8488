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


def test_hostile_process_names_write_no_clipboard_and_no_title_under_tmux(tmp_path):
    """Issue 19 point 4: an OSC 52 (clipboard write) and an OSC 2 (title) in an npu-smi process name reach
    the terminal as nothing: tmux (on a server of its own, accepting OSC 52) gets no paste buffer and keeps
    its pane title, on the device table and on a chip's detail view (before: 11 paste buffers and the title
    "pwned-title" from the detail view); markup in the name is not read."""
    from tests.samples import smi

    hostile = "[bold]py\x1b]52;c;SElKQUNLRUQ=\x07\x1b]2;pwned-title\x07"
    table = smi("with-processes").replace("| python                   |", f"| {hostile} |")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (tmp_path / "table.txt").write_text(table, encoding="utf-8")
    script = fake_bin / "npu-smi"
    script.write_text(f"#!/bin/sh\ncat {shlex.quote(str(tmp_path / 'table.txt'))}\n")
    script.chmod(0o755)
    server = f"npudoctor-i19-{uuid.uuid4().hex[:8]}"
    command = (f"cd {shlex.quote(os.getcwd())} && PATH={shlex.quote(str(fake_bin))}:$PATH "
               f"{shlex.quote(sys.executable)} -m npudoctor dashboard --no-check; sleep 30")

    def tmux(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", server, *args], capture_output=True, text=True, timeout=10)

    config = tmp_path / "tmux.conf"
    config.write_text("set -g set-clipboard on\nset -g allow-rename on\n")
    tmux("-f", str(config), "new-session", "-d", "-s", "s", "-x", "80", "-y", "24", command)
    try:
        deadline = time.monotonic() + 20
        screen = ""
        while time.monotonic() < deadline and "[bold]p" not in screen:
            screen = tmux("capture-pane", "-p", "-t", "s").stdout
            time.sleep(0.2)
        assert "[bold]p" in screen, screen  # the name is shown (cut to "[bold]p~" in the table), markup as it is
        tmux("send-keys", "-t", "s", "Enter")  # the chip's detail view lists the processes in full
        while time.monotonic() < deadline and "bus id" not in screen:
            screen = tmux("capture-pane", "-p", "-t", "s").stdout
            time.sleep(0.2)
        assert "bus id" in screen and "[bold]py" in screen, screen
        time.sleep(1.5)  # a second redraw of the detail view
        assert tmux("list-buffers").stdout.strip() == ""  # no clipboard write reached the terminal
        assert "pwned" not in tmux("display-message", "-p", "-t", "s", "#{pane_title}").stdout
    finally:
        tmux("kill-server")
