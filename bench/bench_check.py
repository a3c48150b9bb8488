#!/usr/bin/env python3
"""Wall time of `npudoctor check` against `python -m torch.utils.collect_env`, measured in one run, and on a
fake 8-NPU node against its slowest probe.

1. This machine: collect_env is what people run today to describe a PyTorch node; npudoctor must answer much
   more in at most a tenth of its time. Here (no NPU) most checks skip, so this is the friendly case.
2. A fake Atlas 800T A2 (8x910B3, tests/nodes.py: real npu-smi capture, sysfs, driver, CANN, python) under
   ``--root``, whose npu-smi answers after ``--npu-smi-latency`` seconds (a real 8x910B3 takes about 5 s;
   the default is scaled down to 1 s to keep the bench short: npu-smi runs beside the other probes, so the
   overhead does not depend on it). Every check runs; what counts is npudoctor's time beyond its slowest
   probe (the fake npu-smi run alone), printed as overhead in ms.

Both sides run as fresh processes (start-up included), alternately, N times each; medians are compared.

    python bench/bench_check.py [--runs 5] [--root DIR] [--npu-smi-latency 1.0] [--skip-reference]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence


def run_quietly(argv: Sequence[str], env: Optional[Dict[str, str]] = None) -> None:
    """Run ``argv`` to its end, output discarded, killed after 600 s.

    Not ``subprocess.run(..., timeout=)``: with no pipe to read, ``Popen.wait(timeout)`` polls with sleeps
    that double up to 50 ms, so a 115 ms command measured 164 ms (the wait wakes at 113.5, then 163.5 ms).
    A timer kills the child instead and the wait blocks until the exact exit.
    """
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watchdog = threading.Timer(600, proc.kill)
    watchdog.start()
    try:
        proc.wait()
    finally:
        watchdog.cancel()


def wall_times(argv: Sequence[str], runs: int, terminal: bool = False) -> List[float]:
    """Wall times of ``argv``; with ``terminal``, its stdout and stderr are a pseudo-terminal (as a person
    runs it: colour, streamed stages and the progress spinner on)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        if terminal:
            _run_on_terminal(argv)
        else:
            run_quietly(argv)
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
    proc.wait()  # it closed the terminal: it is exiting (a timeout here would poll, see run_quietly)


def fake_node_overhead(runs: int, latency_s: float) -> None:
    """Case 2: `check --root` on a fake 8x910B3 node whose npu-smi sleeps ``latency_s``, against that npu-smi
    alone (the slowest probe)."""
    import os
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ builds the node
    from tests.fakenode import FakeNode
    from tests.nodes import B3_8CARD, healthy_910b_node
    from tests.samples import sample_text

    with tempfile.TemporaryDirectory(prefix="bench-check-node-") as folder:
        node = healthy_910b_node(FakeNode(Path(folder)))
        node.command("npu-smi", stdout=sample_text(B3_8CARD), sleep_s=latency_s)
        env = {**os.environ, **node.env}
        check = [sys.executable, "-m", "npudoctor", "check", "--root", str(node.root), "--format", "json"]
        probe = [str(node.bin / "npu-smi"), "info"]

        def timed(argv: List[str]) -> float:
            started = time.perf_counter()
            run_quietly(argv, env)
            return time.perf_counter() - started

        timed(check), timed(probe)  # warm-up
        ours, slowest = [], []
        for _ in range(runs):
            ours.append(timed(check))
            slowest.append(timed(probe))
    ours_median, slowest_median = statistics.median(ours), statistics.median(slowest)
    print(f"fake 8x910B3 node (--root), npu-smi latency {latency_s:g} s (a real one: ~5 s)")
    print(f"  npudoctor check (every check runs)  median {ours_median * 1000:8.1f} ms  (runs: {runs})")
    print(f"  its slowest probe, npu-smi alone    median {slowest_median * 1000:8.1f} ms")
    print(f"  overhead beyond the slowest probe   {(ours_median - slowest_median) * 1000:8.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--root", help="run npudoctor check --root DIR (a fake node) instead of this machine")
    parser.add_argument("--npu-smi-latency", type=float, default=1.0, help="seconds the fake npu-smi takes")
    parser.add_argument("--skip-reference", action="store_true", help="only the fake-node case")
    args = parser.parse_args()
    if args.skip_reference:
        fake_node_overhead(args.runs, args.npu_smi_latency)
        return 0
    # Found, not imported: a bench process holding torch (its threads, ~400 MiB mapped) slowed every child it
    # started by ~85 ms here (check measured 200 ms instead of 115 ms).
    from importlib.util import find_spec

    if find_spec("torch") is None:
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
    fake_node_overhead(args.runs, args.npu_smi_latency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
