"""A followed training memory log (``npudoctor.memlog``): the newest step, series over time, leak verdict.

The reading and the verdict are the workload room's (:mod:`npudoctor.workload.memlog`,
:func:`npudoctor.workload.leak.analyze`); this module keeps what the dashboard shows between polls.
"""

from __future__ import annotations

import collections
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, FrozenSet, List, Optional

from npudoctor.workload import leak, memlog

MAX_RECORDS = 4096  # the newest steps kept (and judged); a record is ~600 bytes
DATA_WAIT_WINDOW = 20  # steps over which the data-wait share is taken
SERIES_POINTS = 240  # the newest steps drawn


@dataclass(frozen=True)
class TrainingView:
    path: str
    status: str  # "waiting for the file", "following", "new run ...", "not a regular file"
    last: Optional[Dict[str, Any]]
    steps_seen: int
    data_wait_share: Optional[float]  # of step time, over the last DATA_WAIT_WINDOW steps
    step_s: List[Optional[float]]
    loss: List[Optional[float]]
    allocated: List[Optional[float]]
    reserved: List[Optional[float]]
    rss: List[Optional[float]]
    verdict: Optional[leak.LeakVerdict]
    verdict_at_step: Optional[int]
    # CPU-fallback warnings the run printed so far (memlog ``cpu_fallbacks``): [{"op", "first_step", "count"}]
    cpu_fallbacks: List[Dict[str, Any]] = field(default_factory=list)
    # The followed job's processes (memlog ``pids`` of the newest run): the chips they hold are the job's own
    job_pids: FrozenSet[int] = frozenset()


def data_wait_share(records: List[Dict[str, Any]]) -> Optional[float]:
    """Share of step time spent waiting for data over ``records`` (None when the log does not say).

    >>> data_wait_share([{"step_s": 1.0, "data_wait_s": 0.25}, {"step_s": 1.0, "data_wait_s": 0.75}])
    0.5
    """
    step_total = wait_total = 0.0
    for record in records:
        step_s, wait_s = record.get("step_s"), record.get("data_wait_s")
        if isinstance(step_s, (int, float)) and isinstance(wait_s, (int, float)):
            step_total += step_s
            wait_total += wait_s
    return min(max(wait_total / step_total, 0.0), 1.0) if step_total > 0 else None


class TrainingFollow:
    """Follows ``path``; :meth:`poll` reads what was appended and returns a :class:`TrainingView`.

    A file that starts over (truncated, rotated, or a new run appended: its steps go back or its run id
    changes) starts the series over. The verdict is recomputed at most every ``verdict_every_s`` seconds.
    """

    def __init__(self, path: str, clock: Callable[[], float] = time.monotonic, verdict_every_s: float = 2.0) -> None:
        self.path = path
        self.clock = clock
        self.verdict_every_s = verdict_every_s
        self.tail = memlog.MemlogTail(path)
        self.records: Deque[Dict[str, Any]] = collections.deque(maxlen=MAX_RECORDS)
        self.steps_seen = 0
        self.status = "waiting for the file"
        self.verdict: Optional[leak.LeakVerdict] = None
        self.verdict_at_step: Optional[int] = None
        self._verdict_due = 0.0
        self._dirty = False
        self.cpu_fallbacks: List[Dict[str, Any]] = []
        self.job_pids: FrozenSet[int] = frozenset()

    def _starts_over(self, record: Dict[str, Any]) -> bool:
        if not self.records:
            return False
        last = self.records[-1]
        return record.get("run") != last.get("run") or record["step"] < last["step"]

    def poll(self) -> TrainingView:
        if not os.path.exists(self.path):
            self.status = "waiting for the file (not there yet)"
        else:
            try:
                new = self.tail.poll()
            except OSError as exc:  # an I/O error on the disk or the network file system: try again next poll
                new = []
                self.status = f"cannot read it now: {exc.strerror or exc}"
            if self.status.startswith("waiting") or (new and self.status.startswith("cannot read")):
                self.status = "following"
            for record in new:
                if self._starts_over(record):
                    self.records.clear()
                    self.verdict, self.verdict_at_step = None, None
                    self.cpu_fallbacks, self.job_pids = [], frozenset()
                    self.status = "new run: the log was truncated, rotated or restarted; series start over"
                self.records.append(record)
                if record.get("cpu_fallbacks"):
                    self.cpu_fallbacks = list(record["cpu_fallbacks"])
                if record.get("pids"):
                    self.job_pids = frozenset(record["pids"])
                self.steps_seen += 1
                self._dirty = True
        now = self.clock()
        if self._dirty and now >= self._verdict_due and self.records:
            self.verdict = leak.analyze(list(self.records))
            self.verdict_at_step = self.records[-1]["step"]
            self._verdict_due = now + self.verdict_every_s
            self._dirty = False
        return self.view()

    def view(self) -> TrainingView:
        records = list(self.records)
        shown = records[-SERIES_POINTS:]
        return TrainingView(
            path=self.path, status=self.status, last=records[-1] if records else None, steps_seen=self.steps_seen,
            data_wait_share=data_wait_share(records[-DATA_WAIT_WINDOW:]),
            step_s=[r.get("step_s") for r in shown], loss=[r.get("loss") for r in shown],
            allocated=[r.get("allocated_bytes") for r in shown], reserved=[r.get("reserved_bytes") for r in shown],
            rss=[r.get("rss_bytes") for r in shown],
            verdict=self.verdict, verdict_at_step=self.verdict_at_step, cpu_fallbacks=list(self.cpu_fallbacks),
            job_pids=self.job_pids)
