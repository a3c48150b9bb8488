#!/usr/bin/env python3
"""Wall time of `npudoctor check` against `python -m torch.utils.collect_env`, measured in one run.

collect_env is what people run today to describe a PyTorch node; npudoctor must answer much more in at most a
tenth of its time. Both run as fresh processes (start-up included), alternately, N times each; medians and
their ratio are printed.

    python bench/bench_check.py [--runs 5] [--root DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import List, Sequence


def wall_times(argv: Sequence[str], runs: int, terminal: bool = False) -> List[float]:
    """Wall times of ``argv``; with ``terminal``, its stdout and stderr are a pseudo-terminal (as a person
    runs it: colour, streamed stages and the progress spinner on)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        if terminal:
            _run_on_terminal(argv)
        else:
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, check=False)
        times.append(time.perf_counter() - started)
    return times


def _run_on_terminal(argv: Sequence[str]) -> None:
    import os
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    while True:
        try:
            if not os.read(master, 65536):
                break
        except OSError:  # EIO: the child closed the terminal
            break
    os.close(master)
    proc.wait(timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--root", help="run npudoctor check --root DIR (a fake node) instead of this machine")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401  (only to say clearly when the reference cannot run)
    except ImportError:
        print("reference unavailable: torch is not installed (pip install torch==2.13.0)", file=sys.stderr)
        return 2
    check = [sys.executable, "-m", "npudoctor", "check", "--format", "json"]
    text = [sys.executable, "-m", "npudoctor", "check"]
    if args.root:
        check += ["--root", args.root]
        text += ["--root", args.root]
    reference = [sys.executable, "-m", "torch.utils.collect_env"]
    # Bytecode as an installed package has it (pip compiles torch's at install; a sandbox may set
    # PYTHONDONTWRITEBYTECODE, which would make npudoctor recompile its sources at every start).
    import compileall
    from pathlib import Path

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "npudoctor"), quiet=1)
    wall_times(check, 1), wall_times(reference, 1)  # warm the page cache for both
    ours, on_terminal, theirs = [], [], []
    for _ in range(args.runs):  # interleaved so that machine noise hits all alike
        ours += wall_times(check, 1)
        on_terminal += wall_times(text, 1, terminal=True)
        theirs += wall_times(reference, 1)
    ours_median, theirs_median = statistics.median(ours), statistics.median(theirs)
    terminal_median = statistics.median(on_terminal)
    print(f"npudoctor check --format json (piped)     median {ours_median * 1000:8.1f} ms  (runs: {args.runs})")
    print(f"npudoctor check on a terminal (progress)  median {terminal_median * 1000:8.1f} ms")
    print(f"torch.utils.collect_env                   median {theirs_median * 1000:8.1f} ms")
    print(f"ratio npudoctor/collect_env = {ours_median / theirs_median:.3f} piped, "
          f"{terminal_median / theirs_median:.3f} on a terminal  (target <= 0.100)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
