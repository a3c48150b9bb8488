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

    python bench/bench_prof.py --db --advisor all    # also the same rows as a torch_npu .db export
    python bench/bench_prof.py --folders             # whole sample folders, text and .db, problem by problem

``--db`` builds the same rows as ``ascend_pytorch_profiler_0.db`` (the schema of tests/profdb.py) and times
npudoctor on it against its CSV, ``--repeat`` turns (default 3) taking turns so both see the same load.
``--folders`` runs both tools on the folders the tests build from real
samples (a torch_npu rank as text and as .db, the real msinsight job as .db and as text, an msprof collection,
msprof-analyze's cluster output) and
lists, per folder, the problems each reports and which agree. ``--advisor`` picks the advisor's mode
(``all``, as the issue asks, or ``computation``).
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
from typing import Any, Dict, List, Optional, Set, Tuple

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


# The advisor's problem titles (26.2.0, --agent -l en) and the npudoctor check that judges the same thing.
# (A title several checks answer maps to all of them: agreement when npudoctor reports any.)
ADVISOR_TO_PROF: Dict[str, Any] = {
                   "AICPU Issues": "PROF001", "Operator No Bound Issues": "PROF002", "Block Dim Issues": "PROF004",
                   "Operator Dynamic Shape Issues": "PROF008", "Slow Dataloader Issues": "PROF012",
                   "GC Analysis": "PROF013", "SyncBatchNorm Issues": "PROF014", "Synchronize Stream Issues": "PROF015",
                   "AI Core Frequency Issues": "PROF016", "Packet Analysis": "PROF017", "Slow Rank": "PROF018",
                   "Slow Link": ("PROF010", "PROF034"), "Memory Operator Issues": "PROF011",
                   "Environment Variable Issues": "PROF019", "Cube Operator Perf Analysis": "PROF022",
                   "FA Operator Perf Analysis": "PROF023", "Vector Operator Perf Analysis": "PROF024",
                   "Fusible Operator Analysis": "PROF025", "Fusion Issues": "PROF026",
                   "Conjectured Gc": "PROF030", "Affinity API Issues": "PROF031",
                   "Bandwidth Contention Analysis": "PROF032", "Byte Alignment Analysis": "PROF033"}


def advisor_problems(stdout: str) -> Optional[List[str]]:
    """The problem titles of msprof-analyze's ``--agent`` answer (None: no answer on stdout)."""
    start = stdout.find('{"status"')
    if start < 0:
        return None
    doc: Any = json.loads(stdout[start:stdout.rindex("}") + 1])
    return [str(row[0]) for row in doc.get("message", {}).get("problems", {}).get("data", []) if row]


def npudoctor_problems(stdout: str) -> List[str]:
    doc = json.loads(stdout)
    return sorted({f["id"] for f in doc["findings"] if f["status"] in ("warn", "fail")})


def npudoctor_says(stdout: str, check_id: str) -> str:
    """What npudoctor's JSON says for ``check_id`` (its verdicts and first detail): the reason of a
    disagreement, from our side."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return "no JSON answer"
    findings = [f for f in doc.get("findings", []) if f["id"] == check_id]
    if not findings:
        return f"no {check_id} finding"
    detail = str(findings[0].get("detail", ""))
    return f"{'/'.join(sorted({f['status'] for f in findings}))}: {detail[:150]}"


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


def build_db(folder: Path, table: str, rows: int) -> Path:
    """The rows of :func:`build` as a torch_npu ``export_type=db`` folder (``ascend_pytorch_profiler_0.db``)."""
    sys.path.insert(0, str(REPO))
    from tests import profdb

    pt = folder / "localhost_1000_20230628101435_ascend_pt"
    out = pt / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    profdb.write_profiler_db(out / "ascend_pytorch_profiler_0.db", TABLES[table], extras=False, rows_to=rows)
    device = pt / "PROF_000001_20230628101435646_FKFLNPEPPRRCFCBA" / "device_0"
    device.mkdir(parents=True)
    (device / "info.json.0").write_bytes(body("prof_msprof_device_info_json_910.json"))
    (pt / "profiler_info_0.json").write_text("{}")
    return pt


def run_advisor(peer: str, folder: Path, mode: str, timeout: float) -> Tuple[float, int, str, int]:
    out_dir = folder.parent / f"advisor_{folder.name}"
    out_dir.mkdir(exist_ok=True)
    return timed([peer, "advisor", mode, "-d", str(folder), "-o", str(out_dir), "-l", "en", "--agent"], timeout,
                 cwd=out_dir)


def real_job(root: Path, kind: str) -> Path:
    """The real torch_npu job of tests/data/samples/prof_db (Ascend/msinsight), exported as .db or as text."""
    folder = root / "rank0_ascend_pt"
    shutil.copytree(REPO / "tests" / "data" / "samples" / "prof_db" / f"level1_rank0_{kind}", folder)
    return root


def compare_folders(peer: Optional[str], mode: str, timeout: float) -> None:
    """Both tools on the folders the tests build from real samples: problems, agreements, time, memory."""
    sys.path.insert(0, str(REPO))
    from tests import profdb, profdirs
    from tests import test_prof_schedule as schedule

    def msprof_with_hccl(root: Path) -> Path:  # the real HCCL tasks as the CANN 8 msprof_*.json timeline
        prof = profdirs.msprof_collection(root)
        profdirs.put(prof / "mindstudio_profiler_output",
                     {f"msprof_{profdirs.TS}.json": "prof_msprof_hccl_timeline_910.json"})
        return prof

    builders = {"torch_npu rank (text)": lambda root: profdirs.torch_npu_rank(root, rank=0),
                "torch_npu rank (.db)": lambda root: profdb.torch_npu_db_rank(root, rank=0),
                "torch_npu pipeutil (text)": lambda root: profdirs.torch_npu_rank(
                    root, rank=0, kernel=TABLES["pipeutil"]),
                "torch_npu pipeutil (.db)": lambda root: profdb.torch_npu_db_rank(root, rank=0,
                                                                                  kernel=TABLES["pipeutil"]),
                "real job msinsight level1 (.db)": lambda root: real_job(root, "db"),
                "real job msinsight level1 (text, another run)": lambda root: real_job(root, "text"),
                "msprof collection": profdirs.msprof_collection,
                "msprof MoE op_summary": lambda root: profdirs.msprof_collection(
                    root, "prof_op_summary_moe_grouped_matmul_static_2026.csv"),
                "msprof legacy (task_time + hccl timelines)": profdirs.msprof_legacy,
                "cluster_analysis_output": lambda root: profdirs.cluster_output(root).parent,
                "msprof collection + real HCCL tasks (msprof_*.json)": msprof_with_hccl,
                # CONSTRUCTED on real data (tests/test_prof_schedule.py): what the real samples lack
                "trace + 250 ms silent idle (constructed)": schedule.silent_span_trace,
                "trace + fusible aten sequences (constructed)": lambda root: schedule.with_ops(root, schedule.sequence(
                    "pow", "mean", "add", "rsqrt", "mul", "linear", "slice", "silu", "mul",
                    "Optimizer.step#AdamW.step")),
                "legacy + matmuls over the slow transfers (constructed)": lambda root: schedule.legacy_with_matmuls(
                    root, lambda t: t["args"]["bandwidth(GB/s)"] < 14.5),
                "cluster, two uneven pipeline stages (constructed)": lambda root: schedule.cluster_with_stages(
                    root, 1.3).parent}
    with tempfile.TemporaryDirectory(prefix="bench_prof_folders_") as tmp:
        for name, make in builders.items():
            root = Path(tmp) / name.replace(" ", "_").replace("(", "").replace(")", "").replace(".", "")
            root.mkdir()
            folder = Path(make(root))
            ours = timed([sys.executable, "-m", "npudoctor", "prof", "analyze", str(folder), "--format", "json"],
                         600)
            our_ids = npudoctor_problems(ours[2]) if ours[2].strip().startswith("{") else [f"(exit {ours[3]})"]
            print(f"\n{name}: npudoctor {ours[0]:.2f} s, {ours[1] / 1024:.0f} MiB, exit {ours[3]}: "
                  f"{', '.join(our_ids) or 'no problem'}")
            if peer is None:
                continue
            theirs = run_advisor(peer, folder, mode, timeout)
            titles = advisor_problems(theirs[2])
            print(f"  advisor {mode}: {theirs[0]:.2f} s, {theirs[1] / 1024:.0f} MiB, exit {theirs[3]}: "
                  + ("no answer on stdout" if titles is None else (", ".join(titles) or "no problem")))
            matched = {ADVISOR_TO_PROF.get(title) for title in titles or []}
            only_ours = [check_id for check_id in our_ids if check_id not in matched]
            if only_ours and titles is not None:
                print(f"    npudoctor only: {', '.join(only_ours)}")
            for title in titles or []:
                mapped = ADVISOR_TO_PROF.get(title)
                checks = (mapped,) if isinstance(mapped, str) else tuple(mapped or ())
                verdict = ("agree" if set(checks) & set(our_ids) else
                           f"npudoctor does not report {' / '.join(checks)} ({npudoctor_says(ours[2], checks[0])})") \
                    if checks else "no npudoctor check of that family"
                print(f"    {title}: {verdict}")
            told = {c for mapped in map(ADVISOR_TO_PROF.get, titles or []) if mapped
                    for c in ((mapped,) if isinstance(mapped, str) else mapped)}
            for check in our_ids:
                if check not in told:
                    print(f"    {check}: npudoctor only")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--table", choices=sorted(TABLES), default="memory")
    parser.add_argument("--peer", help="msprof-analyze executable (default: PATH, then /tmp/msprof-venv)")
    parser.add_argument("--peer-timeout", type=float, default=1800.0)
    parser.add_argument("--advisor", choices=("all", "computation"), default="all")
    parser.add_argument("--db", action="store_true", help="also time the same rows as a .db export")
    parser.add_argument("--repeat", type=int, default=3, help="with --db: CSV/.db turns (interleaved)")
    parser.add_argument("--no-peer", action="store_true", help="npudoctor only (the advisor takes minutes)")
    parser.add_argument("--folders", action="store_true", help="whole sample folders instead of one big table")
    args = parser.parse_args()
    peer = None if args.no_peer else find_peer(args.peer)
    if args.folders:
        compare_folders(peer, args.advisor, args.peer_timeout)
        return
    with tempfile.TemporaryDirectory(prefix="bench_prof_") as tmp:
        folder = Path(tmp)
        pt = build(folder / "csv", args.table, args.rows)
        size = (pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").stat().st_size
        print(f"kernel_details.csv: {args.rows:,} rows of real {args.table} rows, {size / 2**20:.0f} MiB")
        ours = timed([sys.executable, "-m", "npudoctor", "prof", "analyze", str(pt), "--format", "json"], 600)
        print(f"npudoctor prof analyze:  {ours[0]:7.2f} s  peak RSS {ours[1] / 1024:7.0f} MiB")
        our_set = npudoctor_aicpu(ours[2])
        if args.db:
            db_pt = build_db(folder / "db", args.table, args.rows)
            db_file = db_pt / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
            if hasattr(os, "sync"):
                os.sync()  # the fresh file's pages written out first: the turns time reading, not writeback
            print(f"ascend_pytorch_profiler_0.db: the same {args.rows:,} rows, "
                  f"{db_file.stat().st_size / 2**20:.0f} MiB")
            ratios = []
            for turn in range(max(1, args.repeat)):  # CSV and .db taking turns, so both see the same load
                csv_run = ours if turn == 0 else timed(
                    [sys.executable, "-m", "npudoctor", "prof", "analyze", str(pt), "--format", "json"], 600)
                db_run = timed([sys.executable, "-m", "npudoctor", "prof", "analyze", str(db_pt), "--format", "json"],
                               600)
                ratios.append(db_run[0] / csv_run[0])
                print(f"  turn {turn + 1}: CSV {csv_run[0]:6.2f} s {csv_run[1] / 1024:5.0f} MiB | "
                      f".db {db_run[0]:6.2f} s {db_run[1] / 1024:5.0f} MiB | .db/CSV {ratios[-1]:.2f}; problems "
                      f"{npudoctor_problems(db_run[2])} vs CSV {npudoctor_problems(csv_run[2])}")
            ratios.sort()
            print(f"npudoctor .db / CSV time: median {ratios[len(ratios) // 2]:.2f}, best {ratios[0]:.2f}, "
                  f"worst {ratios[-1]:.2f} over {len(ratios)} turn(s)")
        if peer is None:
            print("msprof-analyze not installed: no peer figures (see the docstring to install it)")
            return
        theirs = run_advisor(peer, pt, args.advisor, args.peer_timeout)
        print(f"msprof-analyze advisor {args.advisor}:  {theirs[0]:7.2f} s  peak RSS {theirs[1] / 1024:7.0f} MiB"
              + ("  (killed at the timeout)" if theirs[0] >= args.peer_timeout else ""))
        print(f"speed ratio (advisor / npudoctor): {theirs[0] / ours[0]:.1f}x; "
              f"peak RSS ratio: {theirs[1] / max(ours[1], 1):.1f}x")
        print(f"problems: npudoctor {npudoctor_problems(ours[2])}, advisor {advisor_problems(theirs[2])}")
        their_set = advisor_aicpu(theirs[2])
        agree = their_set == our_set
        print(f"AI CPU operators: npudoctor {sorted(our_set)}, advisor {sorted(their_set or [])}: "
              + ("agree" if agree else "DIFFER"))


if __name__ == "__main__":
    main()
