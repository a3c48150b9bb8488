"""npudoctor's AI CPU operators agree with msprof-analyze's advisor on the same folders (when it is installed).

Install the peer apart from npudoctor (it pins its own pandas/numpy):
``python3 -m venv /tmp/msprof-venv && /tmp/msprof-venv/bin/pip install msprof-analyze``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from npudoctor.prof.engine import analyze
from tests import profdirs

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_prof.py"


def bench_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_prof", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_runs_on_a_small_table() -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--rows", "3000", "--peer", "/nonexistent/msprof-analyze"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "3,000 rows" in out.stdout and "npudoctor prof analyze:" in out.stdout


def test_advisor_answer_is_read() -> None:
    answer = ('log line\n{"status": "success", "code": 0, "message": {"problems": {"headers": [], "data": '
              '[["AICPU Issues", "Some operators and task duration exceed 20 us, such as :\\nCast,IndexPut", '
              '"1. Modify code", 2]]}}}')
    assert bench_module().advisor_aicpu(answer) == {"Cast", "IndexPut"}


def peer() -> Optional[str]:
    for candidate in (os.environ.get("NPUDOCTOR_MSPROF_ANALYZE"), shutil.which("msprof-analyze"),
                      "/tmp/msprof-venv/bin/msprof-analyze"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.mark.skipif(peer() is None, reason="msprof-analyze is not installed")
@pytest.mark.parametrize("build", [
    lambda root: profdirs.torch_npu_rank(root, rank=0),
    lambda root: profdirs.torch_npu_rank(root, rank=0, kernel="prof_kernel_details_pipeutil_matmul_bf16.csv"),
    profdirs.msprof_collection,
], ids=["torch_npu-memory-metrics", "torch_npu-pipeutil", "msprof-op_summary"])
def test_aicpu_operators_agree_with_msprof_analyze_advisor(tmp_path: Path, build: object) -> None:
    folder = build(tmp_path / "data")  # type: ignore[operator]
    out = tmp_path / "advisor"
    out.mkdir()
    answer = subprocess.run([str(peer()), "advisor", "computation", "-d", str(folder), "-o", str(out), "-l", "en",
                             "--agent"], cwd=out, capture_output=True, text=True, timeout=300)
    theirs = bench_module().advisor_aicpu(answer.stdout)
    assert theirs is not None, answer.stdout[-2000:] + answer.stderr[-2000:]
    ours = {f.subject for f in analyze([str(folder)]).findings if f.id == "PROF001" and f.status.value != "pass"}
    assert ours == theirs
