#!/usr/bin/env python3
"""Benchmark `npudoctor logs scan` against `LC_ALL=C grep -E -c` on a big plog built from real sample lines.

    python bench/bench_logs_scan.py                 # 256 MiB, each run 5 times
    python bench/bench_logs_scan.py --size 1GiB --repeat 5 --interesting 0.05

The file is made of real record lines from the CANN log samples (../shared/samples/logs, or the copies in
tests/data/samples/logs): INFO/DEBUG/EVENT/TRACE records, with ERROR/WARNING records drawn at the rate
``--interesting`` (default 1 %: most bytes of a real plog are INFO lines). It lives in a temporary folder
and is deleted afterwards. grep gets the very literals the scanner searches in plog text (``[ERROR]``,
``[WARNING]`` and the any-level rule hints), at its fastest (``LC_ALL=C``); both read the file from the page
cache. The scan runs as a child process so that its peak RSS (``os.wait4``) is its own. grep and the
scans (the compiled plog pass where it is built, the pure-Python pass, worker processes) take turns,
``--repeat`` times (a shared machine is noisy); the best runs are compared, and the medians, and the least
CPU time each took (user + system, all threads: the figure a loaded machine blurs least, and per core for a
single process). Prints the load average, MB/s, the ratios to grep, peak RSS, and checks that the scanner
examined exactly the lines grep counted and that every scan wrote the same document.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DIRS = (REPO.parent / "shared" / "samples" / "logs", REPO / "tests" / "data" / "samples" / "logs")
RECORD = re.compile(rb"^\[(?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE)\] [A-Z][A-Z0-9_]*\(-?\d+,")
UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1000, "KIB": 1 << 10, "M": 1 << 20, "MB": 1000 ** 2,
         "MIB": 1 << 20, "G": 1 << 30, "GB": 1000 ** 3, "GIB": 1 << 30}


def parse_size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).upper() not in UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1GiB, 64MiB, 2000000)")
    return int(float(match.group(1)) * UNITS[match.group(2).upper()])


def sample_lines(markers: Tuple[bytes, ...]) -> Tuple[List[bytes], List[bytes]]:
    """(record lines the scan passes over, record lines it must examine) from the real plog/slog/device
    samples: a line is examined when it holds one of ``markers`` (ERROR/WARNING records, and the few
    INFO/EVENT lines that carry an any-level rule's text, e.g. device fault events)."""
    folder = next((d for d in SAMPLE_DIRS if d.is_dir()), None)
    if folder is None:
        sys.exit("no log samples found (../shared/samples/logs or tests/data/samples/logs)")
    boring: List[bytes] = []
    interesting: List[bytes] = []
    for path in sorted(folder.iterdir()):
        if not path.name.startswith(("plog_", "device_", "slog_")):
            continue
        _, _, body = path.read_bytes().partition(b"\n# ---\n")
        for line in body.splitlines():
            if RECORD.match(line):
                (interesting if any(m in line for m in markers) else boring).append(line + b"\n")
    return boring, interesting


def build_file(path: Path, size: int, interesting_share: float, seed: int,
               markers: Tuple[bytes, ...]) -> None:
    boring, interesting = sample_lines(markers)
    rng = random.Random(seed)
    block = bytearray()
    while len(block) < min(size, 4 << 20):
        pool = interesting if rng.random() < interesting_share else boring
        block += rng.choice(pool)
    block_bytes = bytes(block)
    with open(path, "wb") as handle:
        written = 0
        while written + len(block_bytes) <= size:
            handle.write(block_bytes)
            written += len(block_bytes)
        rest = block_bytes[:size - written]
        handle.write(rest[:rest.rfind(b"\n") + 1])


def plog_markers() -> Tuple[bytes, ...]:
    """The literals the scanner searches in plog text, asked of a child: this process stays small, and its
    children start from its size."""
    return tuple(m.encode() for m in json.loads(subprocess.check_output(
        [sys.executable, "-c", "import json; from npudoctor.logs.scanner import Scanner; "
                               "print(json.dumps([m.decode() for m in Scanner().plog_markers]))"],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))))


def ere_escape(literal: bytes) -> str:
    return re.sub(r"([\\.\[\]()*+?{}|^$])", r"\\\1", literal.decode("ascii"))


def run_child(argv: List[str], pure: bool = False) -> Tuple[float, float, bytes, int, float]:
    """(wall seconds, peak RSS MiB, stdout, exit code, CPU seconds) of one child process (``pure``: without
    the compiled plog pass)."""
    env = dict(os.environ, LC_ALL="C", PYTHONPATH=str(REPO))
    env.pop("NPUDOCTOR_PURE_PYTHON", None)
    if pure:
        env["NPUDOCTOR_PURE_PYTHON"] = "1"
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024, out, proc.returncode, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("256MiB"),
                        help="file size (default 256MiB)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="runs of grep and of each scan, taking turns; the best runs are compared, and "
                             "the medians (default 5)")
    parser.add_argument("--interesting", default="0.02,0.4",
                        help="shares of lines the scan must examine (ERROR/WARNING records...), one workload "
                             "each; default 0.02,0.4: a quiet plog (target >= 0.5x grep) and an error-dense "
                             "one, a job looping on an error (target >= 0.25x grep)")
    parser.add_argument("--no-pure", action="store_true",
                        help="leave out the pure-Python scan (NPUDOCTOR_PURE_PYTHON=1)")
    parser.add_argument("--jobs", type=int, default=0,
                        help="worker processes of the parallel run (default 0: npudoctor's own choice)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tmp-dir", default=None, help="where to build the file (default: system temp dir)")
    args = parser.parse_args()

    markers = plog_markers()
    pattern = "|".join(ere_escape(m) for m in markers)
    workdir = Path(tempfile.mkdtemp(prefix="npudoctor-bench-", dir=args.tmp_dir))
    status = 0
    try:
        for share in (float(x) for x in args.interesting.split(",")):
            status |= run_workload(args, workdir, share, markers, pattern)
        print("peak RSS is per process (the scan and, with -j, its largest worker); the 1-process runs are the "
              "like-for-like comparison with grep (one core each); targets: >= 0.5x grep quiet, >= 0.25x "
              "error-dense, bounded memory")
        return status
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_workload(args: argparse.Namespace, workdir: Path, share: float, markers: Tuple[bytes, ...],
                 pattern: str) -> int:
    log = workdir / "plog-1_20250101000000000.log"
    build_file(log, args.size, share, args.seed, markers)
    size = log.stat().st_size
    mb = size / 1e6
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    # (name, --jobs, pure Python): the compiled pass where it is built, the pure-Python pass, worker processes
    scans = [("npudoctor", 1, False), (f"npudoctor -j{args.jobs or ''}", args.jobs, False)]
    if not args.no_pure:
        scans.insert(1, ("pure Python", 1, True))
    grep_argv = ["grep", "-E", "-c", pattern, str(log)]
    times: Dict[str, List[float]] = {"grep": [], **{name: [] for name, _, _ in scans}}
    cpu: Dict[str, List[float]] = {name: [] for name in times}
    rss: Dict[str, float] = {name: 0.0 for name in times}
    docs: Dict[str, Any] = {}
    grep_lines = 0
    load_before = os.getloadavg()[0]
    for _ in range(max(1, args.repeat)):  # taking turns: a burst of load on the machine hits all alike
        seconds, peak, out, _, cpu_seconds = run_child(grep_argv)
        times["grep"].append(seconds)
        cpu["grep"].append(cpu_seconds)
        rss["grep"] = max(rss["grep"], peak)
        grep_lines = int(out.strip() or 0)
        for name, jobs, pure in scans:
            seconds, peak, out, code, cpu_seconds = run_child(
                [sys.executable, "-m", "npudoctor", "logs", "scan", str(log), "--format", "json", "--jobs", str(jobs)],
                pure)
            if code not in (0, 1):
                print(f"npudoctor logs scan failed with exit code {code}", file=sys.stderr)
                return 2
            times[name].append(seconds)
            cpu[name].append(cpu_seconds)
            rss[name] = max(rss[name], peak)
            docs[name] = json.loads(out)
    grep_best, grep_median = min(times["grep"]), statistics.median(times["grep"])
    print(f"workload:    {size / (1 << 20):.0f} MiB of real sample record lines, {share:.0%} of them to "
          f"examine; {os.cpu_count()} cpus, load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} "
          f"after; best (median) of {len(times['grep'])} runs")
    grep_cpu = min(cpu["grep"])
    print(f"grep:        {grep_best:6.2f} s ({grep_median:.2f})  {mb / grep_best:7.1f} MB/s  CPU {grep_cpu:.2f} s  "
          f"peak RSS {rss['grep']:5.1f} MiB  (LC_ALL=C grep -E -c: {grep_lines:,} lines)")
    status = 0
    reference = docs[scans[0][0]]
    for name, _, _ in scans:
        best, median = min(times[name]), statistics.median(times[name])
        summary = docs[name]["files"][0]
        examined = summary["examined_lines"]
        print(f"{name + ':':<13}{best:6.2f} s ({median:.2f})  {mb / best:7.1f} MB/s  CPU {min(cpu[name]):.2f} s  "
              f"peak RSS {rss[name]:5.1f} MiB  ({summary['lines']:,} lines, {examined:,} examined, "
              f"{len(docs[name]['findings'])} merged findings)")
        print(f"{'':13}ratio to grep: {grep_best / best:.2f} best, {grep_median / median:.2f} median (wall); "
              f"{grep_cpu / min(cpu[name]):.2f} (CPU time, all threads and worker processes)")
        if examined != grep_lines:
            print(f"MISMATCH: npudoctor examined {examined} lines, grep matched {grep_lines}", file=sys.stderr)
            status = 1
        if {k: v for k, v in docs[name].items() if k != "tool"} != {k: v for k, v in reference.items() if k != "tool"}:
            print(f"MISMATCH: {name} and {scans[0][0]} wrote different documents", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
