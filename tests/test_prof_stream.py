"""trace_view.json and communication.json are streamed: odd shapes, deep nesting and huge files cost little.

Issue 19 points 3, 7 and 8 for the profiling doctor's JSON inputs (the hostile files are built here).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from npudoctor.prof.engine import analyze
from npudoctor.prof.jsonstream import JsonStreamError, iter_array, iter_members
from tests import profdirs
from tests.bounded import run_npudoctor
from tests.samples import sample_data


def rank_with(tmp_path: Path, name: str, body: bytes) -> Path:
    pt = profdirs.torch_npu_rank(tmp_path, rank=0)
    (pt / "ASCEND_PROFILER_OUTPUT" / name).write_bytes(body)
    return pt


_BASELINE: list = []


def _grown_mib(outcome, tmp_path: Path) -> float:
    """Peak memory above what the same command takes on a tiny file (the interpreter, pandas and pyarrow alone
    take 170-210 MiB depending on the venv): what the input itself made it hold."""
    if not _BASELINE:
        small = rank_with(tmp_path / "baseline", "communication.json", b'{"step1": {"collective": {}}}')
        _BASELINE.append(run_npudoctor(["prof", "analyze", str(small), "--format", "json"], kill_after_s=60).peak_mib)
    return float(outcome.peak_mib - _BASELINE[0])


@pytest.mark.parametrize("body", [b"[1]", b"[]", b"{}", b"1", b"[null, \"x\", [], {\"ph\": \"X\"}]",
                                  b'[{"ph": "X", "name": 5, "args": {"Task Type": 1}, "dur": "1e999"}]',
                                  b'[{"ph": "C", "name": "AI Core Freq", "ts": [], "args": {"MHz": "x"}}]'])
def test_odd_trace_view_shapes_are_no_traceback(tmp_path: Path, body: bytes) -> None:
    outcome = run_npudoctor(["prof", "analyze", str(rank_with(tmp_path, "trace_view.json", body)),
                             "--format", "json"])
    assert outcome.rc in (0, 1), outcome.stderr[-2000:]
    assert "Traceback" not in outcome.stderr
    json.loads(outcome.stdout)


@pytest.mark.parametrize("name, body", [
    ("trace_view.json", b"[" + b"[" * 10_000 + b"]" * 10_000 + b"]"),
    ("trace_view.json", b'[{"args": ' + b'{"a": ' * 10_000 + b"1" + b"}" * 10_001 + b"]"),
    ("communication.json", b'{"step1": ' + b'{"a": ' * 10_000 + b"1" + b"}" * 10_001),
    ("communication.json", b'{"step1": {"x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}}"),
])
def test_deep_nesting_is_one_problem_line(tmp_path: Path, name: str, body: bytes) -> None:
    result = analyze([str(rank_with(tmp_path, name, body))])
    (line,) = [p for p in result.problems if name in p]
    assert "nested too deep" in line and "\n" not in line
    assert any(f.id == "PROF001" for f in result.findings)  # the rest of the rank is still judged


def test_a_big_trace_view_is_streamed_in_bounded_memory(tmp_path: Path) -> None:
    """~48 MiB of real trace events (the issue's 250 MB one took 4.4 GB decoded whole)."""
    events = json.loads(sample_data("prof_trace_view_excerpt.json"))
    block = b",".join(json.dumps(e).encode() for e in events)
    repeats = (48 << 20) // len(block) + 1
    pt = profdirs.torch_npu_rank(tmp_path, rank=0)
    with open(pt / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", "wb") as handle:
        handle.write(b"[")
        for number in range(repeats):
            handle.write((b"," if number else b"") + block)
        handle.write(b"]")
    outcome = run_npudoctor(["prof", "analyze", str(pt), "--format", "json"], kill_after_s=60)
    assert outcome.rc in (0, 1), outcome.stderr[-2000:]
    assert _grown_mib(outcome, tmp_path) < 64, outcome.peak_mib


def test_a_communication_json_of_empty_objects_is_capped_in_bounded_memory(tmp_path: Path) -> None:
    """`{}` by the million: the walk stops at its key cap (said), memory stays small."""
    body = b'{"step1": {"collective": {' + b",".join(b'"k%d": {}' % i for i in range(1_200_000)) + b"}}}"
    outcome = run_npudoctor(["prof", "analyze", str(rank_with(tmp_path, "communication.json", body)),
                             "--format", "json"], kill_after_s=60)
    assert outcome.rc in (0, 1), outcome.stderr[-2000:]
    assert _grown_mib(outcome, tmp_path) < 64, outcome.peak_mib
    problems = json.loads(outcome.stdout)["problems"]
    assert any("keys: the rest not read" in p for p in problems), problems
    array = b'{"step1": {"x": [' + b",".join([b"{}"] * 2_000_000) + b"]}}"
    with pytest.raises(JsonStreamError, match="larger than"):
        list(iter_members(io.BytesIO(array), ("Communication Bandwidth Info",)))


def test_streamed_communication_gives_the_links_the_whole_file_gives(tmp_path: Path) -> None:
    data = json.loads(sample_data("prof_communication_json_torch_npu.json"))
    streamed = list(iter_members(io.BytesIO(json.dumps(data).encode()), ("Communication Bandwidth Info",),
                                 max_item=256))  # small items: the walk descends instead of decoding in one
    whole = list(iter_members(io.BytesIO(json.dumps(data).encode()), ("Communication Bandwidth Info",)))
    assert sorted(map(repr, streamed)) == sorted(map(repr, whole))
    expected = {(step, kind, op) for step, kinds in data.items() for kind, ops in kinds.items() for op in ops}
    assert {trail for trail, _ in whole} == expected


def test_trace_events_split_anywhere_read_the_same() -> None:
    events = json.loads(sample_data("prof_trace_view_excerpt.json"))
    text = json.dumps(events).encode()

    class Trickle(io.BytesIO):
        def read(self, size: int = -1) -> bytes:  # a few bytes at a time: every boundary is met
            return super().read(7)

    assert list(iter_array(Trickle(text))) == events
    assert list(iter_array(io.BytesIO(json.dumps({"traceEvents": events, "x": 1}).encode()))) == events


def test_seeded_mutations_of_trace_and_communication_json_raise_only_the_stream_error() -> None:
    import random

    rng = random.Random(19)
    trace = json.dumps(json.loads(sample_data("prof_trace_view_excerpt.json"))).encode()
    communication = json.dumps(json.loads(sample_data("prof_communication_json_torch_npu.json"))).encode()
    for trial in range(600):
        base = trace if trial % 2 else communication
        data = bytearray(base)
        for _ in range(rng.choice((1, 3, 12))):
            position = rng.randrange(len(data))
            data[position:position + 1] = bytes([rng.choice(b'{}[],:"\\0123 x\xff')]) * rng.choice((1, 2, 300))
        try:
            if trial % 2:
                list(iter_array(io.BytesIO(bytes(data))))
            else:
                list(iter_members(io.BytesIO(bytes(data)), ("Communication Bandwidth Info",)))
        except JsonStreamError as exc:
            assert "\n" not in str(exc)


def test_deep_profiler_metadata_is_one_problem_line(tmp_path: Path) -> None:
    pt = profdirs.torch_npu_rank(tmp_path, rank=0)
    (pt / "profiler_metadata.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    result = analyze([str(tmp_path)])
    (line,) = [p for p in result.problems if "profiler_metadata.json" in p]
    assert "not readable JSON" in line and "\n" not in line
    assert [f.status.value for f in result.findings if f.id == "PROF019"] == ["skip"]
