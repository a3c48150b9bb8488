"""The reference CLIP run on the CPU: it learns, it logs memlog/1, the detector finds injected leaks and no
false ones, weights load by OpenAI's names, numerics comparisons catch a wrong kernel, the CLI's contract."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from npudoctor.cli import main
from npudoctor.workload import clip, device, memlog, numerics, train
from tests.clirunner import cli_runner

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture
def torch():
    """torch, imported by the tests that need it (never at collection: other tests assert it is not loaded)."""
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def one_thread(torch):
    """Two cores shared by many jobs: torch's thread pool spinning against itself costs seconds per run."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def cpu():
    return device.select_device("cpu")


def run(cpu, tmp_path=None, **options):
    values = {"device": "cpu", "steps": 30, "batch": 8}
    values.update(options)
    return train.run(train.TrainOptions(**values), cpu)


def test_loss_falls_and_every_step_is_one_memlog_line(cpu, tmp_path):
    log = tmp_path / "mem.jsonl"
    result = run(cpu, batch=16, log=str(log))
    assert result.loss_fell, result.losses
    assert result.loss_last < math.log(16) < result.loss_first
    lines = log.read_text().splitlines()
    assert len(lines) == 30
    records = [json.loads(line) for line in lines]
    assert all(set(r) == set(memlog.FIELDS) and r["schema"] == "npudoctor.memlog/2" for r in records)
    assert all(r["workers"] == 0 and r["workers_rss_bytes"] == 0 for r in records)
    assert all(r["malloc_in_use_bytes"] is None or 0 < r["malloc_in_use_bytes"] <= r["malloc_held_bytes"]
               for r in records)
    assert [r["step"] for r in records] == list(range(30))
    assert all(r["device"] == "cpu" and r["allocated_bytes"] is None and r["rss_bytes"] > 0 for r in records)
    assert all(r["step_s"] > 0 and 0 <= r["data_wait_s"] <= r["step_s"] for r in records)
    assert records[0]["logit_scale"] == pytest.approx(1 / 0.07, rel=0.01)
    assert records[-1]["time_unix_s"] >= records[0]["time_unix_s"]
    assert not result.verdict.leak


def test_broken_backward_shows_as_a_loss_that_does_not_fall(cpu, monkeypatch, torch):
    monkeypatch.setattr(torch.optim.AdamW, "step", lambda self, closure=None: None)
    assert run(cpu, batch=16).loss_fell is False


def train_step_child(*args):
    """`npudoctor train-step` in a fresh process: on the CPU a leak shows in RSS only once malloc has no freed
    memory left to hand out again, and earlier tests in this process leave plenty."""
    proc = subprocess.run([sys.executable, "-m", "npudoctor", "train-step", "--device", "cpu", "--steps", "30",
                           "--batch", "8", "--format", "json", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("leak", ["1MiB", "graph"])
def test_injected_leaks_are_found_within_50_steps(leak, tmp_path):
    log = tmp_path / "mem.jsonl"
    rc, document = train_step_child("--inject-leak", leak, "--log", str(log))
    verdict = document["train"]["verdict"]
    assert verdict["leak"] and verdict["kind"] == "host" and verdict["confidence"] > 0.999, verdict["summary"]
    if leak == "1MiB":
        assert verdict["slope_bytes_per_step"] == pytest.approx(1 << 20, rel=0.25)
    # The injected leak found is the expected outcome: TRN003 passes and the run exits 0.
    trn003 = next(f for f in document["report"]["findings"] if f["id"] == "TRN003")
    assert trn003["status"] == "pass" and f"injected leak ({leak}) was found" in trn003["detail"]
    assert rc == 0
    judged = cli_runner().invoke(main, ["leak", "analyze", str(log), "--format", "json"])
    assert judged.exit_code == 1
    data = json.loads(judged.stdout)
    assert data["leak"] is True and data["slope_bytes_per_step"] > 500_000
    assert {"confidence", "projected_oom_step", "reserved_growth"} <= set(data)
    text = cli_runner().invoke(main, ["leak", "analyze", str(log)])
    assert text.exit_code == 1 and "host memory leak" in text.stdout
    assert " ".join(text.stdout.splitlines()[-2:]).startswith("1 problem in the memory log: TRN003 ")


def test_no_leak_on_clean_runs_over_several_seeds(cpu):
    verdicts = [run(cpu, seed=seed).verdict for seed in range(4)]
    assert not any(v.leak for v in verdicts), [v.summary for v in verdicts]


def test_vit_b_32_has_openai_names_and_shapes(torch):
    with torch.device("meta"):
        state = clip.build_model(clip.CONFIGS["vit-b-32"]).state_dict()
    # OpenAI's ViT-B/32 (clip/model.py): 151,277,313 parameters under these names.
    assert sum(v.numel() for v in state.values()) == 151_277_313
    expected = {
        "visual.conv1.weight": (768, 3, 32, 32), "visual.class_embedding": (768,),
        "visual.positional_embedding": (50, 768), "visual.ln_pre.weight": (768,), "visual.proj": (768, 512),
        "visual.transformer.resblocks.11.attn.in_proj_weight": (2304, 768),
        "visual.transformer.resblocks.11.mlp.c_fc.weight": (3072, 768), "visual.ln_post.bias": (768,),
        "token_embedding.weight": (49408, 512), "positional_embedding": (77, 512),
        "transformer.resblocks.11.attn.out_proj.weight": (512, 512),
        "transformer.resblocks.11.mlp.c_proj.weight": (512, 2048), "ln_final.weight": (512,),
        "text_projection": (512, 512), "logit_scale": (),
    }
    assert {k: tuple(state[k].shape) for k in expected} == expected
    assert not any("resblocks.12" in k for k in state)
    assert clip.config_from_state_dict(state) == clip.CONFIGS["vit-b-32"]


def test_saved_weights_reload_by_name_also_from_a_wrapped_checkpoint(tmp_path, torch):
    torch.manual_seed(3)
    model = clip.build_model(clip.CONFIGS["tiny"])
    wrapped = {"state_dict": {"module." + k: v for k, v in model.state_dict().items()}, "epoch": 3}
    path = tmp_path / "ckpt.pt"
    torch.save(wrapped, path)
    loaded, config = clip.model_from_weights(str(path))
    assert config == clip.CONFIGS["tiny"]
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
    (tmp_path / "bad.pt").write_bytes(b"\x00garbage")
    with pytest.raises(clip.WeightsError, match=r"not a torch\.save zip archive"):
        clip.model_from_weights(str(tmp_path / "bad.pt"))


def test_operator_comparison_catches_a_gelu_that_ignores_tanh(cpu, monkeypatch, torch):
    from npudoctor.knowledge import shipped_defaults

    tolerance = shipped_defaults()["train.ops_tolerance"]
    assert all(op.ok for op in numerics.compare_ops(cpu, tolerance)), numerics.compare_ops(cpu, tolerance)
    exact = torch.nn.functional.gelu
    monkeypatch.setattr(torch.nn.functional, "gelu", lambda x, approximate="none": exact(x))
    bad = [op.op for op in numerics.compare_ops(cpu, tolerance) if not op.ok]
    assert bad == ["gelu_tanh"]


def test_whole_step_against_the_cpu_reference(cpu):
    comparison = numerics.compare_step(cpu, clip.CONFIGS["tiny"], batch=4)
    assert comparison.ok and comparison.reference == "cpu float64"
    assert comparison.loss_rel_diff < 1e-5 and comparison.grad_norm_rel_diff < 1e-4


def test_fp16_overflow_is_named_with_its_cause(torch):
    finite = torch.ones(2, 2)
    overflow = train.diagnose_overflow(7, "fp16", finite, torch.tensor([[float("inf"), 1.0]]), finite,
                                       torch.tensor(14.0), torch.tensor(2.6))
    assert overflow.tensor == "image features" and "65504" in overflow.cause and overflow.step == 7
    scale = train.diagnose_overflow(1, "fp16", finite, finite, finite, torch.tensor(1.0), torch.tensor(float("nan")))
    assert scale.tensor == "logit_scale" and "loss scaling" in scale.cause


def test_train_step_cli_text_report_with_numerics(tmp_path):
    log = tmp_path / "mem.jsonl"
    result = cli_runner().invoke(main, ["train-step", "--device", "cpu", "--steps", "20", "--batch", "8", "--ops",
                                        "--compare-cpu", "--log", str(log)])
    assert result.exit_code == 0, result.output
    for check_id in ("TRN001", "TRN002", "TRN003", "TRN004", "TRN005"):
        assert check_id in result.stdout
    assert "9 operators within" in result.stdout and "whole step vs cpu float64" in result.stdout
    assert result.stdout.splitlines()[-1] == "No problems found training on cpu"
    assert len(memlog.read_records(log)) == 20
    assert "chosen because: requested" in " ".join(result.stdout.split())  # the device and why, in TRN001
    assert result.stderr == ""  # not a terminal: no progress


def test_train_step_loads_weights_by_openai_names(tmp_path, torch):
    torch.manual_seed(5)
    path = tmp_path / "clip.pt"
    torch.save(clip.build_model(clip.CONFIGS["tiny"]).state_dict(), path)
    result = cli_runner().invoke(main, ["train-step", "--device", "cpu", "--weights", str(path), "--steps", "3",
                                        "--batch", "4", "--compare-cpu", "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["train"]["model"] == "weights" and document["compare_cpu"]["ok"]
    statuses = {f["id"]: f["status"] for f in document["report"]["findings"]}
    assert statuses["TRN002"] == "skip" and statuses["TRN004"] == "pass"  # 3 steps: too few to judge the loss


def test_cli_usage_errors_are_one_line_and_exit_2(tmp_path):
    for args, message in (
        (["train-step", "--inject-leak", "lots"], "--inject-leak"),
        (["train-step", "--weights", str(tmp_path / "none.pt")], "not a regular file"),
        (["leak", "analyze", str(tmp_path / "none.jsonl")], "cannot open"),
        (["leak", "analyze", str(tmp_path)], "not a regular file"),
        (["train-step", "--device", "cpu", "--log", str(README)], "is not a npudoctor.memlog log"),
    ):
        result = cli_runner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert re.fullmatch(r"npudoctor: error: .*" + re.escape(message) + r".*\n", result.stderr), result.stderr


def test_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    result = cli_runner().invoke(main, ["train-step", "--device", "cpu"])
    assert result.exit_code == 2 and "pip install torch --index-url https://download.pytorch.org/whl/cpu" in (
        result.stderr)
    assert "[train]'" in result.stderr and len(result.stderr.splitlines()) == 1


def test_readme_monitor_example_runs_and_its_log_is_judged(tmp_path):
    text = README.read_text(encoding="utf-8")
    code = re.search(r"<!-- readme-example: memory-monitor -->\n```python\n(.*?)```", text, re.S).group(1)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    records = memlog.read_records(tmp_path / "mem.jsonl")
    assert [r["step"] for r in records] == list(range(30)) and records[0]["loss"] is not None
    result = cli_runner().invoke(main, ["leak", "analyze", str(tmp_path / "mem.jsonl")])
    assert result.exit_code == 0 and "no leak" in result.stdout


def test_monitor_driven_by_the_optimizer_hook(tmp_path, torch, monkeypatch):
    from npudoctor.monitor import MemoryMonitor
    from npudoctor.workload import hostmem

    for name in hostmem.LAUNCHER_ENV:  # no launcher: the job is this process alone
        monkeypatch.delenv(name, raising=False)

    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with MemoryMonitor(tmp_path / "m.jsonl", optimizer=optimizer) as monitor:
        for _ in range(3):
            monitor.batch_ready()
            model(torch.randn(2, 4)).sum().backward()
            optimizer.step()
    optimizer.step()  # after close: the hook is gone
    records = memlog.read_records(tmp_path / "m.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2] and all(r["data_wait_s"] is not None for r in records)
    assert monitor.device.name == "cpu"
    assert all(r["pids"] == [os.getpid()] for r in records)  # the job, as the dashboard tells it


def test_auto_device_survives_a_broken_torch_npu_and_says_why(tmp_path, monkeypatch):
    fake = tmp_path / "torch_npu"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ImportError("libhccl.so: cannot open shared object file")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    ok, why = device.probe_npu(timeout_s=120)
    assert not ok and "import torch_npu fails" in why and "libhccl.so" in why
    chosen = device.select_device("auto")
    assert chosen.kind == "cpu" and "libhccl.so" in chosen.reason and "cuda: not available" in chosen.reason
    with pytest.raises(device.DeviceUnavailable, match="--device npu: import torch_npu fails"):
        device.select_device("npu")


def test_cuda_and_npu_share_one_allocator_path(tmp_path, monkeypatch, torch):
    """No GPU here: the CUDA (and, identically, NPU) allocator answers are faked; the recorder and the verdict
    are the real ones."""
    from types import SimpleNamespace

    from npudoctor.workload import leak
    from npudoctor.workload.recorder import MemoryRecorder

    calls = {"n": 0}

    def memory_stats(index):
        calls["n"] += 1
        allocated = (1 << 30) + calls["n"] * (1 << 20)
        return {"allocated_bytes.all.current": allocated, "allocated_bytes.all.peak": allocated,
                "reserved_bytes.all.current": allocated + (64 << 20), "reserved_bytes.all.peak": allocated + (64 << 20),
                "active_bytes.all.current": allocated, "active_bytes.all.peak": allocated,
                "inactive_split_bytes.all.current": 3 << 20, "num_alloc_retries": 0, "num_ooms": 0}

    monkeypatch.setattr(torch.cuda, "memory_stats", memory_stats)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(total_memory=80 << 30))
    gpu = device.Device("cuda", 0, "faked")
    recorder = MemoryRecorder(tmp_path / "mem.jsonl", gpu)
    for step in range(40):
        recorder.record(step, loss=torch.tensor(1.5))
    recorder.close()
    records = memlog.read_records(tmp_path / "mem.jsonl")
    assert records[0]["device"] == "cuda:0" and records[0]["device_total_bytes"] == 80 << 30
    assert records[0]["reserved_bytes"] - records[0]["allocated_bytes"] == 64 << 20 and records[0]["loss"] == 1.5
    assert records[0]["inactive_split_bytes"] == 3 << 20 and records[0]["schema"] == "npudoctor.memlog/2"
    verdict = leak.analyze(records)
    assert verdict.kind == "device" and verdict.slope_bytes_per_step == pytest.approx(1 << 20)
    assert verdict.projected_oom_step == pytest.approx(39 + ((80 << 30) - (1 << 30) - 40 * (1 << 20) - (64 << 20))
                                                       / (1 << 20), abs=1)


def test_fp16_overflow_in_a_real_run_is_reported_with_its_cause(cpu, monkeypatch):
    from npudoctor.workload.data import SyntheticPairs

    original = SyntheticPairs.__getitem__
    def huge_images(self, index):  # pixels of 1e6: fp16 activations overflow in the patch embedding
        image, tokens = original(self, index)
        return image * 1e6, tokens

    monkeypatch.setattr(SyntheticPairs, "__getitem__", huge_images)
    result = run(cpu, steps=3, precision="fp16")
    assert result.overflows, result.losses
    first = result.overflows[0]
    assert first.step == 0 and first.tensor == "image features" and "65504" in first.cause


def test_a_step_that_crashes_on_the_device_is_a_fail_finding_not_a_traceback(monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise RuntimeError("NPU out of memory. Tried to allocate 2.00 GiB\n(EL0004)")

    monkeypatch.setattr(train, "run", out_of_memory)
    result = cli_runner().invoke(main, ["train-step", "--device", "cpu"])
    assert result.exit_code == 1 and not isinstance(result.exception, RuntimeError), result.output
    assert "✗ TRN001" in result.stdout
    assert "NPU out of memory. Tried to allocate 2.00 GiB (EL0004)" in " ".join(result.stdout.split())
    assert "1 problem training on cpu: TRN001" in " ".join(result.stdout.splitlines()[-2:])


def test_a_script_runs_the_whole_step_through_the_session_without_the_cli(tmp_path):
    """The engine of `train-step` is usable from a script: one call gives the result document and its
    TRN findings; an unusable input is one StepUnusable, not a traceback from deep inside."""
    from npudoctor import api
    from npudoctor.model import Status
    from npudoctor.workload import session

    request = session.StepRequest(session.TrainOptions(device="cpu", steps=4, batch=4, log=str(tmp_path / "mem.jsonl")))
    document, report = session.run(request, api.load_profile())
    assert document["train"]["steps"] == 4 and len((tmp_path / "mem.jsonl").read_text().splitlines()) == 4
    assert {f.id: f.status for f in report.findings}["TRN001"] is Status.PASS
    with pytest.raises(session.StepUnusable, match="--inject-leak"):
        session.run(request._replace(train=session.TrainOptions(device="cpu", inject_leak="lots")), api.load_profile())


def test_ctrl_c_in_train_step_reports_what_was_recorded_with_exit_130(tmp_path):
    """Like `prof run`: SIGINT stops training, the steps recorded are judged and printed, exit 130, never
    click's `Aborted!`. The signal is sent once the log holds steps (an event), not after a fixed time."""
    import signal
    import time

    log = tmp_path / "run.jsonl"
    env = {**os.environ, "NO_COLOR": "1"}
    # SIGINT back to its default in the child: a test run started in the background (CI) inherits it ignored,
    # and Python then never raises KeyboardInterrupt
    process = subprocess.Popen(
        [sys.executable, "-m", "npudoctor", "train-step", "--device", "cpu", "--model", "tiny", "--batch", "4",
         "--steps", "1000000", "--log", str(log)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600  # a hang guard only
        while time.monotonic() < deadline and process.poll() is None:
            if log.exists() and log.read_text().count("\n") >= 4:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=600)
    finally:
        if process.poll() is None:  # never leave a million-step run behind
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "Aborted!" not in stderr and "Traceback" not in stderr
    assert "npudoctor: interrupted after " in stderr and "of 1000000 steps" in stderr
    assert "TRN001" in stdout and "train-step" in stdout.splitlines()[0]
    # what was recorded stays on disk, every line a whole record
    lines = log.read_text().splitlines()
    assert len(lines) >= 4 and all(line.startswith("{") and line.endswith("}") for line in lines)


def test_the_progress_line_and_the_recorder_are_no_step_s_data_wait(cpu, tmp_path):
    """A slow progress callback (a terminal that blocks) ran inside the next step's data wait before."""
    import time as clock

    log = tmp_path / "mem.jsonl"
    result = train.run(train.TrainOptions(device="cpu", steps=4, batch=8, log=str(log)), cpu,
                       progress=lambda *_: clock.sleep(1.0))
    waits = [r["data_wait_s"] for r in memlog.read_records(log)]
    assert max(waits) < 1.0, waits  # each step's wait is its own batch's, not the second spent printing
    assert result.data_wait_fraction is not None and result.data_wait_fraction < 0.5
