#!/usr/bin/env python3
"""The memory recorder's cost per step, and the leak detector's figures, measured in one run.

1. Overhead: the tiny CLIP training loop with a memlog/1 line recorded per step against the same loop
   without it, in interleaved blocks (so machine load hits both alike); medians and their ratio
   (target: under 2% for the tiny model, the worst case: the smaller the step, the larger the share).
2. Detection: a fresh ``npudoctor train-step --inject-leak 1MiB`` (and ``graph``) process records a log;
   the verdict is computed on every prefix of it: the first step count from which the leak is found.
3. False positives: clean runs over N seeds (in one process), each judged after ``--steps`` steps.

    python bench/bench_train.py [--blocks 6] [--block-steps 20] [--clean-runs 20] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, List, Optional


def overhead(blocks: int, block_steps: int) -> None:
    import torch

    from npudoctor.workload import clip
    from npudoctor.workload.data import SyntheticPairs
    from npudoctor.workload.device import select_device
    from npudoctor.workload.recorder import MemoryRecorder

    device = select_device("cpu")
    torch.manual_seed(0)
    config = clip.CONFIGS["tiny"]
    model = clip.build_model(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    data = SyntheticPairs(config, length=32)
    images = torch.stack([data[i][0] for i in range(32)])
    tokens = torch.stack([data[i][1] for i in range(32)])

    def step() -> float:
        loss = clip.clip_loss(model(images, tokens)[0])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return float(loss.item())

    with tempfile.TemporaryDirectory() as tmp:
        recorder = MemoryRecorder(os.path.join(tmp, "mem.jsonl"), device)
        plain: List[float] = []
        recorded: List[float] = []
        record_calls: List[float] = []
        for _ in range(3):
            step()  # warm-up
        for block in range(blocks * 2):
            with_recorder = block % 2 == 1
            for i in range(block_steps):
                started = time.perf_counter()
                loss = step()
                if with_recorder:
                    before = time.perf_counter()
                    recorder.record(i, step_s=0.0, data_wait_s=0.0, loss=loss, logit_scale=1.0)
                    record_calls.append(time.perf_counter() - before)
                (recorded if with_recorder else plain).append(time.perf_counter() - started)
        recorder.close()
    base, rec = statistics.median(plain), statistics.median(recorded)
    call = statistics.median(record_calls)
    print(f"overhead: tiny CLIP step {base * 1e3:.2f} ms without, {rec * 1e3:.2f} ms with the recorder "
          f"(ratio {rec / base:.3f}); one record() call {call * 1e6:.0f} us = {call / base * 100:.2f}% of a step "
          f"({len(plain)} + {len(recorded)} steps)")


def detection(leak: str, steps: int) -> Optional[int]:
    from npudoctor.workload import leak as leaks
    from npudoctor.workload.memlog import read_records

    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "mem.jsonl")
        subprocess.run([sys.executable, "-m", "npudoctor", "train-step", "--device", "cpu", "--steps", str(steps),
                        "--batch", "8", "--inject-leak", leak, "--log", log, "--format", "json"],
                       capture_output=True, text=True, timeout=900, check=False)
        records = read_records(log)
    first: Optional[int] = None
    for n in range(2, len(records) + 1):
        found = leaks.analyze(records[:n]).leak
        if found and first is None:
            first = n
        elif not found:
            first = None  # found only from here on, for every longer prefix
    return first


def false_positives(runs: int, steps: int) -> List[Any]:
    from npudoctor.workload import device, train

    cpu = device.select_device("cpu")
    flagged = []
    for seed in range(runs):
        result = train.run(train.TrainOptions(device="cpu", steps=steps, batch=8, seed=seed), cpu)
        if result.verdict.leak:
            flagged.append((seed, result.verdict.summary))
    return flagged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--block-steps", type=int, default=20)
    parser.add_argument("--clean-runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is not installed: pip install 'npudoctor[train]'", file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # a shared 2-core machine: one thread keeps the figures steadier
    print(f"machine: {os.cpu_count()} cores, torch {torch.__version__}, cpu only (no GPU or NPU here)")
    overhead(args.blocks, args.block_steps)
    for leak in ("1MiB", "graph"):
        first = detection(leak, 60)
        print(f"detection: --inject-leak {leak}: found from step {first} on (of 60; cpu RSS)"
              if first else f"detection: --inject-leak {leak}: not found within 60 steps")
    flagged = false_positives(args.clean_runs, args.steps)
    print(f"false positives: {len(flagged)} of {args.clean_runs} clean runs ({args.steps} steps each)"
          + (": " + json.dumps(flagged) if flagged else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
