"""The leak verdict's math on constructed series, and the memlog/1 reader and writer (no torch)."""

from __future__ import annotations

import json
import os
import random

import pytest

from npudoctor.workload import leak, memlog

MiB = 1 << 20
GiB = 1 << 30


def series(allocated=None, reserved=None, rss=None, steps=60, device="cuda:0", total=16 * GiB):
    """memlog/1 records whose memory columns come from the given functions of the step."""
    writer_run = "r1"
    return [
        memlog.make_record(
            step, writer_run, device=device,
            allocated_bytes=allocated(step) if allocated else None,
            reserved_bytes=reserved(step) if reserved else (allocated(step) + 64 * MiB if allocated else None),
            rss_bytes=rss(step) if rss else 2 * GiB,
            device_total_bytes=total if device != "cpu" else None, host_total_bytes=64 * GiB,
        )
        for step in range(steps)
    ]


def test_flat_series_is_no_leak():
    verdict = leak.analyze(series(allocated=lambda s: 500 * MiB))
    assert not verdict.leak and verdict.kind == "none"
    assert verdict.slope_bytes_per_step == 0 and verdict.projected_oom_step is None
    assert not verdict.reserved_growth and not verdict.rss_growth


def test_linear_growth_is_a_device_leak_with_projected_oom():
    verdict = leak.analyze(series(allocated=lambda s: 500 * MiB + s * MiB))
    assert verdict.leak and verdict.kind == "device" and verdict.series == "allocated_bytes"
    assert verdict.slope_bytes_per_step == pytest.approx(MiB)
    assert verdict.confidence > 0.999
    # reserved (allocated + 64 MiB) is the one that fills the 16 GiB first, at step 59
    expected = 59 + (16 * GiB - (500 * MiB + 59 * MiB + 64 * MiB)) // MiB
    assert verdict.projected_oom_step == pytest.approx(expected, abs=1)
    assert "device memory leak" in verdict.summary and "1.0 MiB/step" in verdict.summary


def test_step_change_is_reported_but_not_a_leak():
    verdict = leak.analyze(series(allocated=lambda s: 500 * MiB + (200 * MiB if s >= 35 else 0)))
    assert not verdict.leak
    assert verdict.step_change_bytes == pytest.approx(200 * MiB)
    assert "one-time rise" in verdict.summary


def test_noisy_flat_series_is_no_leak_and_noisy_leak_is_found():
    rng = random.Random(7)
    noise = [rng.gauss(0, 8 * MiB) for _ in range(200)]
    flat = leak.analyze(series(allocated=lambda s: 1 * GiB + noise[s], steps=200))
    assert not flat.leak
    rising = leak.analyze(series(allocated=lambda s: 1 * GiB + noise[s] + s * MiB, steps=200))
    assert rising.leak and rising.slope_bytes_per_step == pytest.approx(MiB, rel=0.15)


def test_many_noisy_flat_series_give_no_false_positive():
    rng = random.Random(11)
    false_positives = 0
    for _ in range(40):
        noise = [rng.gauss(0, 4 * MiB) for _ in range(80)]
        false_positives += leak.analyze(series(allocated=lambda s, n=noise: GiB + n[s], steps=80)).leak
    assert false_positives <= 1


def test_warm_up_ramp_then_flat_is_no_leak():
    verdict = leak.analyze(series(allocated=lambda s: 100 * MiB + min(s, 10) * 50 * MiB, steps=80))
    assert not verdict.leak and verdict.warmup_steps == 16


def test_reserved_only_growth_is_fragmentation_not_a_leak():
    verdict = leak.analyze(series(allocated=lambda s: 2 * GiB, reserved=lambda s: 3 * GiB + (s // 3) * 2 * MiB,
                                  device="npu:0"))
    assert not verdict.leak and verdict.reserved_growth
    assert verdict.reserved_slope_bytes_per_step == pytest.approx(2 * MiB / 3, rel=0.1)
    assert any(leak.EXPANDABLE_NPU in line and "torch.npu.empty_cache()" in line for line in verdict.advice)
    cuda = leak.analyze(series(allocated=lambda s: 2 * GiB, reserved=lambda s: 3 * GiB + s * MiB))
    assert any(leak.EXPANDABLE_CUDA in line for line in cuda.advice)


def test_host_rss_growth_on_cpu_is_a_host_leak():
    verdict = leak.analyze(series(rss=lambda s: GiB + s * 2 * MiB, device="cpu"))
    assert verdict.leak and verdict.kind == "host" and verdict.rss_growth
    assert verdict.series == "rss_bytes" and verdict.projected_oom_step is not None
    clean = leak.analyze(series(rss=lambda s: GiB + (s % 3) * 100_000, device="cpu"))
    assert not clean.leak and clean.series == "rss_bytes"


def test_too_few_steps_is_insufficient_data():
    verdict = leak.analyze(series(allocated=lambda s: s * MiB, steps=6))
    assert not verdict.leak and verdict.kind == "insufficient-data"
    assert json.loads(json.dumps(verdict.to_dict()))["kind"] == "insufficient-data"


def test_long_logs_are_thinned_and_stay_fast():
    import time

    start = time.perf_counter()
    verdict = leak.analyze(series(allocated=lambda s: GiB + s * 4096 * 4, steps=100_000))
    assert verdict.leak and time.perf_counter() - start < 5


def test_last_run_of_an_appended_log_is_judged():
    leaking = series(allocated=lambda s: GiB + s * MiB)
    clean = [dict(r, run="r2") for r in series(allocated=lambda s: GiB)]
    assert not leak.analyze(leaking + clean).leak
    assert leak.analyze(clean + [dict(r, run="r3") for r in leaking]).leak


def test_json_keys_of_the_contract():
    data = leak.analyze(series(allocated=lambda s: GiB + s * MiB)).to_dict()
    assert {"leak", "slope_bytes_per_step", "confidence", "projected_oom_step", "reserved_growth"} <= set(data)
    assert data["schema"] == "npudoctor.leak/1"


# --- memlog/1 -------------------------------------------------------------------------------------------

def test_writer_appends_and_reader_skips_torn_and_foreign_lines(tmp_path):
    path = tmp_path / "mem.jsonl"
    with memlog.MemlogWriter(path, run="a") as writer:
        writer.write(0, loss=1.5, allocated_bytes=10, device="cpu")
        writer.write(1, loss=float("inf"), allocated_bytes=20, device="cpu")
    with memlog.MemlogWriter(path, run="b") as writer:  # a second run appends, never truncates
        writer.write(0, allocated_bytes=30)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"schema": "other/1", "step": 1}\n\x00\xff binary\n{"schema":"npudoctor.memlog/1","st')
    records = memlog.read_records(path)
    assert [(r["run"], r["step"], r["allocated_bytes"]) for r in records] == [("a", 0, 10), ("a", 1, 20),
                                                                           ("b", 0, 30)]
    assert records[1]["loss"] is None and set(records[0]) == set(memlog.FIELDS)
    assert [r["run"] for r in memlog.last_run(records)] == ["b"]


def test_every_line_is_flushed_as_it_is_written(tmp_path):
    path = tmp_path / "mem.jsonl"
    writer = memlog.MemlogWriter(path)
    writer.write(0, rss_bytes=5)
    assert len(memlog.read_records(path)) == 1  # readable before close
    writer.close()


def test_tail_follows_a_growing_file_and_waits_for_complete_lines(tmp_path):
    path = tmp_path / "mem.jsonl"
    tail = memlog.MemlogTail(path)
    assert tail.poll() == []  # not there yet
    line = json.dumps(memlog.make_record(0, "r", rss_bytes=1)) + "\n"
    path.write_text(line + line[:20])
    assert [r["step"] for r in tail.poll()] == [0]
    with open(path, "a") as handle:
        handle.write(line[20:])
    assert [r["step"] for r in tail.poll()] == [0]  # the torn line, now complete
    assert tail.poll() == []


def test_unreadable_inputs_raise_memlog_error(tmp_path):
    with pytest.raises(memlog.MemlogError, match="cannot open"):
        memlog.read_records(tmp_path / "missing.jsonl")
    with pytest.raises(memlog.MemlogError, match="not a regular file"):
        memlog.read_records(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(memlog.MemlogError, match="not a regular file"):
        memlog.read_records(fifo)
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\x00" * 10 + b"x" * 200_000 + b"\n")
    with pytest.raises(memlog.MemlogError, match=r"no npudoctor\.memlog/1 records"):
        memlog.read_records(junk)


def test_make_record_refuses_unknown_keys():
    with pytest.raises(TypeError, match="allocated"):
        memlog.make_record(0, "r", allocated=1)


def test_follow_yields_appended_records_and_stops_when_idle(tmp_path):
    path = tmp_path / "mem.jsonl"
    with memlog.MemlogWriter(path, run="f") as writer:
        for step in range(3):
            writer.write(step, rss_bytes=step)
    assert [r["step"] for r in memlog.follow(path, interval_s=0.01, stop_after_idle_s=0.02)] == [0, 1, 2]


def test_writer_appends_only_to_memlog_logs(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("my notes\n")
    with pytest.raises(memlog.MemlogError, match=r"is not a npudoctor\.memlog/1 log"):
        memlog.MemlogWriter(other)
    assert other.read_text() == "my notes\n"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(memlog.MemlogError, match="not a regular file"):
        memlog.MemlogWriter(fifo)
