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


def advisor_report(peer_path: str, folder: Path, out: Path, mode: str) -> str:
    """The advisor's answer: its ``--agent`` JSON line, then the text of the HTML report it wrote."""
    import html
    import re

    out.mkdir()
    answer = subprocess.run([peer_path, "advisor", mode, "-d", str(folder), "-o", str(out), "-l", "en"], cwd=out,
                            capture_output=True, text=True, timeout=300)
    pages = list(out.glob("mstt_advisor_*.html"))
    assert pages, answer.stdout[-2000:] + answer.stderr[-2000:]
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", pages[0].read_text(), flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


@pytest.mark.skipif(peer() is None, reason="msprof-analyze is not installed")
def test_the_advisor_calls_a_mac_bound_matmul_room_for_optimisation(tmp_path: Path) -> None:
    """Its cube rule compares aic_mac_ratio with the mte2 bar (0.95): MatMulV3 rows changed to mac 0.9, mte2
    0.5 are "performance optimization operators" there; PROF022 calls them mac-bound (efficient)."""
    from tests.test_prof_compute import by_name, pipe_rank

    def mac_bound(rows: Any) -> Any:
        for row in rows:
            if row["Name"] == "aclnnMatmul_MatMulV3Common_MatMulV3":
                row["aic_mac_ratio"], row["aic_mte2_ratio"] = "0.9", "0.5"
        return rows

    folder = pipe_rank(tmp_path / "data", mac_bound)
    text = advisor_report(str(peer()), folder, tmp_path / "advisor", "computation")
    cube = text[text.index("Cube Operator related analysis"):text.index("FA Operator related analysis")]
    optimisation = cube[cube.index("set of performance optimization operators"):cube.index("set of bound operators")]
    assert "aclnnMatmul_MatMulV3Common_MatMulV3" in optimisation
    ours = next(f for f in analyze([str(folder)]).findings if f.id == "PROF022")
    assert by_name(ours.evidence["operators"], "aclnnMatmul_MatMulV3Common_MatMulV3")["pipes"] == "mac-bound"


@pytest.mark.skipif(peer() is None, reason="msprof-analyze is not installed")
def test_the_advisors_fusible_sequence_time_exceeds_the_profile(tmp_path: Path) -> None:
    """On the real 20-Slice op_summary (1.79 ms from first start to last end) the advisor reports operator
    sequences of 9.589 ms "end-to-end duration": it sums overlapping windows. PROF025's stay within the span."""
    import re

    from tests.test_prof_compute import SLICES, rows_of

    folder = profdirs.msprof_collection(tmp_path / "data")
    out = tmp_path / "advisor"
    out.mkdir()
    answer = subprocess.run([str(peer()), "advisor", "all", "-d", str(folder), "-o", str(out), "-l", "en",
                             "--agent"], cwd=out, capture_output=True, text=True, timeout=300)
    match = re.search(r"total end-to-end duration of ([\d.]+)ms", answer.stdout)
    assert match, answer.stdout[-2000:]
    rows = rows_of(SLICES)
    span_ms = (float(rows[-1]["Task Start Time(us)"]) + float(rows[-1]["Task Duration(us)"])
               - float(rows[0]["Task Start Time(us)"])) / 1000
    assert float(match.group(1)) > span_ms
    ours = next(f for f in analyze([str(folder)]).findings if f.id == "PROF025")
    assert sum(s["span_us"] for s in ours.evidence["sequences"]) / 1000 <= span_ms


@pytest.mark.skipif(peer() is None, reason="msprof-analyze is not installed")
def test_the_advisor_skips_matmuls_run_as_mix_aic_tasks(tmp_path: Path) -> None:
    """On the real MoE op_summary its cube analysis looks at AI_CORE tasks only: no cube finding for the
    GroupedMatmuls (MIX_AIC, cube pipe idle); PROF022 judges them."""
    from tests.test_prof_compute import MOE

    folder = profdirs.msprof_collection(tmp_path / "data", MOE)
    text = advisor_report(str(peer()), folder, tmp_path / "advisor", "computation")
    assert "Vector Operator related analysis" in text and "Cube Operator related analysis" not in text
    ours = next(f for f in analyze([str(folder)]).findings if f.id == "PROF022")
    assert ours.status.value == "warn" and "GroupedMatmul" in ours.detail
