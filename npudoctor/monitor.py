"""Record a ``npudoctor.memlog/2`` line per step from any training loop (npu, cuda or cpu).

Two lines in your loop::

    from npudoctor.monitor import MemoryMonitor

    with MemoryMonitor("mem.jsonl") as monitor:      # 1
        for images, labels in loader:
            loss = train_step(images, labels)
            monitor.step(loss=loss)                   # 2

or let the optimizer drive it (``MemoryMonitor("mem.jsonl", optimizer=optimizer)`` records after every
``optimizer.step()``). Then ``npudoctor leak analyze mem.jsonl`` gives the leak verdict, and
``npudoctor dashboard --follow mem.jsonl`` can follow the file while it grows (each line is flushed).

torch is imported when a monitor is made, not when this module is imported.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Optional

from npudoctor.workload.device import Device, import_torch
from npudoctor.workload.memlog import Record
from npudoctor.workload.recorder import MemoryRecorder


def _device_of(device: Any, optimizer: Any) -> Device:
    """The device to watch: given (``"npu:0"``, ``torch.device``), else the optimizer's parameters', else the
    current NPU (when torch_npu is imported) or CUDA device, else the CPU."""
    torch = import_torch()
    reason = "given"
    if device is None and optimizer is not None:
        reason = "the optimizer's parameters"
        for group in optimizer.param_groups:
            for param in group["params"]:
                device = param.device
                break
            break
    if device is None:
        reason = "current device"
        if "torch_npu" in sys.modules and torch.npu.is_available():
            device = torch.device("npu", torch.npu.current_device())
        elif torch.cuda.is_available():
            device = torch.device("cuda", torch.cuda.current_device())
        else:
            device = torch.device("cpu")
    device = torch.device(device)
    if device.type not in ("npu", "cuda", "cpu"):
        raise ValueError(f"MemoryMonitor watches npu, cuda or cpu devices, not {device.type}")
    index = device.index
    if index is None and device.type != "cpu":
        index = getattr(torch, device.type).current_device()
    return Device(device.type, index or 0, reason)


class MemoryMonitor:
    """Appends one flushed memlog/2 line per :meth:`step` (or per ``optimizer.step()`` with ``optimizer=``).

    ``loss`` may be a float or a tensor (a tensor costs one device synchronisation: ``.item()``).
    :meth:`batch_ready` (optional) marks when the next batch arrived, so the data wait is recorded too.

    ``watch_fallbacks`` (default on): torch_npu's CPU-fallback warnings are counted per operator with the step
    they first appeared at (``cpu_fallbacks`` in the log, :attr:`fallbacks` here). torch_npu prints them from C++
    to file descriptor 2, so stderr is teed through a pipe while the monitor runs (every byte still reaches it);
    ``watch_fallbacks=False`` leaves stderr alone.
    """

    def __init__(self, path: os.PathLike[str] | str, device: Any = None, optimizer: Any = None,
                 start_step: int = 0, watch_fallbacks: bool = True) -> None:
        from npudoctor.workload.fallbacks import FallbackWatch

        self.device = _device_of(device, optimizer)
        self.watch = FallbackWatch().start() if watch_fallbacks else None
        if self.watch is not None:
            self.watch.set_step(start_step)
        self.recorder = MemoryRecorder(path, self.device, fallbacks=self.watch)
        self.next_step = start_step
        self._last = time.perf_counter()
        self._batch_at: Optional[float] = None
        self._hook: Any = None
        if optimizer is not None:
            self._hook = optimizer.register_step_post_hook(lambda *_: self.step())

    @property
    def path(self) -> str:
        return self.recorder.path

    @property
    def fallbacks(self) -> list:
        """CPU-fallback warnings seen so far: ``[{"op", "first_step", "count"}]``."""
        return self.watch.table() if self.watch is not None else []

    def batch_ready(self) -> None:
        self._batch_at = time.perf_counter()

    def step(self, loss: Any = None, logit_scale: Any = None) -> Record:
        now = time.perf_counter()
        wait = (self._batch_at - self._last) if self._batch_at is not None else None
        record = self.recorder.record(self.next_step, step_s=now - self._last, data_wait_s=wait, loss=loss,
                                      logit_scale=logit_scale)
        self.next_step += 1
        self._last = time.perf_counter()
        self._batch_at = None
        return record

    def close(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.watch is not None:
            self.watch.stop()
        self.recorder.close()

    def __enter__(self) -> MemoryMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
