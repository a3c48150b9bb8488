"""Time ``npudoctor libs`` on the real libtorch_npu.so against ``ldd -r`` on the same file, in one run.

torch's own libraries are on LD_LIBRARY_PATH (CPU torch beside torch_npu: a realistic mismatch), so the
loader really maps libtorch_cpu.so and resolves its symbols. Wall times include process start-up; runs
are interleaved (both sides see the same cache state) after one warm-up run each, and medians are
compared. Target: npudoctor at most 2x ldd -r.

Context lines show what no analysis can win back: the bare start of the chosen interpreter (``-c pass``)
and ``npudoctor --version`` (interpreter + click + the CLI module), and the same analysis without the
compiled resolver (NPUDOCTOR_PURE_PYTHON=1). The interpreter's build matters as much as the code: a CPython
built without PGO (pyenv's default) runs Python code about twice as slowly as a distribution's. Run it with
a fresh venv's python too: a base interpreter may import extra modules at every start (a ``.pth`` file)::

    python bench/bench_libs.py [PATH/TO/libtorch_npu.so] [--runs N] [--python PYTHON]
    python -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install -e .
    python bench/bench_libs.py --python /tmp/bench-venv/bin/python

The package's bytecode is compiled first (``compileall``), as an installed wheel's is: with
PYTHONDONTWRITEBYTECODE set, every run would otherwise compile the sources again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

DEFAULT_LIB = Path.home() / ".cache/npudoctor-tests/torch_npu-2.14.0/torch_npu/lib/libtorch_npu.so"


def wall(argv: Sequence[str], env: Dict[str, str]) -> Tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    return time.perf_counter() - started, proc.stdout + proc.stderr


def median_ms(argv: Sequence[str], env: Dict[str, str], runs: int) -> float:
    return statistics.median(wall(argv, env)[0] for _ in range(runs)) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("lib", nargs="?", default=str(DEFAULT_LIB))
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--python", default=sys.executable, help="interpreter for the npudoctor side")
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
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, LD_LIBRARY_PATH=torch_lib)
    env["PYTHONPATH"] = str(repo) + os.pathsep + env.get("PYTHONPATH", "")
    compile_env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [args.python, "-m", "compileall", "-q", str(repo / "npudoctor")],
        env=compile_env,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=300,
    )
    ours_argv = [args.python, "-m", "npudoctor", "libs", str(lib), "--format", "json"]
    ldd_argv = ["ldd", "-r", str(lib)]
    _, ours_out = wall(ours_argv, env)  # warm-up: page cache, and the answer to check
    _, ldd_out = wall(ldd_argv, env)
    ours: List[float] = []
    theirs: List[float] = []
    for _ in range(args.runs):  # interleaved, so both see the same cache state
        ours.append(wall(ours_argv, env)[0])
        theirs.append(wall(ldd_argv, env)[0])
    bare_ms = median_ms([args.python, "-c", "pass"], env, args.runs)
    version_ms = median_ms([args.python, "-m", "npudoctor", "--version"], env, args.runs)
    pure_ms = median_ms(ours_argv, dict(env, NPUDOCTOR_PURE_PYTHON="1"), args.runs)
    compiled = subprocess.run(
        [args.python, "-c", "from npudoctor.elf.compiled import compiled_resolver as c; print(c() is not None)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    build = subprocess.run([args.python, "-VV"], capture_output=True, text=True, timeout=60).stdout.strip()

    data = json.loads(ours_out)
    ldd_missing = set(re.findall(r"^\s*(\S+) => not found", ldd_out, re.M))
    ldd_undefined = set(re.findall(r"undefined symbol: ([^\s,]+)", ldd_out))
    agree = {m["name"] for m in data["missing_libraries"]} == ldd_missing and {
        s["name"] for s in data["missing_symbols"]
    } == ldd_undefined
    ours_ms, ldd_ms = statistics.median(ours) * 1000, statistics.median(theirs) * 1000
    print(f"file: {lib} ({lib.stat().st_size / 2**20:.1f} MiB), LD_LIBRARY_PATH={torch_lib}")
    print(f"python: {args.python} ({build}); compiled resolver built: {compiled}")
    print(
        f"objects loaded: {len(data['loaded'])}, missing libraries: {len(ldd_missing)}, "
        f"undefined symbols: {len(ldd_undefined)}, verdicts agree: {agree}"
    )
    print(f"npudoctor libs  median {ours_ms:7.1f} ms  (min {min(ours) * 1000:.1f}, runs {args.runs})")
    print(f"ldd -r          median {ldd_ms:7.1f} ms  (min {min(theirs) * 1000:.1f}, runs {args.runs})")
    print(f"ratio npudoctor / ldd -r: {ours_ms / ldd_ms:.2f}x (target <= 2x)")
    print(f"context: python -c pass {bare_ms:.1f} ms; npudoctor --version {version_ms:.1f} ms (start-up floor)")
    print(f"context: without the compiled resolver (NPUDOCTOR_PURE_PYTHON=1) {pure_ms:.1f} ms")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
