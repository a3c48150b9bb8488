#!/usr/bin/env python3
"""Record the leak-verdict corpus: real training loops on CPU torch, each with a MemoryMonitor, clean and leaking.

Each run is a fresh child process (malloc's state from earlier runs would hide or fake growth), one torch thread,
a small MLP (or the tiny CLIP that ``train-step`` trains), a real DataLoader. Clean runs: fixed and variable batch,
DataLoader workers, gc churn, evaluation passes, checkpointing, a bounded cache, a transient that grows and is
freed. Leaks: kept losses, kept logits, kept graphs (``retain_graph``, ``create_graph``), kept autograd outputs,
a feature bank, an input cache, a Dataset cache with and without workers, a slow 16 KiB/step leak.

The logs are thinned for the repository: only the memory keys are kept (every step). Each file starts with
``#`` lines saying how it was made (the memlog reader skips them); ``index.json`` lists the runs with what each
keeps per step by construction.

    python bench/leak_corpus.py --out tests/data/leak_corpus [--steps 300] [--seeds 0 1] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

#: name -> (leaks?, what it keeps per step by construction, bytes kept per step by construction or None)
RUNS: Dict[str, Any] = {
    "clean_fixed": (False, "nothing (batch 64)", 0),
    "clean_variable": (False, "nothing (batch 16..256, random per step)", 0),
    "clean_workers": (False, "nothing (2 DataLoader workers)", 0),
    "clean_workers_variable": (False, "nothing (2 workers, variable batch)", 0),
    "clean_gc_churn": (False, "nothing (20k short-lived objects in cycles per step, gc.collect every 10)", 0),
    "clean_eval": (False, "nothing (an evaluation pass of 8 batches every 40 steps)", 0),
    "clean_checkpoint": (False, "nothing (a checkpoint of model and optimizer every 50 steps)", 0),
    "clean_bounded_cache": (False, "nothing after 32 steps (an LRU cache of the last 32 input batches)", 0),
    "clean_transient": (False, "nothing (64 KiB/step kept from step 60 to 140, then freed)", 0),
    "clean_clip": (False, "nothing (the tiny CLIP of train-step, batch 16)", 0),
    "leak_kept_losses": (True, "losses.append(loss): the loss and its autograd nodes", None),
    "leak_kept_logits": (True, "kept.append(logits): batch x 1000 float32 with its graph", 64 * 1000 * 4),
    "leak_retain_graph": (True, "backward(retain_graph=True) + kept.append(loss): every saved activation", None),
    "leak_create_graph": (True, "backward(create_graph=True) + kept.append(last bias .grad): the gradient with "
                                "its double-backward graph", None),
    "leak_kept_outputs": (True, "kept.append(hidden): the first layer's output with its graph", 64 * 1024 * 4),
    "leak_feature_bank": (True, "bank.append(features.detach().clone()): batch x 256 float32", 64 * 256 * 4),
    "leak_input_cache": (True, "cache[step] = inputs: the batch from the loader", 64 * 256 * 4),
    "leak_dataset_cache": (True, "Dataset.__getitem__ caches each sample (no workers)", 64 * (256 * 4 + 8)),
    "leak_dataset_cache_workers": (True, "Dataset.__getitem__ caches each sample in 2 workers", 64 * (256 * 4 + 8)),
    "leak_python_objects": (True, "kept.append([float(i) for i in range(2048)]): Python floats in pymalloc "
                                  "arenas, outside malloc", 2048 * 32 + 56),
    "leak_variable_64k": (True, "variable batch (16..256) + kept.append(torch.ones(65536, uint8)): a leak under "
                                "in-use noise", 65536),
    "leak_slow_16k": (True, "kept.append(torch.ones(16384, uint8)): 16 KiB/step", 16384),
    "leak_clip_graph": (True, "train-step --inject-leak graph: the tiny CLIP's loss with its retained graph", None),
}

KEEP_KEYS = ("schema", "run", "step", "device", "rss_bytes", "workers_rss_bytes", "workers", "malloc_in_use_bytes",
             "malloc_held_bytes", "host_total_bytes", "allocated_bytes", "reserved_bytes", "inactive_split_bytes")


class Pairs:
    """Inputs 256 wide, 1000 classes, from a fixed pool (plus a copy, so each sample is a new tensor)."""

    def __init__(self, length: int, seed: int, cache: bool = False) -> None:
        self.length, self.seed, self.cache_samples = length, seed, cache
        self.pool: Any = None
        self.cache: Dict[int, Any] = {}

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Any:
        import torch

        if self.pool is None:
            gen = torch.Generator().manual_seed(self.seed)
            self.pool = torch.randn(512, 256, generator=gen)
        x = self.pool[index % 512] * 1.0
        y = (index * 7919) % 1000
        if self.cache_samples:
            self.cache[index] = (x, y)  # the classic Dataset cache: every sample ever loaded stays
        return x, y


class VariableBatches:
    def __init__(self, steps: int, seed: int, low: int, high: int) -> None:
        import random

        rng = random.Random(seed)
        self.sizes = [rng.randint(low, high) for _ in range(steps)] if low != high else [low] * steps

    def __iter__(self) -> Any:
        start = 0
        for size in self.sizes:
            yield list(range(start, start + size))
            start += size

    def __len__(self) -> int:
        return len(self.sizes)


def one_run(name: str, seed: int, steps: int, path: str) -> Dict[str, Any]:
    import gc

    import torch

    from npudoctor.monitor import MemoryMonitor

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    if name.startswith(("clean_clip", "leak_clip")):
        return clip_run(name, seed, steps, path)
    variable = "variable" in name
    workers = 2 if "workers" in name else 0
    sizes = VariableBatches(steps + 40, seed, 16, 256) if variable else VariableBatches(steps + 40, seed, 64, 64)
    dataset = Pairs(sum(sizes.sizes), seed, cache=name.startswith("leak_dataset_cache"))
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sizes, num_workers=workers,  # type: ignore
                                         persistent_workers=workers > 0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 1000))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kept: List[Any] = []
    cache: Dict[Any, Any] = {}
    saved_bytes: List[int] = []
    iterator = iter(loader)
    with MemoryMonitor(path, device="cpu") as monitor:
        for step in range(steps):
            x, y = next(iterator)
            monitor.batch_ready()
            create_graph = name == "leak_create_graph"
            retain = name == "leak_retain_graph"
            if retain:
                storages: Dict[int, int] = {}
                weights = {p.untyped_storage().data_ptr() for p in model.parameters()}

                def pack(t: Any, storages: Dict[int, int] = storages, weights: Any = weights) -> Any:  # weights aside
                    if t.untyped_storage().data_ptr() not in weights:
                        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
                    return t

                with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    hidden = model[1](model[0](x))
                    logits = model[4](model[3](model[2](hidden)))
                    loss = torch.nn.functional.cross_entropy(logits, y)
                saved_bytes.append(sum(storages.values()))
            else:
                hidden = model[1](model[0](x))
                logits = model[4](model[3](model[2](hidden)))
                loss = torch.nn.functional.cross_entropy(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward(retain_graph=retain, create_graph=create_graph)
            optimizer.step()
            if create_graph:
                # (Without a kept gradient, create_graph=True does not leak in torch 2.x: zero_grad(set_to_none)
                # drops the grad that closes the param <-> grad cycle; measured: +20 KiB in 300 steps.)
                kept.append(model[4].bias.grad)
            if name in ("leak_kept_losses", "leak_retain_graph"):
                kept.append(loss)
            elif name == "leak_kept_logits":
                kept.append(logits)
            elif name == "leak_kept_outputs":
                kept.append(hidden)
            elif name == "leak_feature_bank":
                kept.append(torch.nn.functional.normalize(hidden, dim=1)[:, :256].detach().clone())
            elif name == "leak_input_cache":
                cache[step] = x
            elif name == "leak_python_objects":
                kept.append([float(i) for i in range(2048)])
            elif name == "leak_variable_64k":
                kept.append(torch.ones(65536, dtype=torch.uint8))
            elif name == "leak_slow_16k":
                kept.append(torch.ones(16384, dtype=torch.uint8))
            elif name == "clean_gc_churn":
                junk = []
                for i in range(20000):
                    node: Dict[str, Any] = {"i": i}
                    node["self"] = node  # a cycle: only the collector frees it
                    junk.append(node)
                del junk
                if step % 10 == 0:
                    gc.collect()
            elif name == "clean_eval" and step % 40 == 39:
                model.eval()
                with torch.no_grad():
                    for _ in range(8):
                        model(torch.randn(128, 256))
                model.train()
            elif name == "clean_checkpoint" and step % 50 == 49:
                import io

                buffer = io.BytesIO()
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
                del buffer
            elif name == "clean_bounded_cache":
                cache[step] = x.clone()
                if len(cache) > 32:
                    del cache[min(cache)]
            elif name == "clean_transient":
                if 60 <= step < 140:
                    kept.append(torch.ones(65536, dtype=torch.uint8))
                elif step == 140:
                    kept.clear()
            monitor.step(loss=float(loss.detach()))
    return {"saved_bytes_per_step": (sum(saved_bytes) / len(saved_bytes)) if saved_bytes else None}


def clip_run(name: str, seed: int, steps: int, path: str) -> Dict[str, Any]:
    """The tiny CLIP exactly as ``train-step`` trains it (through its engine), its log written by its recorder."""
    from npudoctor.workload import device, train

    options = train.TrainOptions(device="cpu", steps=steps, batch=16, seed=seed, log=path,
                                 inject_leak="graph" if name == "leak_clip_graph" else None)
    train.run(options, device.select_device("cpu"))
    return {}


def thin(lines: List[str]) -> List[str]:
    out = []
    for line in lines:
        record = json.loads(line)
        out.append(json.dumps({k: record.get(k) for k in KEEP_KEYS if record.get(k) is not None},
                              separators=(",", ":")))
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="tests/data/leak_corpus")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--child", nargs=3, metavar=("NAME", "SEED", "LOG"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, seed, log = args.child
        print(json.dumps(one_run(name, int(seed), args.steps, log)))
        return 0
    os.makedirs(args.out, exist_ok=True)
    index_path = os.path.join(args.out, "index.json")
    index: Dict[str, Any] = {"runs": []}
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as handle:
            index = json.load(handle)
    index["runs"] = [r for r in index["runs"] if not args.only or r["name"] not in args.only]
    import torch

    for name in args.only or list(RUNS):
        leaks, kept, kept_bytes = RUNS[name]
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as tmp:
                log = os.path.join(tmp, "mem.jsonl")
                started = time.time()
                proc = subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--child", name,
                                       str(seed), log], capture_output=True, text=True, timeout=900,
                                      env={**os.environ, "OMP_NUM_THREADS": "1"})
                if proc.returncode:
                    print(proc.stderr[-2000:], file=sys.stderr)
                    return 1
                extra = json.loads(proc.stdout.strip().splitlines()[-1])
                with open(log, encoding="utf-8") as handle:
                    lines = thin(handle.read().splitlines())
            file_name = f"{name}_seed{seed}.jsonl.gz"
            header = [f"# source: recorded on the development VM (2 shared cores, torch {torch.__version__} CPU, "
                      f"glibc) on {time.strftime('%Y-%m-%d', time.gmtime())} by `python bench/leak_corpus.py "
                      f"--steps {args.steps}`",
                      f"# what: {name}, seed {seed}: {kept}",
                      "# note: RECORDED HERE, not on an Ascend node; thinned to the memory keys"]
            with gzip.open(os.path.join(args.out, file_name), "wt", encoding="utf-8") as out:
                out.write("\n".join(header + lines) + "\n")
            index["runs"].append({"name": name, "seed": seed, "file": file_name, "leak": leaks, "kept": kept,
                                  "kept_bytes_per_step": kept_bytes if kept_bytes is not None
                                  else extra.get("saved_bytes_per_step"), "steps": len(lines)})
            print(f"{name} seed {seed}: {len(lines)} steps in {time.time() - started:.1f} s", file=sys.stderr)
    index["runs"].sort(key=lambda r: (r["name"], r["seed"]))
    with open(index_path, "w", encoding="utf-8") as handle:
        json.dump(index, handle, indent=1)
        handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
