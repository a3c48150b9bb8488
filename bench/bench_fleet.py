#!/usr/bin/env python3
"""`npudoctor fleet DIR` on 1k, 10k and 50k node reports, against plain `json.load` of the same files.

The reports are the demo fleet's (the shipped scenarios with varied inventories and host names), written as
`npudoctor check --format json` writes them (about 29 KiB each). Both sides run as fresh processes on the
same folder, interleaved; wall time and peak RSS (the child's ru_maxrss) are printed, with the ratio to the
reference and the growth factor between sizes (10.0 and 5.0 would be exactly linear).

The reference only parses each file and drops it; `fleet` also reduces, aggregates and renders, so its ratio
says what the view costs on top of reading the data at all.

    python bench/bench_fleet.py [--sizes 1000,10000,50000] [--runs 1] [--format text|json|csv] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List, Sequence, Tuple

REFERENCE = (
    "import json, os, sys\n"
    "folder = sys.argv[1]\n"
    "for name in sorted(os.listdir(folder)):\n"
    "    with open(os.path.join(folder, name), 'rb') as handle:\n"
    "        json.load(handle)\n"
)


def measure(argv: Sequence[str]) -> Tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one fresh process."""
    started = time.perf_counter()
    child = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
    if child.returncode not in (0, 1):
        err = child.stderr.read().decode(errors="replace") if child.stderr else ""
        raise SystemExit(f"{argv[:4]} failed with exit code {child.returncode}: {err.strip()[:300]}")
    return elapsed, usage.ru_maxrss / 1024


def write_fleet(folder: str, count: int) -> None:
    from npudoctor.fleet.demo import fleet_documents, scenario_reports

    reports = scenario_reports()
    for document, source in fleet_documents(count, reports):
        name = source.split(":", 1)[1]
        with open(os.path.join(folder, f"{name}.json"), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--format", default="text", choices=("text", "json", "csv"),
                        help="fleet's output (json and csv list every node, so their output grows with the fleet)")
    parser.add_argument("--keep", help="write the reports here and keep them (default: a temporary folder)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    base = args.keep or tempfile.mkdtemp(prefix="bench-fleet-")
    rows: List[Tuple[int, float, float, float, float]] = []
    try:
        for size in sizes:
            folder = os.path.join(base, str(size))
            if not os.path.isdir(folder):
                os.makedirs(folder)
                started = time.perf_counter()
                write_fleet(folder, size)
                print(f"wrote {size} reports in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            ours_argv = [sys.executable, "-m", "npudoctor", "fleet", folder, "--format", args.format]
            reference_argv = [sys.executable, "-c", REFERENCE, folder]
            measure(reference_argv)  # page cache warm for both
            ours, theirs = [], []
            for _ in range(args.runs):
                theirs.append(measure(reference_argv))
                ours.append(measure(ours_argv))
            rows.append((size, statistics.median(t for t, _ in ours), max(r for _, r in ours),
                         statistics.median(t for t, _ in theirs), max(r for _, r in theirs)))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"{'reports':>8} {'fleet s':>9} {'RSS MiB':>8} {'json.load s':>12} {'RSS MiB':>8} {'ratio':>6} {'growth':>7}")
    previous = None
    for size, ours_s, ours_rss, ref_s, ref_rss in rows:
        growth = f"{ours_s / previous[1]:.2f}x/{size / previous[0]:.0f}" if previous else "-"
        print(f"{size:>8} {ours_s:>9.2f} {ours_rss:>8.0f} {ref_s:>12.2f} {ref_rss:>8.0f} {ours_s / ref_s:>6.2f} "
              f"{growth:>7}")
        previous = (size, ours_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
