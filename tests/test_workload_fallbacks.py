"""CPU-fallback warnings while training: counted per operator with the step first seen, in the memory log, as
TRN006, and judged by the log doctor's own rule."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from npudoctor.checks.registry import REGISTRY
from npudoctor.model.finding import Status
from npudoctor.probes.workload import TrainTrial
from npudoctor.workload import memlog
from npudoctor.workload.fallbacks import FallbackWatch

REPO = Path(__file__).resolve().parent.parent
# The real line (LlamaFactory#5071, in tests/data/samples/system): C++ prints it to fd 2.
REAL = next(line for line in (REPO / "tests/data/samples/system/"
                              "hccl_EI0006_GettingSocketTimesOut_old-format_CANN8.0.RC2_LlamaFactory-5071.txt")
            .read_text(encoding="utf-8").splitlines() if "fall back to run on the CPU" in line)


def test_the_watch_counts_fd2_lines_and_python_warnings_at_their_step(capfd: pytest.CaptureFixture) -> None:
    watch = FallbackWatch().start()
    try:
        watch.set_step(3)
        os.write(2, (REAL + "\n").encode())
        watch.set_step(4)
        os.write(2, (REAL + "\n").encode())
        with warnings.catch_warnings():  # shown whatever the test run's filters say (a filtered one is unseen)
            warnings.simplefilter("always")
            warnings.warn("CAUTION: The operator 'aten::linalg_lstsq.out' is not currently supported on the NPU "
                          "backend and will fall back to run on the CPU.", stacklevel=1)
        watch.set_step(5)
        os.write(2, b"an ordinary line\n")
    finally:
        watch.stop()
    assert watch.table() == [{"op": "aten::isin.Tensor_Tensor_out", "first_step": 3, "count": 2},
                             {"op": "aten::linalg_lstsq.out", "first_step": 4, "count": 1}]
    err = capfd.readouterr().err
    assert err.count("aten::isin.Tensor_Tensor_out") == 2 and "an ordinary line" in err  # every byte passed on


def test_memlog_carries_the_table_when_it_changes_and_readers_validate_it(tmp_path: Path) -> None:
    from npudoctor.workload.device import Device
    from npudoctor.workload.recorder import MemoryRecorder

    class Cpu(Device):
        def __init__(self) -> None:
            pass

        name = "cpu"

        def total_memory_bytes(self):  # type: ignore[override]
            return None

        def memory_stats(self):  # type: ignore[override]
            return {}

    log = tmp_path / "mem.jsonl"
    watch = FallbackWatch(capture_stderr=False).start()
    recorder = MemoryRecorder(log, Cpu(), fallbacks=watch)
    try:
        recorder.record(0)
        watch.feed(REAL)
        recorder.record(1)
        recorder.record(2)
    finally:
        recorder.close()
        watch.stop()
    records = memlog.read_records(log)
    assert [r["cpu_fallbacks"] for r in records] == [
        None, [{"op": "aten::isin.Tensor_Tensor_out", "first_step": 1, "count": 1}], None]
    hostile = json.dumps({"schema": memlog.SCHEMA, "run": "r", "step": 1,
                          "cpu_fallbacks": [{"op": "x" * 5000, "first_step": 1, "count": 2},
                                            {"op": "y", "first_step": -1, "count": 1}, "z"]})
    parsed = memlog.parse_line(hostile)
    assert parsed is not None and parsed["cpu_fallbacks"] == [{"op": "x" * 200, "first_step": 1, "count": 2}]


def _outcomes(document):
    trial = TrainTrial("/usr/bin/python3", True, 0, "done", document, "", None, 300.0)

    class Ctx:
        profile = None

        def facts(self, name):
            return trial

    return list(REGISTRY["TRN006"].func(Ctx()))


def test_trn006_fires_on_a_printed_warning_and_on_a_predicted_fallback() -> None:
    printed = {"device": "npu:0", "train": {"steps": 40, "cpu_fallbacks": [
        {"op": "aten::isin.Tensor_Tensor_out", "first_step": 7, "count": 1}]}}
    (warned,) = _outcomes(printed)
    assert warned.status is Status.WARN and warned.subject == "aten::isin.Tensor_Tensor_out"
    assert "first at step 7" in warned.detail and "ops audit" in warned.fix
    predicted = {"device": "npu:0", "train": {"steps": 40, "cpu_fallbacks": []},
                 "ops_audit": {"list": "torch_npu 2.1.0.post6 (folder ...)", "operators": 73,
                               "fallbacks": [{"name": "aten::_foo", "count": 4}]}}
    (found,) = _outcomes(predicted)
    assert found.status is Status.WARN and found.subject == "aten::_foo" and "predicted" in found.detail
    clean = {"device": "npu:0", "train": {"steps": 40, "cpu_fallbacks": []},
             "ops_audit": {"list": "torch_npu 2.14.0 (folder x)", "operators": 73, "fallbacks": []}}
    (ok,) = _outcomes(clean)
    assert ok.status is Status.PASS and "none of 73 operators" in ok.detail
    (older,) = _outcomes({"device": "npu:0", "train": {"steps": 40}})
    assert older.status is Status.SKIP


def test_train_step_records_a_fallback_printed_during_a_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capfd: pytest.CaptureFixture) -> None:
    pytest.importorskip("torch")
    from npudoctor.workload import clip, device, train

    real_loss = clip.clip_loss
    calls = []

    def loss_that_warns(logits):
        calls.append(1)
        if len(calls) == 2:  # torch_npu would print this from C++ inside the step
            os.write(2, (REAL + "\n").encode())
        return real_loss(logits)

    monkeypatch.setattr(clip, "clip_loss", loss_that_warns)
    log = tmp_path / "mem.jsonl"
    result = train.run(train.TrainOptions(device="cpu", steps=3, batch=4, log=str(log)), device.select_device("cpu"))
    assert result.cpu_fallbacks == [{"op": "aten::isin.Tensor_Tensor_out", "first_step": 1, "count": 1}]
    assert [r["cpu_fallbacks"] is not None for r in memlog.read_records(log)] == [False, True, False]
    from npudoctor.model.profile import NodeProfile
    from npudoctor.workload.findings import train_report

    report = train_report({"device": "cpu", "train": result.to_dict()}, NodeProfile("default", {}))
    trn006 = [f for f in report.findings if f.id == "TRN006"]
    assert [f.status for f in trn006] == [Status.WARN] and trn006[0].subject == "aten::isin.Tensor_Tensor_out"
    assert "aten::isin.Tensor_Tensor_out" in capfd.readouterr().err  # the user still sees it


def test_dashboard_follow_shows_the_fallbacks_of_the_current_run(tmp_path: Path) -> None:
    from npudoctor.live.training import TrainingFollow
    from npudoctor.tui.views import training_lines

    log = tmp_path / "mem.jsonl"
    with memlog.MemlogWriter(log, run="a") as writer:
        writer.write(0, step_s=0.1)
        writer.write(1, step_s=0.1, cpu_fallbacks=[{"op": "aten::isin.Tensor_Tensor_out\x1b[31m", "first_step": 1,
                                                     "count": 3}])
        writer.write(2, step_s=0.1)
    follow = TrainingFollow(str(log))
    view = follow.poll()
    assert view.cpu_fallbacks and view.cpu_fallbacks[0]["first_step"] == 1
    shown = [text for text, _style in training_lines(view, 80) if text.startswith("CPU fallback")]
    assert shown == ["CPU fallback: aten::isin.Tensor_Tensor_out (from step 1, x3)"]  # the escape removed whole
    with memlog.MemlogWriter(log, run="b") as writer:  # a new run starts over: its own table
        writer.write(0, step_s=0.1)
    assert follow.poll().cpu_fallbacks == []
