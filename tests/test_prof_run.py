"""`npudoctor prof run`: a fake msprof (tests/data/constructed/fake_msprof.py) laying out a real PROF folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

import pytest

from npudoctor.prof import launch
from tests import profdirs
from tests.samples import CONSTRUCTED

FAKE = CONSTRUCTED / "fake_msprof.py"


def fake_env(tmp_path: Path, name: str = "msprof", **extra: str) -> Dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    script.chmod(0o755)
    template = profdirs.msprof_collection(tmp_path / "template")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               FAKE_MSPROF_TEMPLATE=str(template), NO_COLOR="1", **extra)
    env.pop("ASCEND_HOME_PATH", None)
    env.pop("ASCEND_TOOLKIT_HOME", None)
    return env


def npudoctor(args: list, env: Dict[str, str], cwd: Path, **kwargs: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "npudoctor", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, **kwargs)  # type: ignore[call-overload]


def test_run_passes_output_and_exit_code_through_then_analyses(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    out = npudoctor(["prof", "run", "-o", "out", "--aic-metrics", "PipeUtilization", "--",
                     sys.executable, "-c", "print('epoch 1 loss 2.49'); raise SystemExit(3)"], env, tmp_path)
    assert out.returncode == 3, out.stderr
    assert "epoch 1 loss 2.49" in out.stdout and "[INFO] Start profiling" in out.stdout
    assert "PROF004" in out.stdout and "npudoctor " in out.stdout and " prof run" in out.stdout
    assert "warnings in 1 rank: PROF" in " ".join(out.stdout.splitlines()[-3:])
    args = json.loads((tmp_path / "out" / "fake_msprof_args.json").read_text())
    assert "--aic-metrics=PipeUtilization" in args and any(a.startswith("--application=") for a in args)
    ok = npudoctor(["prof", "run", "-o", "out2", "--format", "json", "--", "true"], env, tmp_path)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)  # msprof's and the command's own output went to stderr
    assert "[INFO] Start profiling" in ok.stderr
    assert doc["schema"] == "npudoctor.prof/1" and doc["ranks"][0]["by_core"] == {"AI_VECTOR_CORE": 20}


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc, where nobody can create a folder")
def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    out = npudoctor(["prof", "run", "-o", "/proc/npudoctor-prof", "--", "true"], fake_env(tmp_path), tmp_path)
    assert out.returncode == 2 and out.stderr.startswith("npudoctor: error: /proc/npudoctor-prof"), out.stderr


def test_run_exports_what_the_collection_left_raw(tmp_path: Path) -> None:
    env = fake_env(tmp_path, FAKE_MSPROF_NO_EXPORT="1")
    out = npudoctor(["prof", "run", "-o", "out", "--", "true"], env, tmp_path)
    assert out.returncode == 0, out.stderr
    (prof,) = (tmp_path / "out").glob("PROF_*")
    assert (prof / "mindstudio_profiler_output").is_dir() and "PROF001" in out.stdout


def test_site_npu_prof_wrapper_is_preferred(tmp_path: Path) -> None:
    env = fake_env(tmp_path, name="npu-prof")
    assert launch.find_msprof(env).endswith("npu-prof")  # type: ignore[union-attr]


def test_msprof_in_the_cann_install_is_found(tmp_path: Path) -> None:
    tool = tmp_path / "Ascend" / "ascend-toolkit" / "latest" / "tools" / "profiler" / "bin" / "msprof"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert launch.find_msprof({"PATH": str(tmp_path / "none")}, ascend_base=str(tmp_path / "Ascend")) == str(tool)


def test_no_msprof_says_which_package_and_the_torch_npu_snippet(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))
    env.pop("ASCEND_HOME_PATH", None)
    env.pop("ASCEND_TOOLKIT_HOME", None)
    if launch.find_msprof(env) is not None:
        pytest.skip("this machine has msprof")
    out = subprocess.run([sys.executable, "-m", "npudoctor", "prof", "run", "--", "true"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    first = out.stderr.splitlines()[0]
    assert first.startswith("npudoctor: error: msprof not found") and "toolkit" in first
    assert "from torch_npu import profiler" in out.stderr and "profiler.profile(" in out.stderr
    assert "tensorboard_trace_handler" in out.stderr


def test_ctrl_c_stops_the_child_and_still_analyses(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    marker = tmp_path / "started"
    child = (f"import pathlib, time; pathlib.Path({str(marker)!r}).write_text('x'); time.sleep(60)")
    # SIGINT back to its default in the child: a test run started in the background (CI) inherits it ignored,
    # and then Ctrl-C never reaches npudoctor (this, not load, made the test time out under .ci/run)
    process = subprocess.Popen([sys.executable, "-m", "npudoctor", "prof", "run", "-o", "out", "--",
                                sys.executable, "-c", child], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=600)  # the end of the process is the event; a hang guard
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and " prof run" in stdout and "warnings in 1 rank: PROF" in stdout


def test_sigterm_stops_the_whole_tree_then_exits_143(tmp_path: Path) -> None:
    """Issue 33: a CI runner's timeout (SIGTERM) left the profiled command (its own session) and what it
    detached running. The one mechanism (probes.proctree.stop_on_sigterm) stops the tree first."""
    env = fake_env(tmp_path)
    pids = tmp_path / "pids"
    child = ("import os, pathlib, subprocess, sys, time\n"
             "daemon = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
             "start_new_session=True)\n"
             f"pathlib.Path({str(pids)!r} + '.tmp').write_text(f'{{os.getpid()}} {{daemon.pid}}')\n"
             f"os.replace({str(pids)!r} + '.tmp', {str(pids)!r})\n"
             "time.sleep(600)\n")
    process = subprocess.Popen([sys.executable, "-m", "npudoctor", "prof", "run", "-o", "out", "--",
                                sys.executable, "-c", child], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not pids.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        started = [int(pid) for pid in pids.read_text().split()]
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    # (the profiled command's own KeyboardInterrupt tracebacks pass through, as its output does)
    assert process.returncode == 143 and stderr.strip().splitlines()[-1] == "npudoctor: stopped by signal 15"
    assert "npudoctor/" not in stderr, stderr
    from npudoctor.probes import proctree

    deadline = time.monotonic() + 30
    while any(proctree._alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(proctree._alive(pid) for pid in started)
