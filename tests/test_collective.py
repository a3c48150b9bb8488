"""The collective probe: nccl-tests arithmetic, findings, HCCL errors explained, and one real torchrun run with
gloo on the CPU (2 processes, tiny messages)."""

from __future__ import annotations

import json
import os
import sys
import time
from importlib.util import find_spec

import pytest

from npudoctor import api
from npudoctor.cli import main
from npudoctor.fleet import collective as probe
from npudoctor.model import Status
from npudoctor.model.profile import NodeProfile, deep_merge
from tests.clirunner import cli_runner
from tests.samples import sample_text


def profile(**collective):
    base = api.load_profile()
    return NodeProfile("site", deep_merge(base.data, {"fleet": {"collective": collective}}))


def document(rows, world=8, backend="hccl", hosts=None):
    return {"schema": probe.SCHEMA, "backend": backend, "device": "npu", "world_size": world,
            "hosts": hosts or [f"node{r // 8}" for r in range(world)], "results": rows}


def test_bandwidth_figures_follow_nccl_tests():
    row = probe.row("all_reduce", 64 * 1024 ** 2, 8, [1000.0] * 7 + [2000.0], [True] * 8, 5)
    assert row["time_us"] == 2000.0 and row["slowest_rank"] == 7  # the collective ends with its last rank
    assert row["algbw_gbps"] == pytest.approx(33.554, abs=1e-3)  # 64 MiB / 2 ms, GB = 1e9 bytes
    assert row["busbw_gbps"] == pytest.approx(33.554 * 1.75, abs=1e-2)  # 2(n-1)/n
    gather = probe.row("all_gather", 1024 ** 2, 4, [100.0] * 4, [True] * 4, 5)
    assert gather["busbw_gbps"] == pytest.approx(gather["algbw_gbps"] * 0.75, abs=1e-3)


@pytest.mark.parametrize("bad", ["0K", "1T", "12,abc"])
def test_bad_sizes_are_usage_errors(bad):
    result = cli_runner().invoke(main, ["collective", "--backend", "gloo", "--sizes", bad])
    assert result.exit_code == 2 and result.stderr.startswith("npudoctor: error: --sizes")


def test_findings_wrong_values_low_bandwidth_and_a_slow_rank():
    rows = [probe.row("all_reduce", 1024 ** 3, 8, [20000.0] * 7 + [45000.0], [True] * 6 + [False, True], 5),
            probe.row("broadcast", 1024 ** 3, 8, [10000.0] * 7 + [25000.0], [True] * 8, 5)]
    found = probe.findings(document(rows), profile(busbw_gbps={"all_reduce": 150, "broadcast": 20}))
    by_id = {(f.id, f.subject): f for f in found}
    wrong = by_id[("COL001", "all_reduce:1G")]
    assert wrong.status is Status.FAIL and wrong.evidence["wrong_ranks"] == [6]
    low = by_id[("COL002", "all_reduce:1G")]
    assert low.status is Status.FAIL and low.evidence["expected_gbps"] == 150 and "below 80%" in low.detail
    assert by_id[("COL002", "broadcast:1G")].status is Status.PASS  # 42.9 GB/s >= 0.8 x 20
    slow = by_id[("COL003", "rank:7")]
    assert slow.status is Status.WARN and slow.evidence["host"] == "node0" and "2.33x" in slow.detail


def test_no_expectation_in_the_profile_is_a_skip_never_a_pass():
    rows = [probe.row("all_reduce", 1024 ** 2, 2, [100.0, 101.0], [True, True], 5)]
    found = {f.id: f for f in probe.findings(document(rows, world=2), api.load_profile())}
    assert found["COL002"].status is Status.SKIP and "fleet.collective.busbw_gbps.all_reduce" in found["COL002"].detail
    assert found["COL003"].status is Status.PASS


def test_hccl_errors_are_explained_by_the_code_base():
    plog = sample_text("hccl_EI0006_socket-establish-timeout_LINK_ERROR_INFO_hccl-doc.txt")
    (finding,) = probe.failed_run("torchrun exited with code 1", plog)
    assert finding.status is Status.ERROR and finding.evidence["codes"] == ["0x05010009"]  # HCCL errNo
    assert finding.detail.startswith("torchrun exited with code 1; 0x05010009: ") and finding.fix
    screen = sample_text("hccl_EI0006_HcclAllreduce-error-code-6_ERR01100_vllm-ascend-486.txt")
    (finding,) = probe.failed_run("torchrun exited with code 1", screen)
    assert "EI0006" in finding.evidence["codes"] and "EI0006: " in finding.detail


@pytest.mark.skipif(find_spec("torch") is None, reason="needs torch (the workers import it, never this process)")
def test_real_torchrun_with_gloo_on_two_processes():
    result = cli_runner().invoke(main, ["collective", "--backend", "gloo", "--nproc-per-node", "2", "--sizes",
                                        "1K,64K", "--iters", "2", "--warmup", "1", "--format", "json"])
    assert result.exit_code == 0, result.output + result.stderr
    doc = json.loads(result.output)
    assert doc["schema"] == "npudoctor.collective/1" and doc["world_size"] == 2 and doc["backend"] == "gloo"
    assert [(r["op"], r["size_bytes"]) for r in doc["results"]] == [
        (op, size) for op in probe.OPS for size in (1024, 65536)]
    assert all(r["correct"] and r["time_us"] > 0 and len(r["rank_times_us"]) == 2 for r in doc["results"])
    statuses = {f["id"]: f["status"] for f in doc["findings"]}
    assert statuses["COL001"] == "pass" and statuses["COL002"] == "skip"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc to see the worker is gone")
def test_a_hung_run_is_stopped_with_its_workers_at_the_timeout(tmp_path):
    # torchrun stands for itself here: a parent whose worker (a rank hung in HCCL) never ends. Killing only the
    # parent (subprocess.run's timeout) left the worker running, holding its devices.
    pid_file = tmp_path / "worker.pid"
    parent = ("import subprocess, sys, time; "
              f"w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(pid_file)!r}, 'w').write(str(w.pid)); print('rank 0 waiting', flush=True); time.sleep(60)")
    started = time.monotonic()
    code, output = probe.run_group([sys.executable, "-c", parent], 2, os.environ)
    assert code is None and time.monotonic() - started < 20 and "rank 0 waiting" in output
    worker = int(pid_file.read_text())
    for _ in range(50):  # the worker is gone (a zombie not yet reaped by init counts as gone)
        try:
            with open(f"/proc/{worker}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"worker {worker} still runs")


def test_explain_documents_the_collective_findings():
    result = cli_runner().invoke(main, ["explain", "COL002", "COL003"])
    assert result.exit_code == 0
    assert "fleet.collective.busbw_gbps" in result.output and "slow_rank_factor" in result.output
