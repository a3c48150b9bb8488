"""bench/bench_logs_scan.py works (on a tiny file: the 1 GiB run is not part of the test suite)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("grep") is None, reason="grep not installed")
def test_bench_runs_on_a_small_file() -> None:
    result = subprocess.run([sys.executable, str(REPO / "bench" / "bench_logs_scan.py"), "--size", "2MiB",
                             "--repeat", "1"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    lines = {line.split(":")[0]: line for line in result.stdout.splitlines()}
    assert "MB/s" in lines["grep"] and "MB/s" in lines["npudoctor"] and "MB/s" in lines["npudoctor -j"]
    assert "MB/s" in lines["pure Python"] and "peak RSS" in lines["npudoctor"] and "load average" in lines["workload"]
    # each scan's ratios to grep (wall and CPU time), for both workloads
    assert sum("ratio to grep" in line and "CPU time" in line for line in result.stdout.splitlines()) == 6
    assert "MISMATCH" not in result.stderr
