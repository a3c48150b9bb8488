"""The host side of a profiled run: what trace_view.json (or a .db export's host tables) says the CPU did.

Collected while the trace is streamed (:mod:`npudoctor.prof.jsonstream`): DataLoader steps, Python garbage
collections, SyncBatchNorm calls, stream synchronisations and node launches in time order, and the AI Core
frequency counter. Only these few numbers per event are kept, in arrays, so a multi-GB trace stays small.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

SYNC_STREAM = "AscendCL@aclrtSynchronizeStream"   # msprof-analyze's Constant.SYNC_STREAM
NODE_LAUNCH = "Node@launch"                       # ... and Constant.NODE_LAUNCH
FREQ_COUNTER = "AI Core Freq"
OP_COMPILE = "AscendCL@aclopCompileAndExecute"    # ... and Constant.OP_COMPILE_NAME (V2 too)
MAX_KEPT = 5_000_000                               # events of one kind kept (more: counted only)


@dataclass
class HostTimeline:
    """Host-side events of one rank (all times in microseconds)."""

    sources: List[str] = field(default_factory=list)
    dataloader: List[Tuple[str, float]] = field(default_factory=list)  # (name, duration), longest kept
    dataloader_count: int = 0
    gc_us: Any = field(default_factory=lambda: array("d"))             # durations of GC events
    syncbn: int = 0
    launch_ts: Any = field(default_factory=lambda: array("d"))          # Node@launch start times
    sync_ts: Any = field(default_factory=lambda: array("d"))            # aclrtSynchronizeStream start times
    freq: List[Tuple[float, float]] = field(default_factory=list)       # (time, MHz) of the frequency counter
    compiles: int = 0                                                   # aclopCompileAndExecute calls
    compile_us: float = 0.0
    host_events: int = 0
    dropped: int = 0

    def add_host(self, name: str, category: str, start: float, duration: float) -> None:
        self.host_events += 1
        lowered = name.lower()
        if category.lower() == "gc":
            self._keep(self.gc_us, duration)
        if "dataloader" in lowered:
            self.dataloader_count += 1
            self.dataloader.append((name[:200], duration))
            if len(self.dataloader) > 4096:
                self.dataloader = sorted(self.dataloader, key=lambda item: -item[1])[:1024]
        if lowered == "syncbatchnorm":
            self.syncbn += 1
        if name.startswith(OP_COMPILE):
            self.compiles += 1
            self.compile_us += duration
        if name.startswith(SYNC_STREAM):
            self._keep(self.sync_ts, start)
        elif name.startswith(NODE_LAUNCH):
            self._keep(self.launch_ts, start)

    def add_freq(self, start: float, mhz: float) -> None:
        if len(self.freq) < MAX_KEPT:
            self.freq.append((start, mhz))

    def _keep(self, values: Any, value: float) -> None:
        if len(values) < MAX_KEPT:
            values.append(value)
        else:
            self.dropped += 1

    @property
    def empty(self) -> bool:
        return not (self.host_events or self.freq)

    def sync_after_launch(self) -> Tuple[int, int, int]:
        """(synchronisations, launches, synchronisations right after a launch), msprof-analyze's co-occurrence."""
        merged = sorted([(t, 1) for t in self.sync_ts] + [(t, 0) for t in self.launch_ts])
        after = sum(1 for (_, before), (_, now) in zip(merged, merged[1:]) if before == 0 and now == 1)
        return len(self.sync_ts), len(self.launch_ts), after

    def freq_drop(self, max_mhz: float) -> Optional[Dict[str, float]]:
        """Time-weighted mean frequency against ``max_mhz`` (the drop as a share), over the counter's samples."""
        points = sorted(p for p in self.freq if p[1] == p[1] and p[1] > 0)
        if not points or max_mhz <= 0:
            return None
        if len(points) == 1:
            mean = points[0][1]
        else:
            weights = [(b[0] - a[0], a[1]) for a, b in zip(points, points[1:]) if b[0] > a[0]]
            total = sum(w for w, _ in weights)
            mean = sum(w * v for w, v in weights) / total if total > 0 else sum(p[1] for p in points) / len(points)
        return {"mean_mhz": round(mean, 1), "min_mhz": min(p[1] for p in points), "max_mhz": float(max_mhz),
                "drop": round(max(0.0, 1 - mean / max_mhz), 4), "samples": len(points)}


def number(value: Any) -> Optional[float]:
    """A finite float from a trace field (trace_view.json writes ``ts`` as a string)."""
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return result if result == result and abs(result) != float("inf") else None


TASK_BATCH = 131_072


def read_events(paths: Sequence[str], on_tasks: Optional[Callable[[List[Dict[str, Any]]], None]] = None
                ) -> Tuple[HostTimeline, int, List[str]]:
    """Stream Chrome-trace files: the host timeline, the number of device tasks (complete events with a
    ``Task Type``, handed to ``on_tasks`` in batches when given) and the problems (one line each)."""
    from npudoctor.prof.jsonstream import JsonStreamError, iter_array
    from npudoctor.prof.tables import TableError, check_regular_file

    timeline = HostTimeline()
    tasks: List[Dict[str, Any]] = []
    problems: List[str] = []
    count = 0
    for path in paths:
        notes: List[str] = []
        try:
            check_regular_file(path)
            with open(path, "rb") as handle:
                count += _take(iter_array(handle, notes=notes), timeline, tasks, on_tasks)
            timeline.sources.append(path)
        except (TableError, OSError) as exc:
            problems.append(f"{path}: {str(exc).splitlines()[0][:160]}" if not isinstance(exc, TableError)
                            else str(exc))
        except JsonStreamError as exc:
            problems.append(f"{path}: {exc} (read up to there)")
        problems.extend(f"{path}: {note}" for note in notes)
        if tasks and on_tasks is not None:
            on_tasks(tasks)
        tasks = []
    return timeline, count, problems


def _take(events: Iterable[Any], timeline: HostTimeline, tasks: List[Dict[str, Any]],
          on_tasks: Optional[Callable[[List[Dict[str, Any]]], None]]) -> int:
    count = 0
    for event in events:
        if not isinstance(event, dict):
            continue
        phase = event.get("ph")
        name = event.get("name")
        if not isinstance(name, str):
            name = str(name) if name is not None else ""
        args = event.get("args")
        if phase == "C" and name == FREQ_COUNTER and isinstance(args, dict):
            start, mhz = number(event.get("ts")), number(args.get("MHz"))
            if start is not None and mhz is not None:
                timeline.add_freq(start, mhz)
            continue
        if phase != "X":
            continue
        if isinstance(args, dict) and "Task Type" in args:
            count += 1
            if on_tasks is not None:
                tasks.append({"op_name": name[:400], "core_type": str(args["Task Type"])[:64],
                              "duration_us": number(event.get("dur")) or 0.0})
                if len(tasks) >= TASK_BATCH:
                    on_tasks(tasks)
                    tasks.clear()
            continue
        category = event.get("cat")
        timeline.add_host(name, category if isinstance(category, str) else "", number(event.get("ts")) or 0.0,
                          number(event.get("dur")) or 0.0)
    return count
