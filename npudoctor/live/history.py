"""Readings over time per chip, and the text sparklines the dashboard draws them with."""

from __future__ import annotations

import collections
from typing import Deque, Dict, Iterable, List, Optional, Sequence

from npudoctor.live.devices import Snapshot

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[Optional[float]], width: int, low: float = 0.0, high: float = 100.0) -> str:
    """The last ``width`` values as block characters scaled from ``low`` to ``high``; gaps (None) as spaces.

    >>> sparkline([0, 50, 100, None, 100], 5)
    '▁▅█ █'
    >>> sparkline([10, 60], 4)
    '  ▂▅'
    """
    shown = list(values)[-width:] if width > 0 else []
    span = (high - low) or 1.0
    out = []
    for value in shown:
        if value is None:
            out.append(" ")
            continue
        ratio = min(max((value - low) / span, 0.0), 1.0)
        out.append(BLOCKS[min(int(ratio * (len(BLOCKS) - 1) + 0.5), len(BLOCKS) - 1)])
    return " " * (width - len(out)) + "".join(out)


class History:
    """The last ``size`` readings of AI Core % and HBM % per chip (None where a poll had no value)."""

    def __init__(self, size: int = 120) -> None:
        self.size = size
        self.util: Dict[str, Deque[Optional[float]]] = {}
        self.mem: Dict[str, Deque[Optional[float]]] = {}
        self.labels: Dict[str, str] = {}
        # The host's CPU % and memory % (what a node without accelerators shows).
        self.host_cpu: Deque[Optional[float]] = collections.deque(maxlen=size)
        self.host_mem: Deque[Optional[float]] = collections.deque(maxlen=size)
        self._last_taken: Optional[float] = None

    def add(self, snapshot: Snapshot) -> bool:
        """Add a snapshot once (the same snapshot seen on two ticks counts once); True when it was new."""
        if snapshot.taken_at == self._last_taken:
            return False
        self._last_taken = snapshot.taken_at
        host = snapshot.host
        if host is not None:
            self.host_cpu.append(host.cpu_pct)
            self.host_mem.append(100.0 * host.mem_used_mib / host.mem_total_mib
                                 if host.mem_used_mib is not None and host.mem_total_mib else None)
        for device in snapshot.devices:
            self.labels[device.key] = device.label
            self.util.setdefault(device.key, collections.deque(maxlen=self.size)).append(device.util_pct)
            self.mem.setdefault(device.key, collections.deque(maxlen=self.size)).append(device.mem_pct)
        return True

    def keys(self) -> List[str]:
        return list(self.labels)

    @staticmethod
    def last(values: Iterable[Optional[float]]) -> Optional[float]:
        found = None
        for value in values:
            if value is not None:
                found = value
        return found
