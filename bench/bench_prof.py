#!/usr/bin/env python3
"""Benchmark `npudoctor prof analyze` against msprof-analyze's advisor on one kernel_details of real rows.

    python bench/bench_prof.py                       # 1,000,000 rows
    python bench/bench_prof.py --rows 100000 --peer /tmp/msprof-venv/bin/msprof-analyze

The table is the real torch_npu kernel_details.csv of tests/data/samples/logs (AI_CORE, AI_CPU Cast,
AI_VECTOR_CORE, MIX_AIC, MIX_AIV, HCCL, DSA_SQE rows, Memory PMU columns) repeated to ``--rows`` rows
(``--table pipeutil``: the wider PipeUtilization file, 46 columns, every row read for PMU ratios), laid out
as a torch_npu profiler folder (``*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv`` with the PROF_*
``info.json`` beside it). Both tools run as child processes in the same run, each timed with its peak RSS
(``os.wait4``): ``npudoctor prof analyze DIR --format json`` and ``msprof-analyze advisor computation -d DIR
--agent -l en`` (installed apart: ``python3 -m venv /tmp/msprof-venv && /tmp/msprof-venv/bin/pip install
msprof-analyze``). Prints both figures, the ratio, and whether the AI CPU operator sets agree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, List, Optional, Set, Tuple

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "tests" / "data" / "samples" / "logs"
TABLES = {"memory": "prof_kernel_details_memory_metrics.csv",
          "pipeutil": "prof_kernel_details_pipeutil_matmul_bf16.csv"}
PEER_CANDIDATES = ("msprof-analyze", "/tmp/msprof-venv/bin/msprof-analyze")


def body(name: str) -> bytes:
    data = (SAMPLES / name).read_bytes()
    return data.partition(b"\n# ---\n")[2]


def build(folder: Path, table: str, rows: int) -> Path:
    """A torch_npu profiler folder whose kernel_details.csv repeats the real rows to ``rows`` rows."""
    import csv
    import io

    text = body(TABLES[table]).decode()
    records = list(csv.reader(io.StringIO(text)))
    header, data = records[0], [r for r in records[1:] if len(r) == len(records[0])]  # drop the malformed row
    lines = io.StringIO()
    writer = csv.writer(lines, lineterminator="\n")
    for record in data:
        writer.writerow(record)
    block = lines.getvalue().encode()
    pt = folder / "localhost_1000_20230628101435_ascend_pt"
    out = pt / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    with open(out / "kernel_details.csv", "wb") as handle:
        handle.write((",".join(header) + "\n").encode())
        written = 0
        while written < rows:
            take = min(len(data), rows - written)
            handle.write(block if take == len(data) else b"".join(block.splitlines(True)[:take]))
            written += take
    device = pt / "PROF_000001_20230628101435646_FKFLNPEPPRRCFCBA" / "device_0"
    device.mkdir(parents=True)
    (device / "info.json.0").write_bytes(body("prof_msprof_device_info_json_910.json"))
    (pt / "profiler_info_0.json").write_text("{}")
    return pt


def timed(argv: List[str], timeout: float, cwd: Optional[Path] = None) -> Tuple[float, int, str, int]:
    """(seconds, peak RSS in KiB, stdout, exit code) of one child process."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
    out_chunks = []
    deadline = start + timeout
    assert process.stdout is not None
    while True:
        chunk = process.stdout.read(1 << 16)
        if not chunk:
            break
        out_chunks.append(chunk)
        if time.perf_counter() > deadline:
            process.kill()
            break
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    return elapsed, usage.ru_maxrss, b"".join(out_chunks).decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)


def npudoctor_aicpu(stdout: str) -> Set[str]:
    doc = json.loads(stdout)
    return {f["subject"] for f in doc["findings"] if f["id"] == "PROF001" and f["status"] in ("warn", "fail")}


def advisor_aicpu(stdout: str) -> Optional[Set[str]]:
    """The operator names in msprof-analyze's "AICPU Issues" row (``--agent`` JSON on stdout)."""
    start = stdout.find('{"status"')
    if start < 0:
        return None
    doc: Any = json.loads(stdout[start:stdout.rindex("}") + 1])
    for row in doc.get("message", {}).get("problems", {}).get("data", []):
        if row and row[0] == "AICPU Issues":
            listed = row[1].split(":", 1)[-1]
            return {name.strip() for name in listed.replace("\n", ",").split(",") if name.strip()}
    return set()


def find_peer(given: Optional[str]) -> Optional[str]:
    for candidate in ([given] if given else list(PEER_CANDIDATES)):
        path = shutil.which(candidate) if candidate and os.sep not in candidate else candidate
        if path and os.access(path, os.X_OK):
            return path
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--table", choices=sorted(TABLES), default="memory")
    parser.add_argument("--peer", help="msprof-analyze executable (default: PATH, then /tmp/msprof-venv)")
    parser.add_argument("--peer-timeout", type=float, default=1800.0)
    args = parser.parse_args()
    peer = find_peer(args.peer)
    with tempfile.TemporaryDirectory(prefix="bench_prof_") as tmp:
        folder = Path(tmp)
        pt = build(folder, args.table, args.rows)
        size = (pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").stat().st_size
        print(f"kernel_details.csv: {args.rows:,} rows of real {args.table} rows, {size / 2**20:.0f} MiB")
        ours = timed([sys.executable, "-m", "npudoctor", "prof", "analyze", str(pt), "--format", "json"], 600)
        print(f"npudoctor prof analyze:  {ours[0]:7.2f} s  peak RSS {ours[1] / 1024:7.0f} MiB")
        our_set = npudoctor_aicpu(ours[2])
        if peer is None:
            print("msprof-analyze not installed: no peer figures (see the docstring to install it)")
            return
        out_dir = folder / "advisor"
        out_dir.mkdir()
        theirs = timed([peer, "advisor", "computation", "-d", str(pt), "-o", str(out_dir), "-l", "en",
                        "--agent"], args.peer_timeout, cwd=out_dir)
        print(f"msprof-analyze advisor:  {theirs[0]:7.2f} s  peak RSS {theirs[1] / 1024:7.0f} MiB"
              + ("  (killed at the timeout)" if theirs[0] >= args.peer_timeout else ""))
        print(f"speed ratio (advisor / npudoctor): {theirs[0] / ours[0]:.1f}x; "
              f"peak RSS ratio: {theirs[1] / max(ours[1], 1):.1f}x")
        their_set = advisor_aicpu(theirs[2])
        agree = their_set == our_set
        print(f"AI CPU operators: npudoctor {sorted(our_set)}, advisor {sorted(their_set or [])}: "
              + ("agree" if agree else "DIFFER"))


if __name__ == "__main__":
    main()
