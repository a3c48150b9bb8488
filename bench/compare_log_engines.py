#!/usr/bin/env python3
"""Compare the findings of the log scanner's engines, file by file: an older commit's (``--ref``), this tree's
compiled pass (``npudoctor/logs/_plogscan.c``) and this tree's pure-Python pass.

    python bench/compare_log_engines.py --ref 7be4d96          # every sample, and the bench's two workloads
    python bench/compare_log_engines.py --ref main --no-big PATH...

Each engine scans each input on its own (``logs scan --format json`` as a document, the tool version left
out, with the ``--format junit`` document beside it) in a child process; the documents must be equal, the
order of keys included. Inputs: every file in ../shared/samples/logs and
tests/data (whatever its format: the scanner takes any bytes), each of those folders as one scan, the
paths given, and (unless ``--no-big``) the quiet and error-dense plogs of bench/bench_logs_scan.py at
``--size``. The older commit's code is taken with ``git archive`` (its own rules file too: compare
commits whose rules are the same). Exit 0 when all agree, 1 otherwise (the first differences are shown).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
SAMPLE_FOLDERS = (REPO.parent / "shared" / "samples" / "logs", REPO / "tests" / "data")

# Run in each engine's child: one JSON document per input, one per line.
CHILD = """
import json, sys
from npudoctor.logs.engine import scan_paths
from npudoctor.report.logs_json import to_dict
try:
    from npudoctor.report.junit import scan_document
except ImportError:
    scan_document = None
for line in sys.stdin:
    paths = json.loads(line)
    result = scan_paths(paths, jobs=1)
    doc = to_dict(result)
    doc.pop("tool", None)
    if scan_document is not None:  # the JUnit document lists each file's causes in their order
        doc["junit"] = scan_document(result, ("error", "warn"))
    print(json.dumps(doc, sort_keys=False))
"""


def inputs(extra: List[str], big: List[Path]) -> List[List[str]]:
    scans: List[List[str]] = []
    for folder in SAMPLE_FOLDERS:
        if not folder.is_dir():
            continue
        files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        scans.extend([str(p)] for p in files)
        scans.append([str(folder)])
    scans.extend([p] for p in extra)
    scans.extend([str(p)] for p in big)
    return scans


def run_engine(pythonpath: Path, pure: bool, scans: List[List[str]]) -> List[str]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    env.pop("NPUDOCTOR_PURE_PYTHON", None)
    if pure:
        env["NPUDOCTOR_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD], input="".join(json.dumps(s) + "\n" for s in scans),
                         capture_output=True, text=True, env=env, cwd=REPO, check=True, timeout=3600)
    return out.stdout.splitlines()


def first_difference(a: object, b: object, where: str = "") -> str:
    if type(a) is not type(b):
        return f"{where}: {a!r:.200} != {b!r:.200}"
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{where}: keys {list(a)!r:.300} != {list(b)!r:.300}"
        for key in a:
            found = first_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items != {len(b)}"
        for index, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{where}[{index}]")
            if found:
                return found
        return ""
    return "" if a == b else f"{where}: {a!r:.200} != {b!r:.200}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="more inputs to compare on")
    parser.add_argument("--ref", default="", help="the older commit (default: only compiled vs pure Python)")
    parser.add_argument("--no-big", action="store_true", help="leave out the bench's big workloads")
    parser.add_argument("--size", default="64MiB", help="size of each big workload (default 64MiB)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="npudoctor-compare-") as tmp:
        big: List[Path] = []
        if not args.no_big:
            sys.path.insert(0, str(REPO / "bench"))
            import bench_logs_scan

            markers = bench_logs_scan.plog_markers()
            size = bench_logs_scan.parse_size(args.size)
            for share, name in ((0.02, "quiet"), (0.4, "dense")):
                big.append(Path(tmp) / f"plog-{name}.log")
                bench_logs_scan.build_file(big[-1], size, share, 1, markers)
        scans = inputs(args.paths, big)
        engines: Dict[str, List[str]] = {}
        if args.ref:
            old = Path(tmp) / "old"
            old.mkdir()
            archive = subprocess.run(["git", "archive", args.ref, "npudoctor", "checks"], cwd=REPO,
                                     capture_output=True, check=True, timeout=300).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True, timeout=300)
            engines[f"{args.ref} (pure Python)"] = run_engine(old, True, scans)
        engines["this tree, compiled"] = run_engine(REPO, False, scans)
        engines["this tree, pure Python"] = run_engine(REPO, True, scans)
    names = list(engines)
    reference = names[0]
    differing = 0
    for index, scan in enumerate(scans):
        docs = {name: json.loads(engines[name][index]) for name in names}
        for name in names[1:]:
            found = first_difference(docs[reference], docs[name])
            if found:
                differing += 1
                if differing <= 20:
                    print(f"DIFFERENT {' '.join(scan)}: {reference} vs {name}: {found}")
    findings = sum(len(json.loads(doc)["findings"]) for doc in engines[reference])
    print(f"{len(scans)} scans ({findings} findings in all) by {len(names)} engines: "
          + ("the same documents" if not differing else f"{differing} differences"))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
