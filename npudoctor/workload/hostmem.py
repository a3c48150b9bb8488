"""Host memory figures for the memlog beside the process's RSS: the DataLoader workers' summed RSS and the C
allocator's in-use and held bytes (glibc ``mallinfo2``), so the leak verdict can tell a worker that keeps what
it loads, and malloc fragmentation, from objects the training process keeps.

Cheap enough for every step: ``mallinfo2()`` is one libc call (~0.3 us on a small heap); the children's list
costs ~2 ms (psutil scans ``/proc``), so it is refreshed at most once a second or when a known child is gone,
and each step reads only the known children's RSS.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

#: Why the allocator figures are missing, when they are (``None``: recorded).
MALLOC_UNAVAILABLE_NOT_LINUX = "not Linux: no glibc mallinfo2"
MALLOC_UNAVAILABLE_NO_GLIBC = "no glibc mallinfo2 (musl, or glibc older than 2.33)"

CHILDREN_REFRESH_S = 1.0


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mallinfo2() -> Any:
    """glibc's ``mallinfo2`` function, or a string saying why there is none."""
    if not sys.platform.startswith("linux"):
        return MALLOC_UNAVAILABLE_NOT_LINUX
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function = libc.mallinfo2
    except (OSError, AttributeError):
        return MALLOC_UNAVAILABLE_NO_GLIBC
    function.restype = _MallInfo2
    function.argtypes = []
    return function


class HostMemory:
    """Per-step host figures in memlog/2 names; ``malloc_unavailable`` says why the allocator's are ``None``."""

    def __init__(self, process: Any = None) -> None:
        self._process = process
        self._children: List[Any] = []
        self._listed_at = -float("inf")
        found = _mallinfo2()
        self._mallinfo2 = None if isinstance(found, str) else found
        self.malloc_unavailable: Optional[str] = found if isinstance(found, str) else None

    def sample(self) -> Dict[str, Optional[int]]:
        values: Dict[str, Optional[int]] = {"malloc_in_use_bytes": None, "malloc_held_bytes": None,
                                            "workers_rss_bytes": None, "workers": None}
        if self._mallinfo2 is not None:
            info = self._mallinfo2()
            values["malloc_in_use_bytes"] = int(info.uordblks + info.hblkhd)
            values["malloc_held_bytes"] = int(info.arena + info.hblkhd)
        if self._process is not None:
            values["workers_rss_bytes"], values["workers"] = self._workers()
        return values

    def _workers(self) -> Tuple[Optional[int], Optional[int]]:

        now = time.monotonic()
        if now - self._listed_at >= CHILDREN_REFRESH_S:
            self._list_children(now)
        total, gone = self._children_rss()
        if gone:  # a worker exited (an epoch ended): list again so new workers are counted from this step
            self._list_children(now)
            total, _ = self._children_rss()
        return total, len(self._children)

    def _children_rss(self) -> Tuple[int, bool]:
        import psutil

        total, gone = 0, False
        for child in self._children:
            try:
                total += int(child.memory_info().rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                gone = True
        return total, gone

    def _list_children(self, now: float) -> None:
        import psutil

        try:
            children = self._process.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            children = []
        self._children = [child for child in children if _alive(child)]
        self._listed_at = now


def _alive(process: Any) -> bool:
    """A child that runs (a zombie holds no memory and is no worker: an exited child not yet reaped)."""
    import psutil

    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


#: Launchers that start one process per rank, all children of the launcher, and name themselves in each rank's
#: environment: torchrun (torch.distributed.run) and Open MPI's mpirun.
LAUNCHER_ENV = ("TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_LOCAL_RANK")
JOB_REFRESH_S = 10.0


class JobProcesses:
    """The memlog's ``pids``: this process first, then, when a launcher started it (:data:`LAUNCHER_ENV`), the
    ranks the launcher started beside it (its other children, listed at most every ``JOB_REFRESH_S``). Without
    a launcher the parent's other children are never counted: a shell's leftover job must stay a leftover."""

    def __init__(self, process: Any = None, environ: Mapping[str, str] = os.environ) -> None:
        self._process = process
        self._launched = any(name in environ for name in LAUNCHER_ENV)
        self._pids: Optional[List[int]] = None
        self._listed_at = -float("inf")

    def pids(self) -> Optional[List[int]]:
        if self._process is None:
            return None
        now = time.monotonic()
        if now - self._listed_at >= JOB_REFRESH_S:
            self._pids, self._listed_at = [self._process.pid, *self._siblings()], now
        return self._pids

    def _siblings(self) -> List[int]:
        import psutil

        if not self._launched:
            return []
        try:
            parent = self._process.parent()
            children = parent.children() if parent is not None else []
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return []
        return sorted(child.pid for child in children if child.pid != self._process.pid and _alive(child))
