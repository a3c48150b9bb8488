"""One memlog/2 line per step from the device's allocator, the process's RSS, its DataLoader workers' RSS and
the host C allocator (used by ``train-step`` and :class:`npudoctor.monitor.MemoryMonitor`)."""

from __future__ import annotations

import math
import os
from typing import Any, Optional

from npudoctor.workload.device import Device
from npudoctor.workload.hostmem import HostMemory, JobProcesses
from npudoctor.workload.memlog import MemlogWriter, Record


class MemoryRecorder:
    """Appends a flushed memlog/2 record per :meth:`record` call. Cheap: one ``memory_stats()`` call, one RSS
    read per process and one ``mallinfo2()`` per step (no device synchronisation; pass ``loss`` as a float to
    avoid one)."""

    def __init__(self, path: os.PathLike[str] | str, device: Device, run: Optional[str] = None,
                 fallbacks: Any = None) -> None:
        self.device = device
        self.fallbacks = fallbacks  # a workload.fallbacks.FallbackWatch: CPU-fallback warnings, per step
        self.writer = MemlogWriter(path, run=run)
        self._total = device.total_memory_bytes()
        self._process: Any = None
        self._host_total: Optional[int] = None
        try:
            import psutil

            self._process = psutil.Process()
            self._host_total = int(psutil.virtual_memory().total)
        except ImportError:  # RSS stays null; the device figures still come
            pass
        self.host = HostMemory(self._process)
        self.job = JobProcesses(self._process)

    @property
    def path(self) -> str:
        return self.writer.path

    @property
    def run(self) -> str:
        return self.writer.run

    def record(self, step: int, step_s: Optional[float] = None, data_wait_s: Optional[float] = None,
               loss: Any = None, logit_scale: Any = None) -> Record:
        rss = int(self._process.memory_info().rss) if self._process is not None else None
        fallbacks = None
        if self.fallbacks is not None:
            self.fallbacks.drain()  # what the step printed counts for this step
            fallbacks = self.fallbacks.changed()
            self.fallbacks.set_step(step + 1)
        return self.writer.write(
            step, step_s=step_s, data_wait_s=data_wait_s, loss=_number(loss), logit_scale=_number(logit_scale),
            device=self.device.name, rss_bytes=rss, device_total_bytes=self._total,
            host_total_bytes=self._host_total, cpu_fallbacks=fallbacks, pids=self.job.pids(), **self.host.sample(),
            **self.device.memory_stats())

    def close(self) -> None:
        self.writer.close()


def _number(value: Any) -> Optional[float]:
    """A float from a float, an int or a one-element tensor (``.item()``), else None."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.detach().float().item() if hasattr(value, "detach") else value.item()
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
