"""`leak analyze` holds only the fields the verdict reads, as columns (`memlog.read_columns`), and judges
exactly as it does over whole records: the same verdict on every corpus run, on appended and /1 logs, and
a big log costs little more memory than a tiny one (it held 165 MiB of dicts for a 64 MiB tail)."""

from __future__ import annotations

import json

import pytest

from npudoctor.workload import leak, memlog
from tests import leak_corpus as corpus
from tests.bounded import run_npudoctor


def columns_of(records):
    columns = memlog.RecordColumns(leak.VERDICT_FIELDS)
    for record in records:
        columns.append(record)
    return columns


@pytest.mark.parametrize("run", corpus.runs(), ids=lambda run: run["file"])
def test_the_verdict_over_columns_is_the_verdict_over_whole_records(run):
    records = corpus.records(run)
    for count in (40, 50, 200, 300):
        window = [r for r in records if r["step"] < count]
        assert leak.analyze(columns_of(window)).to_dict() == leak.analyze(window).to_dict(), count


def test_read_columns_reads_what_read_records_reads(tmp_path):
    log = tmp_path / "mem.jsonl"
    lines = [json.dumps(memlog.make_record(step, "old", device="npu:0", allocated_bytes=(1 << 30) + step * 65536,
                                           rss_bytes=2 << 30)) for step in range(30)]
    lines += [json.dumps({**memlog.make_record(step, "new", device="npu:0", allocated_bytes=1 << 30,
                                               reserved_bytes=2 << 30, rss_bytes=float(3 << 30)),
                          "schema": "npudoctor.memlog/1"}) for step in range(80)]
    lines.insert(40, '{"schema": "npudoctor.memlog/2", "step": "torn')
    # the edges of what the reader accepts read back as written: 2^63 - 1 bytes, a float where a count belongs
    lines.insert(41, json.dumps(memlog.make_record(30, "old", device="npu:0", allocated_bytes=(1 << 63) - 1)))
    lines[42] = lines[42].replace('"rss_bytes": 3221225472', '"rss_bytes": 3221225472.5')
    log.write_text("\n".join(lines) + "\n")
    records = memlog.read_records(log)
    columns = memlog.read_columns(log, leak.VERDICT_FIELDS)
    assert len(columns) == len(records) == 111
    as_read = [[(k, type(v), v) for k, v in dict(c).items()] for c in columns]
    assert as_read == [[(k, type(r[k]), r[k]) for k in leak.VERDICT_FIELDS] for r in records]
    assert (1 << 63) - 1 in [c["allocated_bytes"] for c in columns]
    assert 3221225472.5 in [c["rss_bytes"] for c in columns]
    assert len(memlog.last_run(columns)) == 80 and columns[-1]["schema"] == "npudoctor.memlog/1"
    assert leak.analyze(columns).to_dict() == leak.analyze(records).to_dict()
    assert columns[0].get("loss") is None and columns[0].get("reserved_bytes") is None
    with pytest.raises(KeyError):
        columns[0]["loss"]  # not kept: never a made-up value
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not a record\n")
    with pytest.raises(memlog.MemlogError, match=r"no npudoctor\.memlog"):
        memlog.read_columns(empty, leak.VERDICT_FIELDS)


def _write_log(path, mib):
    template = json.dumps(memlog.make_record(
        0, "run", device="npu:0", allocated_bytes=1, reserved_bytes=4 << 30, rss_bytes=6 << 30,
        device_total_bytes=64 << 30, host_total_bytes=512 << 30, workers_rss_bytes=1 << 30, workers=4,
        malloc_in_use_bytes=1 << 30, malloc_held_bytes=2 << 30, alloc_retries=0, ooms=0, loss=2.5, step_s=0.25))
    template = template.replace('"step": 0', '"step": {step}').replace('"allocated_bytes": 1', '"allocated_bytes": {a}')
    template = template.replace("{", "{{").replace("}", "}}").replace("{{step}}", "{step}").replace("{{a}}", "{a}")
    with open(path, "w") as handle:
        step = 0
        while step == 0 or handle.tell() < mib << 20:  # the tiny one: 1,000 records (~600 KiB)
            handle.write("".join(template.format(step=s, a=(2 << 30) + s * 65536) + "\n"
                                 for s in range(step, step + 1000)))
            step += 1000


def test_a_big_log_costs_little_more_memory_than_a_tiny_one(tmp_path):
    tiny, big = tmp_path / "tiny.jsonl", tmp_path / "big.jsonl"
    _write_log(tiny, 0)
    _write_log(big, 40)  # ~65,000 records (the old reader held ~100 MiB of dicts for them)
    baseline = run_npudoctor(["leak", "analyze", str(tiny), "--format", "json"], kill_after_s=120)
    outcome = run_npudoctor(["leak", "analyze", str(big), "--format", "json"], kill_after_s=300)
    assert outcome.rc == 1 and json.loads(outcome.stdout)["kind"] == "device", outcome.stderr[-2000:]
    assert baseline.rc == 1, baseline.stderr[-2000:]
    assert outcome.peak_mib - baseline.peak_mib < 32, (outcome.peak_mib, baseline.peak_mib)


ASKED: set = set()


class _Watched(dict):
    """A record that remembers which fields the verdict asked for."""

    def get(self, key, default=None):
        ASKED.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        ASKED.add(key)
        return super().__getitem__(key)


def test_the_verdict_reads_no_field_the_columns_leave_out():
    # a field the verdict starts to read must join VERDICT_FIELDS, or leak analyze would judge it as missing
    for run in corpus.runs()[::3]:
        for count in (50, 300):
            leak.analyze([_Watched(r) for r in corpus.records(run) if r["step"] < count])
    assert ASKED and set(leak.VERDICT_FIELDS) >= ASKED, ASKED - set(leak.VERDICT_FIELDS)
