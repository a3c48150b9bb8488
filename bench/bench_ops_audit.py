#!/usr/bin/env python3
"""What the operator audit costs: one training step of a model under ``OpAudit`` against the same step plain.

Models: the reference tiny CLIP (train-step's), and the three blocks the tests build from plain torch modules
(a ResNet basic block, a GPT-style encoder layer, an LSTM tagger). Each step is warmed (optimizer state, the
audit's first dispatch), then plain and audited steps alternate ``--runs`` times; medians are compared. Also the
whole command (``npudoctor ops audit -- SCRIPT``: child start-up, torch import, judging) against ``python SCRIPT``.

    python bench/bench_ops_audit.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def steps() -> dict:
    from npudoctor.workload import opaudit as reference
    from tests import test_ops_audit as models

    torch = models.torch
    from npudoctor.workload import clip, train
    from npudoctor.workload.data import SyntheticPairs

    options = train.TrainOptions(device="cpu", model="tiny", batch=4, steps=1)
    model, config = train.make_model(options)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr)
    data = SyntheticPairs(config, length=4, seed=0, classes=64)
    pairs = [data[i] for i in range(4)]
    images, tokens = torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])

    def clip_step() -> None:
        logits, *_ = model(images, tokens)
        loss = clip.clip_loss(logits)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    clip_step()
    del reference
    return {"tiny CLIP": clip_step, **{name: make() for name, make in models.MODELS.items()}}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from npudoctor.ops import judge, oplist
    from npudoctor.ops.recorder import OpAudit, warm_up

    warm_up()
    op_list = oplist.read_shipped("2.14.0")
    print(f"{'model':<14}{'operators':>10}{'calls':>8}{'plain ms':>10}{'audited ms':>12}{'ratio':>7}{'us/call':>9}")
    for name, step in steps().items():
        plain, audited = [], []
        calls = operators = 0
        for _ in range(args.runs):
            started = time.perf_counter()
            step()
            plain.append(time.perf_counter() - started)
            audit = OpAudit()
            started = time.perf_counter()
            with audit:
                step()
            audited.append(time.perf_counter() - started)
            calls = audit.recorder.calls
            operators = len(judge.judge(audit.recording, op_list).ops)
        p, a = statistics.median(plain), statistics.median(audited)
        print(f"{name:<14}{operators:>10}{calls:>8}{p * 1000:>10.1f}{a * 1000:>12.1f}{a / p:>7.1f}"
              f"{(a - p) / max(calls, 1) * 1e6:>9.1f}")
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "step.py"
        script.write_text("import torch\nm = torch.nn.Linear(64, 64)\nx = torch.randn(8, 64)\n"
                          "m(x).sum().backward()\n", encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        times = {"python SCRIPT": [], "npudoctor ops audit -- SCRIPT": []}
        for _ in range(max(3, args.runs // 2)):
            for label, argv in (("python SCRIPT", [sys.executable, str(script)]),
                                ("npudoctor ops audit -- SCRIPT", [sys.executable, "-m", "npudoctor", "ops", "audit",
                                                                   "--format", "json", "--", str(script)])):
                started = time.perf_counter()
                subprocess.run(argv, env=env, capture_output=True, check=True, timeout=600)
                times[label].append(time.perf_counter() - started)
        for label, values in times.items():
            print(f"{label:<32} {statistics.median(values):.2f} s (median of {len(values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
