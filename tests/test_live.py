"""The dashboard's UI-free live layer: device snapshots, replay, polling, history, following files, log tail."""

from __future__ import annotations

import json
import os
import threading

import pytest

from npudoctor import api
from npudoctor.live.devices import (
    NodeSampler,
    ReplaySampler,
    Timeline,
    readings_from_nvidia_smi,
    snapshot_from_npu_smi,
)
from npudoctor.live.follow import Follower
from npudoctor.live.history import History, sparkline
from npudoctor.live.poller import Poller
from npudoctor.live.recording import RecordingError, demo_timeline, timeline_from_bundle
from npudoctor.parsers.nvidia_smi import NvidiaSmiParseError, parse_csv, parse_query_gpu
from npudoctor.probes.sources import CommandResult
from tests.samples import sample_text

EIGHT_CARDS = "npu-smi-info_8card_23.0.rc3_with-processes_mindcluster-doc.txt"
IDLE_910B3 = "npu-smi-info_910B3_8card_24.1.0.3_no-processes_vllm-ascend-4256.txt"
A3 = "npu-smi-info_A3_Ascend910_8npu-16die_25.2.1_collect_env_vllm-ascend-5850.txt"


def _answer(text: str, rc: int = 0, error=None, duration_s: float = 0.0) -> CommandResult:
    return CommandResult(("npu-smi", "info"), rc, text, "", duration_s, error)


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# -- snapshots ---------------------------------------------------------------------------------------------
def test_npu_smi_snapshot_has_one_row_per_chip_with_its_holders():
    snap = snapshot_from_npu_smi(_answer(sample_text(EIGHT_CARDS)), taken_at=5.0)
    assert snap.kind == "npu" and snap.error is None and len(snap.devices) == 8
    first = snap.devices[0]
    assert (first.label, first.health, first.mem_used_mib, first.mem_total_mib, first.power_w, first.temp_c) == \
        ("NPU 0", "OK", 30710, 32768, 73.4, 44)
    assert [(h.pid, h.name, h.memory_mib) for h in first.holders] == [(139667, "python", 30780)]
    assert all(len(d.holders) == 1 for d in snap.devices)


def test_a3_dies_are_separate_rows_labelled_npu_and_die():
    snap = snapshot_from_npu_smi(_answer(sample_text(A3)), taken_at=5.0)
    assert len(snap.devices) == 16
    assert snap.devices[0].label == "NPU 0/0" and snap.devices[1].label == "NPU 0/1"
    assert len({d.key for d in snap.devices}) == 16


@pytest.mark.parametrize("answer, expected", [
    (_answer("", error="timeout"), "npu-smi info: timeout"),
    (_answer(sample_text("npu-smi_fail_dcmi-8020_device-used_cann-container-image-46.txt"), rc=255), "-8020"),
])
def test_a_failed_npu_smi_gives_no_rows_and_says_why(answer, expected):
    snap = snapshot_from_npu_smi(answer, taken_at=1.0)
    assert snap.devices == () and expected in (snap.error or "")


def test_nvidia_smi_rows_by_header_with_holders_and_missing_power():
    from tests.samples import sample_text as text

    devices = readings_from_nvidia_smi(text("nvidia-smi_query-gpu_dashboard-fields_2gpu.txt"),
                                       text("nvidia-smi_query-compute-apps_dashboard-fields.txt"))
    assert [(d.label, d.util_pct, d.mem_used_mib, d.mem_total_mib, d.power_w) for d in devices] == \
        [("GPU 0", 97.0, 61234, 81559, 612.35), ("GPU 1", 0.0, 4, 81559, None)]
    assert [(h.pid, h.name, h.memory_mib) for h in devices[0].holders] == [(48213, "python3", 61220)]
    assert devices[0].health is None  # nvidia-smi has no Health word: shown as n/a, never as OK


def test_real_nvidia_smi_captures_parse_by_header_name():
    rtx = parse_query_gpu(sample_text("nvidia-smi_query-gpu_csv_RTX4090_review-note.txt"))
    assert rtx == [{"utilization.gpu": 0.0, "memory.used": 678.0, "memory.total": 49140.0,
                    "name": "NVIDIA GeForce RTX 4090"}]
    gpu_part, apps_part = sample_text("nvidia-smi_query-gpu_and_compute-apps_csv_codescout-bug-note.txt").split("---\n")
    assert parse_query_gpu(gpu_part)[0]["utilization.gpu"] == 95.0
    assert [row["pid"] for row in parse_csv(apps_part)] == [1580.0, 1597.0]
    with pytest.raises(NvidiaSmiParseError):
        parse_csv("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_node_sampler_picks_npu_smi_then_nvidia_smi_then_the_host(node):
    clock = Clock()
    host_only = NodeSampler(node.runner(), clock=clock, host=None).sample()
    assert host_only.kind == "host" and "neither npu-smi nor nvidia-smi" in host_only.note
    node.command("nvidia-smi", stdout=sample_text("nvidia-smi_query-gpu_dashboard-fields_2gpu.txt"))
    cuda = NodeSampler(node.runner(), clock=clock, host=None).sample()
    assert cuda.kind == "cuda" and [d.key for d in cuda.devices] == ["gpu:0", "gpu:1"]
    node.command("npu-smi", stdout=sample_text(IDLE_910B3))
    npu = NodeSampler(node.runner(), clock=clock, host=None).sample()
    assert npu.kind == "npu" and len(npu.devices) == 8 and npu.source.startswith("npu-smi 24.1.0.3")


# -- replay ----------------------------------------------------------------------------------------------------
def test_replay_follows_the_recording_clock_and_speed():
    ok, warn = sample_text(IDLE_910B3), sample_text(IDLE_910B3).replace("| OK ", "| Warning ", 1)
    timeline = Timeline([(0.0, _answer(ok)), (10.0, _answer(warn))], name="t")
    clock = Clock(0.0)
    sampler = ReplaySampler(timeline, speed=1.0, clock=clock)
    assert sampler.sample().devices[0].health == "OK"
    clock.t = 10.5
    assert sampler.sample().devices[0].health == "Warning"
    sampler.set_speed(4.0)  # from here on four recorded seconds per second, without a jump
    assert sampler.sample().devices[0].health == "Warning"
    clock.t = 13.0  # offset 10.5 + 2.5 * 4 = 20.5: the recording has looped (period 20 s) to its start
    assert sampler.sample().devices[0].health == "OK"
    assert "x4" in sampler.sample().source


def test_the_shipped_demo_is_a_busy_8_chip_node_with_one_chip_turning_warning():
    timeline = demo_timeline()
    assert len(timeline.samples) >= 30
    healths = []
    for _t, answer in timeline.samples:
        snap = snapshot_from_npu_smi(answer, 0.0)
        assert len(snap.devices) == 8 and snap.error is None
        healths.append(snap.devices[5].health)
    assert healths[0] == "OK" and healths[-1] == "Warning"
    from npudoctor.live.recording import DEMO_BUNDLE
    from npudoctor.probes.bundle import ReplayRunner

    assert "ASSEMBLED from real npu-smi captures" in ReplayRunner(str(DEMO_BUNDLE)).manifest["note"]
    busy = snapshot_from_npu_smi(timeline.samples[20][1], 0.0)
    assert all(d.util_pct and d.util_pct > 50 and d.holders for d in busy.devices)


def test_the_shipped_demo_is_what_the_generator_makes_from_the_real_captures():
    from npudoctor.live.demo import assemble
    from tests.samples import sample_path

    made = assemble(sample_path(IDLE_910B3).read_text(encoding="utf-8"),
                    sample_path(EIGHT_CARDS).read_text(encoding="utf-8"))
    assert [(t, text) for t, text in made] == [(t, a.stdout) for t, a in demo_timeline().samples]


def test_collect_samples_records_npu_smi_over_time_and_replays(node, tmp_path):
    node.npu_node(8)
    node.command("npu-smi", stdout=sample_text(IDLE_910B3))
    bundle = tmp_path / "node.tar.gz"
    api.collect(str(bundle), root=str(node.root), environ=node.env, samples=3, interval_s=0.05)
    timeline = timeline_from_bundle(str(bundle))
    assert len(timeline.samples) == 3 and timeline.name == "node"
    offsets = [t for t, _ in timeline.samples]
    assert offsets == sorted(offsets) and offsets[-1] >= 0.09
    # The check's own record is untouched: `check --from` still reads the bundle as before.
    replayed = api.run_checks(api.make_runner(bundle=str(bundle)), only=("SMI001",))
    assert replayed.findings[0].status.value == "pass"


def test_a_bundle_without_npu_smi_cannot_be_replayed(node, tmp_path):
    bundle = tmp_path / "empty.tar.gz"
    api.collect(str(bundle), root=str(node.root), environ=node.env)
    with pytest.raises(RecordingError, match="no `npu-smi info` answer"):
        timeline_from_bundle(str(bundle))
    with pytest.raises(RecordingError, match="no such file"):
        timeline_from_bundle(str(tmp_path / "missing.tar.gz"))


# -- polling -------------------------------------------------------------------------------------------------
class BlockingSampler:
    """Answers once, then hangs like a stuck npu-smi until released."""

    description = "blocking"

    def __init__(self, snapshot):
        self.snapshot = snapshot
        self.calls = 0
        self.release = threading.Event()

    def sample(self):
        self.calls += 1
        if self.calls > 1:
            self.release.wait(10)
        return self.snapshot


def test_a_hung_poll_never_blocks_the_reader_and_marks_the_data_stale():
    clock = Clock(0.0)
    snap = snapshot_from_npu_smi(_answer(sample_text(IDLE_910B3)), 0.0)
    sampler = BlockingSampler(snap)
    poller = Poller(sampler, interval_s=1.0, clock=clock)
    poller.poll_once()
    assert poller.state().stale is False and poller.state().age_s == 0.0
    worker = threading.Thread(target=poller.poll_once, daemon=True)
    worker.start()
    clock.t = 12.0
    state = poller.state()  # returns at once although the poll hangs
    assert state.stale and state.age_s == 12.0 and state.in_flight_s == 12.0 and state.snapshot is snap
    sampler.release.set()
    worker.join(5)
    assert poller.state().stale is False


def test_a_crashing_sampler_is_reported_not_fatal():
    class Broken:
        description = "broken"

        def sample(self):
            raise RuntimeError("bug")

    poller = Poller(Broken(), clock=Clock())
    poller.poll_once()
    assert poller.state().failure == "RuntimeError: bug" and poller.state().snapshot is None


def test_poller_thread_polls_in_the_background():
    snap = snapshot_from_npu_smi(_answer(sample_text(IDLE_910B3)), 0.0)
    poller = Poller(BlockingSampler(snap), interval_s=0.05)
    poller.start()
    try:
        for _ in range(200):
            if poller.state().polls:
                break
            threading.Event().wait(0.01)
        assert poller.state().snapshot is snap
    finally:
        poller.sampler.release.set()
        poller.stop()


# -- history ------------------------------------------------------------------------------------------------
def test_history_keeps_each_snapshot_once_per_chip():
    history = History(size=3)
    for t in range(5):
        snap = snapshot_from_npu_smi(_answer(sample_text(EIGHT_CARDS)), float(t))
        assert history.add(snap)
        assert not history.add(snap)  # the same snapshot on the next tick
    assert len(history.keys()) == 8 and len(history.util["npu:0/chip:0"]) == 3
    assert round(History.last(history.mem["npu:0/chip:0"]), 1) == 93.7


def test_sparkline_scales_and_pads():
    assert sparkline([0, 100], 2) == "▁█"
    assert sparkline([], 3) == "   "
    assert sparkline([5, 10], 2, low=0, high=10) == "▅█"


# -- following a growing file -----------------------------------------------------------------------------
def test_follower_reads_complete_lines_and_survives_truncation_and_rotation(tmp_path):
    path = tmp_path / "log.jsonl"
    follower = Follower(str(path))
    assert follower.poll() == [] and follower.error == "not-found"
    path.write_bytes(b"one\ntw")
    assert follower.poll() == [b"one"]
    with open(path, "ab") as handle:
        handle.write(b"o\nthree\n")
    assert follower.poll() == [b"two", b"three"]
    path.write_bytes(b"x\n")  # truncated (shorter than what was read)
    assert follower.poll() == [b"x"] and follower.events[-1] == "truncated"
    os.rename(path, tmp_path / "log.jsonl.1")
    path.write_bytes(b"new file\n")  # rotated: a new inode under the same name
    assert follower.poll() == [b"new file"] and follower.events[-1] == "rotated"


def test_follower_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    follower = Follower(str(fifo))
    assert follower.poll() == [] and follower.error == "not a regular file"


# -- training log ---------------------------------------------------------------------------------------
def _memlog(step: int, allocated: int, run: str = "r1") -> str:
    return json.dumps({"schema": "npudoctor.memlog/1", "run": run, "step": step, "step_s": 0.2, "data_wait_s": 0.05,
                       "loss": 2.0 - step / 1000, "device": "npu:0", "allocated_bytes": allocated,
                       "reserved_bytes": allocated + (64 << 20), "device_total_bytes": 64 << 30}) + "\n"


def test_training_follow_finds_a_leak_as_the_log_grows_and_starts_over_on_truncation(tmp_path):
    from npudoctor.live.training import TrainingFollow

    path = tmp_path / "mem.jsonl"
    clock = Clock(0.0)
    follow = TrainingFollow(str(path), clock=clock, verdict_every_s=0.0)
    assert follow.poll().status.startswith("waiting")
    path.write_text("".join(_memlog(s, 1 << 30) for s in range(40)))
    view = follow.poll()
    assert view.last["step"] == 39 and view.verdict is not None and not view.verdict.leak
    assert view.data_wait_share == pytest.approx(0.25)
    with open(path, "a") as handle:
        handle.write("".join(_memlog(s, (1 << 30) + (s - 39) * (8 << 20)) for s in range(40, 120)))
    view = follow.poll()
    assert view.verdict.leak and view.verdict.projected_oom_step is not None
    path.write_text(_memlog(0, 1 << 30, run="r2"))  # a new job truncated the file
    view = follow.poll()
    assert view.last["step"] == 0 and view.status.startswith("new run") and len(view.allocated) == 1


# -- log tail --------------------------------------------------------------------------------------------------
def test_log_tail_reports_only_what_the_job_adds(tmp_path):
    from npudoctor.live.logtail import LogTail

    plog = tmp_path / "plog" / "plog-1234_20250101000000000.log"
    plog.parent.mkdir()
    old_error = sample_text("hccl_EI0006_socket-establish-timeout_LINK_ERROR_INFO_hccl-doc.txt")
    plog.write_text(old_error)
    tail = LogTail(str(tmp_path), clock=Clock(50.0))
    tail.start()
    assert tail.poll() == []  # what was there at the start is not news
    with open(plog, "a") as handle:
        handle.write(old_error)
    found = tail.poll()
    assert found and all(f.first_seen == 50.0 for f in found)
    assert any(f.severity == "error" for f in found)
    assert tail.verdict.startswith("Root cause: ")  # the dashboard shows logs scan's diagnosis (issue 27)


def test_closing_the_sampler_kills_a_hung_npu_smi(node):
    """Quitting the dashboard while npu-smi hangs leaves no npu-smi behind."""
    import time

    node.command("npu-smi", stdout=sample_text(IDLE_910B3), sleep_s=30)
    sampler = NodeSampler(node.runner(), timeout_s=60, host=None)
    poller = Poller(sampler, interval_s=1.0)
    poller.start()
    for _ in range(100):
        if poller.state().in_flight_s is not None and sampler.runner._children:
            break
        time.sleep(0.02)
    started = time.monotonic()
    poller.stop()
    sampler.close()
    for _ in range(250):
        if poller.state().polls:
            break
        time.sleep(0.02)
    assert poller.state().polls == 1 and time.monotonic() - started < 5
