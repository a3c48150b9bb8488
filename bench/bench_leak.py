#!/usr/bin/env python3
"""`npudoctor leak analyze` on big memlogs: peak RSS and wall time against the same command on a tiny log.

The logs are written here from `memlog.make_record` (every /2 field, ~640 bytes a line, a 64 KiB/step device
leak over jitter): 1 MiB (the baseline: the interpreter and the command alone), then the sizes asked for. The
verdict reads the last `TAIL_BYTES` (64 MiB) of a log, so every size above it reads the same amount; what the
bench shows is how much memory that tail costs beyond the baseline. Each size runs `--runs` times as a fresh
process; the median is printed. Peak RSS is the child's own VmHWM (tests/bounded.py says why not ru_maxrss).

    python bench/bench_leak.py [--sizes 64,256] [--runs 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
from typing import List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from npudoctor.workload import memlog
from tests.bounded import run_npudoctor


def write_log(path: str, mib: int, seed: int = 7) -> int:
    """A memlog of about ``mib`` MiB: one run, a 64 KiB/step device leak, malloc and RSS jitter."""
    rng = random.Random(seed)
    target = mib << 20
    written = steps = 0
    with open(path, "w") as handle:
        while written < target:
            record = memlog.make_record(
                steps, "bench-run", device="npu:0", loss=2.5 - steps * 1e-6, step_s=0.25, data_wait_s=0.01,
                allocated_bytes=(2 << 30) + steps * 65536 + rng.randrange(0, 4096),
                allocated_peak_bytes=(3 << 30), reserved_bytes=(4 << 30) + (steps // 1000) * (2 << 20),
                reserved_peak_bytes=(4 << 30), active_bytes=2 << 30, active_peak_bytes=3 << 30,
                alloc_retries=0, ooms=0, rss_bytes=(6 << 30) + rng.randrange(-3 << 20, 3 << 20),
                device_total_bytes=64 << 30, host_total_bytes=512 << 30, inactive_split_bytes=1 << 20,
                workers_rss_bytes=(1 << 30) + rng.randrange(0, 1 << 20), workers=4,
                malloc_in_use_bytes=(1 << 30) + rng.randrange(0, 1 << 20), malloc_held_bytes=(2 << 30),
                cpu_fallbacks=[])
            line = json.dumps(record) + "\n"
            handle.write(line)
            written += len(line)
            steps += 1
    return steps


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256", help="log sizes in MiB, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", help="write the logs here and keep them")
    args = parser.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="bench-leak-")
    os.makedirs(folder, exist_ok=True)
    try:
        rows = []
        for mib in [1] + [int(s) for s in args.sizes.split(",")]:
            path = os.path.join(folder, f"memlog-{mib}mib.jsonl")
            steps = write_log(path, mib) if not os.path.exists(path) else None
            peaks, times, verdicts = [], [], set()
            for _ in range(args.runs):
                result = run_npudoctor(["leak", "analyze", path, "--format", "json"], kill_after_s=600)
                if result.rc not in (0, 1):
                    print(result.stderr[-2000:], file=sys.stderr)
                    return 2
                verdicts.add(json.loads(result.stdout)["summary"])
                peaks.append(result.peak_mib)
                times.append(result.seconds)
            rows.append((mib, steps, statistics.median(peaks), statistics.median(times), len(verdicts)))
        base = rows[0][2]
        print(f"{'log':>8} {'steps':>8} {'peak RSS':>10} {'above 1 MiB log':>16} {'wall':>7}")
        for mib, steps, peak, seconds, distinct in rows:
            print(f"{mib:>5} MiB {steps if steps is not None else '?':>8} {peak:>6.0f} MiB {peak - base:>12.0f} MiB "
                  f"{seconds:>6.2f}s" + ("" if distinct == 1 else "  (verdicts differ between runs!)"))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
