"""`npudoctor check --level 3`: the TRN findings from the training child, and what they say when it cannot run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec

import pytest

from npudoctor.checks import workload
from npudoctor.checks.registry import REGISTRY
from npudoctor.model.finding import Status
from npudoctor.model.profile import NodeProfile
from npudoctor.probes.workload import TrainTrial, parse_selftest_output


class GivenFacts:
    """A check context whose train_selftest facts are given."""

    def __init__(self, trial):
        self.trial = trial
        self.profile = NodeProfile("default", {})

    def facts(self, name):
        assert name == "train_selftest"
        return self.trial


def outcomes(check_id, trial):
    return list(REGISTRY[check_id].func(GivenFacts(trial)))


def trial(result=None, ran=True, error=None, stage="train", tail=""):
    return TrainTrial("/usr/bin/python3", ran, 0 if ran else None, stage, result, tail, error, 300.0)


def test_missing_torch_is_a_skip_with_the_install_hint():
    (outcome,) = outcomes("TRN001", trial({"torch_missing": "torch is not installed", "stage": "import torch"}))
    assert outcome.status is Status.SKIP and outcome.fix.startswith("into /usr/bin/python3: pip install torch")
    # run from this checkout: the hint installs the checkout's extra, never the package from the index
    assert "&& pip install -e '" in outcome.fix and "[train]'" in outcome.fix


def test_a_hung_or_crashed_child_fails_and_says_where():
    (hung,) = outcomes("TRN001", trial(ran=False, error="timeout", stage="train"))
    assert hung.status is Status.FAIL and "300 s" in hung.detail and "train" in hung.detail
    (crashed,) = outcomes("TRN001", trial(None, stage="select device", tail="Segmentation fault"))
    assert crashed.status is Status.FAIL and "select device" in crashed.detail
    assert crashed.evidence["output_tail"] == "Segmentation fault"
    (broken,) = outcomes("TRN001", trial({"error": "RuntimeError: EZ9999", "stage": "train", "device": "npu:0"}))
    assert broken.status is Status.FAIL and "EZ9999" in broken.detail
    for later in ("TRN002", "TRN003", "TRN004", "TRN005"):
        assert [o.status for o in outcomes(later, trial(None))] == [Status.SKIP]


def test_leak_and_reserved_growth_and_overflow_verdicts():
    base = {"device": "npu:0", "train": {"losses": [3.0, 1.0], "loss_fell": True, "steps": 2, "overflows": [],
                                         "verdict": {"leak": True, "kind": "device", "summary": "device memory leak",
                                                     "advice": ["keep loss.item()"]}}}
    (leaking,) = outcomes("TRN003", trial(base))
    assert leaking.status is Status.FAIL and leaking.fix == "keep loss.item()"
    base["train"]["verdict"] = {"leak": False, "reserved_growth": True, "summary": "reserved grows",
                                "advice": ["PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"]}
    (fragmenting,) = outcomes("TRN003", trial(base))
    assert fragmenting.status is Status.WARN and "expandable_segments" in fragmenting.fix
    base["train"]["overflows"] = [{"step": 4, "tensor": "image features", "cause": "fp16 beyond 65504"}]
    (overflow,) = outcomes("TRN002", trial(base))
    assert overflow.status is Status.FAIL and "step 4 in image features" in overflow.detail


def test_warm_up_skips_host_fragmentation_warns_and_a_worker_leak_fails():
    def verdict(**values):
        return {"device": "cpu", "train": {"losses": [3.0, 1.0], "loss_fell": True, "steps": 40, "overflows": [],
                                           "verdict": values}}

    (warming,) = outcomes("TRN003", trial(verdict(leak=False, kind="warm-up", cause="warm-up",
                                                  summary="growing, may still be warm-up",
                                                  advice=["record more steps (e.g. --steps 200) to judge"])))
    assert warming.status is Status.SKIP and "--steps 200" in warming.fix  # cannot judge yet: never a PASS
    (fragments,) = outcomes("TRN003", trial(verdict(leak=False, kind="none", cause="host-fragmentation",
                                                    host_fragmentation=True, summary="the host allocator fragments",
                                                    advice=["set MALLOC_ARENA_MAX=2"])))
    assert fragments.status is Status.WARN and "MALLOC_ARENA_MAX" in fragments.fix
    (workers,) = outcomes("TRN003", trial(verdict(leak=True, kind="workers", cause="workers",
                                                  summary="memory leak in the DataLoader workers",
                                                  advice=["the Dataset keeps what it loads"])))
    assert workers.status is Status.FAIL and workers.evidence["cause"] == "workers"
    injected = list(workload.leak_outcome(verdict(leak=False, kind="warm-up", summary="growing"), "1MiB"))
    assert [o.status for o in injected] == [Status.FAIL]  # an injected leak not found is never a skip


def test_selftest_child_reports_missing_torch(monkeypatch, capsys):
    from npudoctor.workload import selftest

    monkeypatch.setitem(sys.modules, "torch", None)
    assert selftest.main(["--steps", "5"]) == 0
    stage, document = parse_selftest_output(capsys.readouterr().out)
    assert stage == "import torch" and "[train]'" in document["torch_missing"]


def test_level_3_runs_the_tiny_step_in_a_child_and_adds_trn_findings():
    if find_spec("torch") is None:
        pytest.skip("torch is not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "npudoctor", "check", "--level", "3", "--only", "TRN", "--python", sys.executable,
         "--format", "json"], capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    report = json.loads(proc.stdout)
    statuses = {f["id"]: f["status"] for f in report["findings"]}
    assert statuses == dict.fromkeys(["TRN001", "TRN002", "TRN003", "TRN004", "TRN005", "TRN006"], "pass"), proc.stdout
    assert proc.returncode == 0
    device = next(f for f in report["findings"] if f["id"] == "TRN001")
    assert device["evidence"]["device"] == "cpu" and device["stage"] == "workload"


def test_levels_1_and_2_do_not_list_the_training_checks():
    from npudoctor import api

    assert not [s for s in api.rulebook() if s.id.startswith("TRN") and s.level < 3]
    assert [s.id for s in api.rulebook() if s.stage == "workload"] == [
        "TRN001", "TRN002", "TRN003", "TRN004", "TRN005", "TRN006"]
    assert all(REGISTRY[f"TRN00{i}"].doc for i in range(1, 7))
    assert "pip install 'npudoctor[train]'" in REGISTRY["TRN001"].doc


def test_a_child_that_died_is_quoted_by_its_own_first_error_and_the_fix_fits_it():
    tail = ("NPUDOCTOR-STAGE train\nTraceback (most recent call last):\n  File \"selftest.py\", line 9, in main\n"
            "RuntimeError: Numpy is not available\n")
    died = TrainTrial("/usr/bin/python3", True, 1, "train", None, tail, None, 300.0)
    (outcome,) = outcomes("TRN001", died)
    assert outcome.status is Status.FAIL
    assert outcome.detail.endswith("in stage train: RuntimeError: Numpy is not available")
    assert outcome.fix.startswith("numpy is missing beside torch: pip install -e '") and "[train]'" in outcome.fix
    # an error with no install to name keeps the general advice
    other = TrainTrial("/usr/bin/python3", True, 1, "train", None, "ValueError: bad batch\n", None, 300.0)
    (outcome,) = outcomes("TRN001", other)
    assert outcome.detail.endswith(": ValueError: bad batch") and outcome.fix == "see the output in the evidence"
