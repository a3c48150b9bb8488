#!/usr/bin/env python3
"""Benchmark the job diagnosis (issue 27): per-node scans, then 128 (or 512) per-node documents merged.

    python bench/bench_logs_job.py                       # 1,024 and 4,096 ranks (8 per node)
    python bench/bench_logs_job.py --ranks 1024 --rank-kib 256

The job is built from real texts (tests/data/samples): on every node, 8 ranks' plogs (``device-N/``) made of
the real INFO records of the HCCL setup plog repeated to ``--rank-kib`` KiB, ending in the real HCCL
execution timeout records of the hccl fault-diagnosis guide (time edited per rank); node-0000 NPU 0 ends
instead in the real AI Vector core exception plog, 30 minutes earlier. Measured, each as a child process so
that its peak RSS (``os.wait4``) is its own:

1. one node's per-node scan (``logs scan NODE_DIR --node NAME --format json``) beside ``LC_ALL=C grep -c``
   over the same bytes (the literals the scanner searches in plog text: ``[ERROR]``, ``[WARNING]``);
2. the merge: ``logs scan *.json`` over the job's documents, for 1,024 and 4,096 ranks (the timeout nodes'
   documents are the scanned one with its node name, paths and ranks changed: merging is what is measured).

Checks that the merged verdict names node-0000 NPU 0 and that all other ranks are its consequences.
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
from pathlib import Path
from typing import List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "tests" / "data" / "samples"
NPUDOCTOR = [sys.executable, "-m", "npudoctor"]


def body(relative: str) -> bytes:
    text = (SAMPLES / relative).read_bytes()
    return text.split(b"# ---\n", 1)[1] if b"# ---\n" in text else text


def build_node(folder: Path, node: int, ranks_per_node: int, rank_bytes: int) -> None:
    filler = body("logs/plog_hccl_run_info_setupagent.log").replace(b"2025-01-24-11:10", b"2025-05-08-09:50")
    timeout = body("system/hccl_TaskExecStage_TaskRunFailed_Timeout_hccl-doc.txt")
    for device in range(ranks_per_node):
        rank = node * ranks_per_node + device  # each rank's setup line names its own rank (edited)
        pad = filler.replace(b"rank[0]", b"rank[%d]" % rank) * max(1, rank_bytes // len(filler))
        if node == 0 and device == 0:
            tail = body("logs/plog_debug_aicore_error_2025.log")
        else:
            tail = timeout.replace(b"2025-10-24-11:18", b"2025-05-08-10:26")
        path = folder / f"device-{device}" / f"plog-{1000 + device}_20250508.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pad + tail)


def node_document(template: str, name: str, node: int) -> str:
    """node-0001's document as node ``node``'s: its name in paths and fields, its ranks 8..15 moved to
    node * 8 .. node * 8 + 7 (what that node's own scan would say)."""
    document = json.loads(template.replace("node-0001", name))
    for entry in document["units"] + document["incidents"]:
        if entry.get("rank") is not None:
            entry["rank"] = entry["rank"] - 8 + node * 8
    return json.dumps(document)


def timed(args: List[str], cwd: Path, out: Optional[Path] = None) -> Tuple[float, int]:
    """(wall seconds, peak RSS KiB) of a child process."""
    start = time.perf_counter()
    with open(out or os.devnull, "wb") as sink:
        child = subprocess.Popen(args, cwd=cwd, stdout=sink, stderr=subprocess.DEVNULL,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        sys.exit(f"failed: {' '.join(args)}")
    return wall, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, action="append", help="ranks (8 per node); default 1024 and 4096")
    parser.add_argument("--rank-kib", type=int, default=128, help="KiB of log per rank (default 128)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = args.ranks or [1024, 4096]
    work = Path(tempfile.mkdtemp(prefix="npudoctor-job-bench-"))
    try:
        build_node(work / "job" / "node-0000", 0, 8, args.rank_kib * 1024)
        build_node(work / "job" / "node-0001", 1, 8, args.rank_kib * 1024)
        node_bytes = sum(p.stat().st_size for p in (work / "job" / "node-0001").rglob("*.log"))
        scans, greps, plain, rss = [], [], [], 0
        for _ in range(args.repeat):
            # the scanner alone over the same files (one merged result, no units, incidents or diagnosis)
            plain.append(timed([sys.executable, "-c", "import sys; from npudoctor.logs import scan_paths; "
                                "scan_paths(sys.argv[1:], jobs=1)", "job/node-0001"], work)[0])
            wall, peak = timed([*NPUDOCTOR, "logs", "scan", "job/node-0001", "--node", "node-0001",
                                "--format", "json", "-j", "1"], work, work / "node-0001.json")
            scans.append(wall)
            rss = max(rss, peak)
            files = [str(p) for p in sorted((work / "job" / "node-0001").rglob("*.log"))]
            start = time.perf_counter()
            subprocess.run(["grep", "-c", "-F", "-e", "[ERROR]", "-e", "[WARNING]", *files], cwd=work,
                           stdout=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"}, check=False)
            greps.append(time.perf_counter() - start)
        timed([*NPUDOCTOR, "logs", "scan", "job/node-0000", "--node", "node-0000", "--format", "json", "-j", "1"],
              work, work / "node-0000.json")
        scan_s, grep_s = statistics.median(scans), statistics.median(greps)
        print(f"per-node scan (8 ranks, {node_bytes / 1e6:.1f} MB): npudoctor {scan_s:.2f} s "
              f"({node_bytes / 1e6 / scan_s:.0f} MB/s, peak RSS {rss / 1024:.0f} MiB, with interpreter start); "
              f"grep -c {grep_s:.3f} s ({node_bytes / 1e6 / grep_s:.0f} MB/s); ratio {scan_s / grep_s:.1f}x; "
              f"the scanner alone (no job layer) {statistics.median(plain):.2f} s")
        template = (work / "node-0001.json").read_text(encoding="utf-8")
        for ranks in sizes:
            docs = work / f"docs-{ranks}"
            docs.mkdir()
            shutil.copy(work / "node-0000.json", docs / "node-0000.json")
            for node in range(1, ranks // 8):
                name = f"node-{node:04d}"
                (docs / f"{name}.json").write_text(node_document(template, name, node), encoding="utf-8")
            doc_bytes = sum(p.stat().st_size for p in docs.iterdir())
            walls, peak = [], 0
            for _ in range(args.repeat):
                inputs = sorted(str(p.relative_to(work)) for p in docs.iterdir())
                wall, rss_kib = timed([*NPUDOCTOR, "logs", "scan", *inputs, "--format", "json"],
                                      work, work / f"merged-{ranks}.json")
                walls.append(wall)
                peak = max(peak, rss_kib)
            start = time.perf_counter()
            subprocess.run(["grep", "-c", "-F", "-e", '"role"', *sorted(str(p) for p in docs.iterdir())],
                           stdout=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"}, check=False)
            grep_s = time.perf_counter() - start
            merged = json.loads((work / f"merged-{ranks}.json").read_text(encoding="utf-8"))
            diagnosis = merged["diagnosis"]
            root = next(i for i in merged["incidents"] if i["id"] == diagnosis["root_cause"])
            consequences = sum(1 for i in merged["incidents"] if i["role"] == "consequence")
            assert (root["node"], root["device"], root["rank"], root["kind"]) == (
                "node-0000", 0, 0, "aicore_exception"), root
            assert consequences == ranks - 1, consequences
            print(f"merge {ranks} ranks ({ranks // 8} documents, {doc_bytes / 1e6:.1f} MB): "
                  f"{statistics.median(walls):.2f} s (peak RSS {peak / 1024:.0f} MiB, with interpreter start); "
                  f"grep -c over the same bytes {grep_s:.3f} s; verdict: {diagnosis['verdict'][:100]}...")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
