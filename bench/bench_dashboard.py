#!/usr/bin/env python3
"""CPU used by `npudoctor dashboard` at 1 Hz on an 8-chip replay plus a followed training log, as a share of
one core, against `watch -n1 cat TABLE` (what operators run today: `watch -n1 npu-smi info`, with the npu-smi
table printed by `cat` since this machine has no npu-smi) measured side by side in the same run.

Both run in their own tmux window of 80x24 (a real terminal: Textual draws as it does over SSH). The dashboard
plays the shipped demo (8 x 910B3, readings changing every second) and follows a memlog that a writer appends one
step to every second; its leak verdict is recomputed as the log grows. CPU is user+system time of each
program's process tree over the measured window (tmux's own drawing is not counted, for either).

    python bench/bench_dashboard.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, List

TARGET_SHARE = 0.03
PANELS = ("devices", "history", "training", "findings")
ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "data" / "samples" / "npu-smi-info_910B3_8card_24.1.0.3_no-processes_vllm-ascend-4256.txt"


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10, check=False).stdout.strip()


def tree_cpu_s(pid: int) -> float:
    """User+system seconds of ``pid`` and its live descendants (and the children they have reaped)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def start(session: str, command: str) -> int:
    tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", f"cd {shlex.quote(str(ROOT))} && {command}")
    return int(tmux("display-message", "-p", "-t", session, "#{pane_pid}"))


def writer(path: Path, stop: threading.Event, per_second: float, clock: Callable[[], float] = time.time) -> None:
    """A training job's MemoryMonitor: ``per_second`` memlog/1 lines a second, allocated memory creeping up."""
    step = 0
    with open(path, "a", encoding="utf-8") as handle:
        while not stop.is_set():
            record = {"schema": "npudoctor.memlog/1", "run": "bench", "step": step, "time_unix_s": clock(),
                      "step_s": 1.0, "data_wait_s": 0.08, "loss": 4.0 / (1 + step / 50), "device": "npu:0",
                      "allocated_bytes": (20 << 30) + step * (2 << 20), "reserved_bytes": 24 << 30,
                      "device_total_bytes": 64 << 30}
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            step += 1
            stop.wait(1.0 / per_second)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window (default a minute)")
    parser.add_argument("--warmup", type=float, default=4.0, help="seconds to let both start before measuring")
    parser.add_argument("--steps-per-second", type=float, default=1.0,
                        help="training steps the followed log grows by each second (a fast job: 20)")
    parser.add_argument("--panel", choices=PANELS, default="devices",
                        help="the panel on screen while measuring")
    args = parser.parse_args()
    for tool in ("tmux", "watch"):
        if shutil.which(tool) is None:
            print(f"cannot run: {tool} is not installed", file=sys.stderr)
            return 2
    try:
        import textual  # noqa: F401
    except ImportError:
        print("cannot run: textual is not installed (pip install 'npudoctor[tui]')", file=sys.stderr)
        return 2
    tag = uuid.uuid4().hex[:6]
    sessions: List[str] = [f"bench-dash-{tag}", f"bench-watch-{tag}"]
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "mem.jsonl"
        table = Path(tmp) / "npu-smi.txt"
        table.write_text(TABLE.read_text(encoding="utf-8").split("# ---\n", 1)[1], encoding="utf-8")
        feeder = threading.Thread(target=writer, args=(log, stop, args.steps_per_second), daemon=True)
        feeder.start()
        try:
            dashboard_pid = start(sessions[0], f"{shlex.quote(sys.executable)} -m npudoctor dashboard --demo "
                                               f"--no-check --interval 1 --follow {shlex.quote(str(log))}")
            watch_pid = start(sessions[1], f"watch -n1 cat {shlex.quote(str(table))}")
            time.sleep(args.warmup)
            if "NPU 7" not in tmux("capture-pane", "-p", "-t", sessions[0]):
                print("the dashboard did not draw; its screen:\n" + tmux("capture-pane", "-p", "-t", sessions[0]),
                      file=sys.stderr)
                return 1
            tmux("send-keys", "-t", sessions[0], str(1 + PANELS.index(args.panel)))
            time.sleep(1.0)
            before = (tree_cpu_s(dashboard_pid), tree_cpu_s(watch_pid), time.monotonic())
            time.sleep(args.seconds)
            after = (tree_cpu_s(dashboard_pid), tree_cpu_s(watch_pid), time.monotonic())
        finally:
            stop.set()
            for session in sessions:
                tmux("kill-session", "-t", session)
    wall = after[2] - before[2]
    dashboard_share = (after[0] - before[0]) / wall
    watch_share = (after[1] - before[1]) / wall
    print(f"measured {wall:.0f} s at 1 Hz, 80x24, {os.cpu_count()} cores (a noisy shared machine: repeat to see "
          "the spread)")
    print(f"npudoctor dashboard --demo (8 chips) + --follow ({args.steps_per_second:g} steps/s), {args.panel} panel: "
          f"{dashboard_share:.2%} of one core")
    print(f"reference `watch -n1 cat npu-smi-table`: {watch_share:.2%} of one core")
    ratio = dashboard_share / watch_share if watch_share > 0 else float("inf")
    print(f"ratio dashboard / watch: {ratio:.1f}x; target: dashboard under {TARGET_SHARE:.0%} of one core: "
          f"{'met' if dashboard_share < TARGET_SHARE else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
