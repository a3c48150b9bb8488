"""Time ``npudoctor libs`` on the real libtorch_npu.so against ``ldd -r`` on the same file, in one run.

torch's own libraries are on LD_LIBRARY_PATH (CPU torch beside torch_npu: a realistic mismatch), so the
loader really maps libtorch_cpu.so and resolves its symbols. Wall times include process start-up.
Target: npudoctor at most 2x ldd -r.

    python bench/bench_libs.py [PATH/TO/libtorch_npu.so] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

DEFAULT_LIB = Path.home() / ".cache/npudoctor-tests/torch_npu-2.14.0/torch_npu/lib/libtorch_npu.so"


def wall(argv, env) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    return time.perf_counter() - started, proc.stdout + proc.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lib", nargs="?", default=str(DEFAULT_LIB))
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    lib = Path(args.lib)
    if not lib.exists():
        print(f"{lib} not found: run tests/test_libs_wheel.py once (it downloads the torch-npu wheel)")
        return 2
    spec = find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        print("torch is not installed: pip install torch==2.13.0 (CPU) for a realistic run")
        return 2
    torch_lib = str(Path(next(iter(spec.submodule_search_locations))) / "lib")
    env = dict(os.environ, LD_LIBRARY_PATH=torch_lib)
    repo = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = str(repo) + os.pathsep + env.get("PYTHONPATH", "")
    ours_argv = [sys.executable, "-m", "npudoctor", "libs", str(lib), "--format", "json"]
    ldd_argv = ["ldd", "-r", str(lib)]
    ours, theirs = [], []
    for _ in range(args.runs):  # interleaved, so both see the same cache state
        seconds, ours_out = wall(ours_argv, env)
        ours.append(seconds)
        seconds, ldd_out = wall(ldd_argv, env)
        theirs.append(seconds)
    import json

    data = json.loads(ours_out)
    ldd_missing = set(re.findall(r"^\s*(\S+) => not found", ldd_out, re.M))
    ldd_undefined = set(re.findall(r"undefined symbol: ([^\s,]+)", ldd_out))
    agree = {m["name"] for m in data["missing_libraries"]} == ldd_missing and {
        s["name"] for s in data["missing_symbols"]
    } == ldd_undefined
    ours_s, ldd_s = statistics.median(ours), statistics.median(theirs)
    print(f"file: {lib} ({lib.stat().st_size / 2**20:.1f} MiB), LD_LIBRARY_PATH={torch_lib}")
    print(
        f"objects loaded: {len(data['loaded'])}, missing libraries: {len(ldd_missing)}, "
        f"undefined symbols: {len(ldd_undefined)}, verdicts agree: {agree}"
    )
    print(f"npudoctor libs  median {ours_s * 1000:7.1f} ms  (min {min(ours) * 1000:.1f}, runs {args.runs})")
    print(f"ldd -r          median {ldd_s * 1000:7.1f} ms  (min {min(theirs) * 1000:.1f}, runs {args.runs})")
    print(f"ratio npudoctor / ldd -r: {ours_s / ldd_s:.2f}x (target <= 2x)")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
