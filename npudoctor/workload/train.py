"""The reference CLIP training step: train, record memory per step, judge leaks, loss and numerics.

``run(TrainOptions(...)) -> TrainResult``: no printing (the CLI renders), torch imported inside functions.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

from npudoctor.workload import leak as leak_verdict
from npudoctor.workload.clip import CONFIGS, ClipConfig
from npudoctor.workload.device import Device

PRECISIONS = ("fp32", "bf16", "fp16")
FP16_MAX = 65504.0
CLIP_GRAD_NORM = 1.0  # keeps the short, high-learning-rate reference run free of loss spikes

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3}


def parse_leak(text: str) -> Union[int, str]:
    """``--inject-leak`` value: ``graph`` or a size (``1MiB``, ``512KiB``, ``1048576``).

    >>> parse_leak("1MiB"), parse_leak("512 kib"), parse_leak("2000"), parse_leak("graph")
    (1048576, 524288, 2000, 'graph')
    """
    value = text.strip().lower()
    if value == "graph":
        return "graph"
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?", value)
    if not match or (match.group(2) or "") not in _UNITS:
        raise ValueError(f"{text!r}: expected 'graph' or a size such as 1MiB, 512KiB, 1048576")
    size = int(float(match.group(1)) * _UNITS[match.group(2) or ""])
    if not 0 < size <= 1 << 32:
        raise ValueError(f"{text!r}: the size must be between 1 byte and 4 GiB per step")
    return size


@dataclass
class TrainOptions:
    device: str = "auto"
    model: str = "tiny"
    batch: int = 32
    steps: int = 50
    precision: str = "fp32"
    workers: int = 0
    log: Optional[str] = None
    weights: Optional[str] = None
    seed: int = 0
    inject_leak: Union[int, str, None] = None
    lr: float = 5e-4
    leak_settings: Optional[leak_verdict.LeakSettings] = None
    loss_drop_min: float = 0.1  # the loss must fall by this fraction (mean of the last fifth vs the first)


@dataclass
class Overflow:
    step: int
    tensor: str  # "logits", "logit_scale", "image features", "text features", "loss"
    cause: str


@dataclass
class TrainResult:
    device: str
    device_reason: str
    model: str
    config: Dict[str, int]
    precision: str
    steps: int
    losses: List[Optional[float]]
    loss_fell: Optional[bool]  # None: too few steps to judge
    loss_first: Optional[float]
    loss_last: Optional[float]
    step_s_median: Optional[float]
    data_wait_fraction: Optional[float]
    verdict: leak_verdict.LeakVerdict
    log: Optional[str]
    overflows: List[Overflow] = field(default_factory=list)
    skipped_steps: int = 0  # fp16 steps the GradScaler skipped (inf/nan gradients)
    inject_leak: Union[int, str, None] = None
    interrupted: bool = False  # Ctrl-C stopped the run: ``steps`` were recorded of those asked for
    # CPU-fallback warnings the run printed: [{"op", "first_step", "count"}] (workload.fallbacks)
    cpu_fallbacks: List[Dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("verdict", "overflows")}
        data["verdict"] = self.verdict.to_dict()
        data["overflows"] = [o.__dict__ for o in self.overflows]
        return {"schema": "npudoctor.train/1", **data}


MIN_STEPS_TO_JUDGE_LOSS = 20  # fewer steps: the tiny CLIP is still leaving chance level; no verdict


def loss_fell(losses: List[Optional[float]], min_drop: float, chance: Optional[float] = None) -> Optional[bool]:
    """The mean loss of the last fifth of the steps is ``min_drop`` below that of the first fifth, and below
    chance (``ln(batch)``: an InfoNCE that only learned to make every pair alike sits there); all finite.
    None (no verdict) for fewer than ``MIN_STEPS_TO_JUDGE_LOSS`` steps.

    >>> loss_fell([3.0, 2.9, 2.8, 2.77, 2.77, 2.77, 2.77, 2.77, 2.77, 2.77] * 2, 0.1, chance=2.77)
    False
    >>> loss_fell([3.0, 2.9, 2.8, 2.5, 2.2, 2.0, 1.6, 1.2, 0.9, 0.8] * 2, 0.1, chance=2.77)
    True
    >>> loss_fell([3.0, 1.0], 0.1) is None
    True
    """
    if len(losses) < MIN_STEPS_TO_JUDGE_LOSS:
        return None
    if any(v is None for v in losses):
        return False
    finite = [float(v) for v in losses if v is not None]
    fifth = max(1, len(finite) // 5)
    first, last = sum(finite[:fifth]) / fifth, sum(finite[-fifth:]) / fifth
    reference = first if chance is None else min(first, chance)
    return last < reference * (1 - min_drop)


def make_model(options: TrainOptions) -> Any:
    """(model, config) on the CPU, fp32, seeded; from ``--weights`` when given."""
    import torch

    from npudoctor.workload import clip

    torch.manual_seed(options.seed)
    if options.weights:
        return clip.model_from_weights(options.weights)
    config: ClipConfig = CONFIGS[options.model]
    return clip.build_model(config), config


def autocast(device: Device, precision: str) -> Any:
    import contextlib

    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.kind, dtype=dtype)


def grad_scaler(device: Device, precision: str) -> Any:
    """A GradScaler for fp16 (None otherwise): torch.amp's, or torch_npu's older ``torch.npu.amp``."""
    import torch

    if precision != "fp16":
        return None
    try:
        return torch.amp.GradScaler(device.kind)
    except Exception:
        module = getattr(torch, device.kind, None)
        return module.amp.GradScaler() if module is not None and hasattr(module, "amp") else None


def diagnose_overflow(step: int, precision: str, logits: Any, image: Any, text: Any, scale: Any,
                      logit_scale_param: Any) -> Optional[Overflow]:
    """Which tensor went inf/nan first (in the order data flows), and why."""
    import torch

    if not bool(torch.isfinite(logit_scale_param).all()):
        return Overflow(step, "logit_scale", "the learnable temperature became non-finite: a non-finite gradient "
                        "reached it (fp16 without loss scaling, or a learning rate too high)")
    half = precision == "fp16"
    for name, tensor in (("image features", image), ("text features", text)):
        if not bool(torch.isfinite(tensor).all()):
            cause = ("fp16 activations overflowed (beyond 65504) inside the encoder; train in bf16 or keep "
                     "LayerNorm/softmax in fp32") if half else "non-finite activations inside the encoder"
            return Overflow(step, name, cause)
    if not bool(torch.isfinite(scale).all()):
        return Overflow(step, "logit_scale", "exp(logit_scale) overflowed: clamp the scale at 100 before exp's "
                        "result is used")
    if not bool(torch.isfinite(logits).all()):
        cause = (f"logits beyond fp16's range ({FP16_MAX:g}): the scale was not clamped at 100 or features "
                 "were not normalised") if half else "non-finite logits"
        return Overflow(step, "logits", cause)
    return None


ProgressFn = Callable[[int, int, Optional[float], float], None]


def run(options: TrainOptions, device: Device, progress: Optional[ProgressFn] = None) -> TrainResult:
    """Train ``options.steps`` steps on ``device``; record memlog/2 to ``options.log`` (or a temporary file)."""
    import os
    import tempfile

    import torch

    from npudoctor.workload import clip
    from npudoctor.workload.data import SyntheticPairs
    from npudoctor.workload.memlog import read_records
    from npudoctor.workload.recorder import MemoryRecorder

    if options.precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}")
    model, config = make_model(options)
    dev = device.torch_device()
    model = model.to(dev)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.0)
    scaler = grad_scaler(device, options.precision)
    dataset = SyntheticPairs(config, length=options.steps * options.batch, seed=options.seed,
                             classes=max(64, options.batch))
    loader: Any = torch.utils.data.DataLoader(
        dataset,  # type: ignore[arg-type]  # a map-style dataset without torch's base class
        batch_size=options.batch, shuffle=False, num_workers=options.workers, drop_last=True,
        # Pinned host memory only for CUDA: torch_npu releases differ in how DataLoader pins for the NPU.
        pin_memory=device.kind == "cuda", persistent_workers=False,
        generator=torch.Generator().manual_seed(options.seed))

    temporary = None
    log_path = options.log
    if log_path is None:
        handle, temporary = tempfile.mkstemp(prefix="npudoctor-memlog-", suffix=".jsonl")
        os.close(handle)
        log_path = temporary
    from npudoctor.workload.fallbacks import FallbackWatch

    watch = FallbackWatch()  # torch_npu prints its CPU-fallback warnings to fd 2 from C++
    recorder = MemoryRecorder(log_path, device, fallbacks=watch)
    kept: List[Any] = []  # what --inject-leak keeps alive
    losses: List[Optional[float]] = []
    step_times: List[float] = []
    waits: List[float] = []
    overflows: List[Overflow] = []
    skipped = 0
    retain_graph = options.inject_leak == "graph"
    interrupted = False
    watch.start()
    try:
        try:
            iterator = iter(loader)
            last = time.perf_counter()
            for step in range(options.steps):
                images, tokens = next(iterator)
                got_batch = time.perf_counter()
                images = images.to(dev, non_blocking=True)
                tokens = tokens.to(dev, non_blocking=True)
                with autocast(device, options.precision):
                    logits, image, text, scale = model(images, tokens)
                loss = clip.clip_loss(logits)
                optimizer.zero_grad(set_to_none=True)
                if scaler is not None:
                    scaler.scale(loss).backward(retain_graph=retain_graph)
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_GRAD_NORM)
                    before = scaler.get_scale()
                    scaler.step(optimizer)
                    scaler.update()
                    skipped += int(scaler.get_scale() < before)
                else:
                    loss.backward(retain_graph=retain_graph)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_GRAD_NORM)
                    optimizer.step()
                clip.clamp_logit_scale(model)
                if retain_graph:
                    kept.append(loss)  # the classic mistake: the loss kept with its (retained) graph
                elif isinstance(options.inject_leak, int):
                    kept.append(torch.ones(options.inject_leak, dtype=torch.uint8, device=dev))
                loss_value = float(loss.detach().float().item())  # synchronises the device
                if not math.isfinite(loss_value) or not math.isfinite(float(scale.detach().float().item())):
                    found = diagnose_overflow(step, options.precision, logits.detach(), image.detach(), text.detach(),
                                              scale.detach(), model.logit_scale.detach())
                    overflows.append(found or Overflow(step, "loss", "non-finite loss"))
                now = time.perf_counter()
                wait, step_s = got_batch - last, now - last
                losses.append(loss_value if math.isfinite(loss_value) else None)
                step_times.append(step_s)
                waits.append(wait)
                recorder.record(step, step_s=step_s, data_wait_s=wait, loss=loss_value,
                                logit_scale=float(scale.detach().float().item()))
                if progress is not None:
                    progress(step, options.steps, losses[-1], step_s)
                last = time.perf_counter()  # the recorder's and the progress line's time is no step's data wait
        except KeyboardInterrupt:
            # Ctrl-C: stop and judge the steps recorded so far, as `prof run` analyses what a stopped run left
            interrupted = True
        recorder.close()
        records = read_records(log_path)
    finally:
        recorder.close()
        watch.stop()
        kept.clear()
        if temporary is not None:
            os.unlink(temporary)
    verdict = leak_verdict.analyze(records, options.leak_settings)
    finite = [v for v in losses if v is not None]
    total = sum(step_times)
    return TrainResult(
        device=device.name, device_reason=device.reason, model="weights" if options.weights else options.model,
        config=config.to_dict(), precision=options.precision, steps=len(losses), losses=losses,
        loss_fell=loss_fell(losses, options.loss_drop_min, chance=math.log(options.batch)),
        loss_first=finite[0] if finite else None,
        loss_last=finite[-1] if finite else None,
        step_s_median=statistics.median(step_times[1:] or step_times) if step_times else None,
        data_wait_fraction=(sum(waits[1:]) / sum(step_times[1:])) if len(step_times) > 1 and total else None,
        verdict=verdict, log=options.log, overflows=overflows, skipped_steps=skipped,
        inject_leak=options.inject_leak, interrupted=interrupted,
        cpu_fallbacks=watch.table())
