"""The host side of a profiled run: what trace_view.json (or a .db export's host tables) says the CPU did.

Collected while the trace is streamed (:mod:`npudoctor.prof.jsonstream`): DataLoader steps, Python garbage
collections, SyncBatchNorm calls, stream synchronisations and node launches in time order, and the AI Core
frequency counter. Only these few numbers per event are kept, in arrays, so a multi-GB trace stays small.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

SYNC_STREAM = "AscendCL@aclrtSynchronizeStream"   # msprof-analyze's Constant.SYNC_STREAM
NODE_LAUNCH = "Node@launch"                       # ... and Constant.NODE_LAUNCH
FREQ_COUNTER = "AI Core Freq"
OP_COMPILE = "AscendCL@aclopCompileAndExecute"    # ... and Constant.OP_COMPILE_NAME (V2 too)
MAX_KEPT = 5_000_000                               # events of one kind kept (more: counted only)
FREE_EVENT = "Free"                                # Overlap Analysis: the device idle between its tasks
FREE_FLOOR_US = 1000.0                             # idle spans kept (PROF030 judges from 1 ms up)
CANN_PREFIXES = ("AscendCL@", "Runtime@", "Node@", "Model@")  # the host's calls into the CANN stack
TORCH_OP_PREFIXES = ("aten::", "Optimizer.step#")  # PyTorch operators and optimizer steps (PROF031)
MAX_NAMES = 60_000                                 # distinct operator names / threads / stack frames kept


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
    free_start: Any = field(default_factory=lambda: array("d"))         # device idle spans >= FREE_FLOOR_US
    free_dur: Any = field(default_factory=lambda: array("d"))
    cann_start: Any = field(default_factory=lambda: array("d"))         # CANN API calls on the host
    cann_dur: Any = field(default_factory=lambda: array("d"))
    free_source: str = ""                                               # where the idle spans came from
    idle_measured: bool = False                                         # device idle was looked for (PROF030)
    host_bounds: Optional[Tuple[float, float]] = None                   # (first, last) CANN call when known
    torch_names: Dict[str, int] = field(default_factory=dict)           # aten / optimizer names -> id
    torch_threads: Dict[str, int] = field(default_factory=dict)
    torch_frames: Dict[str, int] = field(default_factory=dict)          # first frame of a call stack -> id
    torch_op: Any = field(default_factory=lambda: array("l"))           # per operator call: name id,
    torch_thread: Any = field(default_factory=lambda: array("l"))       # thread id, start, end, frame id
    torch_start: Any = field(default_factory=lambda: array("d"))
    torch_end: Any = field(default_factory=lambda: array("d"))
    torch_frame: Any = field(default_factory=lambda: array("l"))
    matmul_start: Any = field(default_factory=lambda: array("d"))       # device MatMul tasks (PROF032)
    matmul_end: Any = field(default_factory=lambda: array("d"))
    transfers: List[Tuple[str, str, float, float, float, float]] = field(default_factory=list)
    # ^ HCCL transfer tasks (Memcpy / Reduce_Inline): (transport, link type, bytes, start, duration, GB/s)
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
        if name.startswith(CANN_PREFIXES):
            self.add_cann(start, duration)

    def add_torch_op(self, name: str, thread: Any, start: float, duration: float, stack: Any = None) -> None:
        """One PyTorch operator call (``aten::...``) or optimizer step on a host thread (``stack``: the
        profiler's ``Call stack`` text, frames joined by ``;``; only its first frame is kept)."""
        if len(self.torch_op) >= MAX_KEPT:
            self.dropped += 1
            return
        frame = -1
        if isinstance(stack, str) and stack:
            first = stack.split(";", 1)[0].strip()[:300]
            frame = _intern(self.torch_frames, first)
        self.torch_op.append(_intern(self.torch_names, name[:200]))
        self.torch_thread.append(_intern(self.torch_threads, str(thread)[:64]))
        self.torch_start.append(start)
        self.torch_end.append(start + max(0.0, duration))
        self.torch_frame.append(frame)

    def add_matmul(self, start: float, duration: float) -> None:
        if len(self.matmul_start) < MAX_KEPT:
            self.matmul_start.append(start)
            self.matmul_end.append(start + max(0.0, duration))

    def add_transfer(self, args: Dict[str, Any], start: Optional[float], duration: Optional[float]) -> None:
        """One HCCL task that moves data (its ``args``: transport type, link type, size(Byte), bandwidth)."""
        size = number(args.get("size(Byte)"))
        if size is None or size <= 0 or start is None or duration is None or len(self.transfers) >= MAX_KEPT:
            return
        self.transfers.append((str(args.get("transport type", ""))[:16], str(args.get("link type", ""))[:16],
                               size, start, max(0.0, duration), number(args.get("bandwidth(GB/s)")) or 0.0))

    def add_cann(self, start: float, duration: float) -> None:
        if len(self.cann_start) < MAX_KEPT:
            self.cann_start.append(start)
            self.cann_dur.append(max(0.0, duration))
        else:
            self.dropped += 1

    def add_free(self, start: float, duration: float) -> None:
        """One span of device idle time (an Overlap Analysis ``Free`` event, or a gap between device tasks)."""
        if duration >= FREE_FLOOR_US and len(self.free_start) < MAX_KEPT:
            self.free_start.append(start)
            self.free_dur.append(duration)

    def quiet_idle_spans(self, min_us: float) -> Tuple[List[Dict[str, float]], int]:
        """Device idle spans of at least ``min_us`` inside the time the host was recorded, each with the CANN
        calls that overlap it (count, and their time clipped to the span); and how many long spans lay outside
        the recorded host time (no host record there says nothing about the host)."""
        order = sorted(range(len(self.cann_start)), key=self.cann_start.__getitem__)
        starts = [self.cann_start[i] for i in order]
        ends = [self.cann_start[i] + self.cann_dur[i] for i in order]
        bounds = self.host_bounds or ((starts[0], max(ends)) if starts else None)
        if bounds is None:
            return [], 0
        first, last = bounds
        longest_call = max(self.cann_dur) if self.cann_dur else 0.0
        spans: List[Dict[str, float]] = []
        outside = 0
        for start, duration in sorted(zip(self.free_start, self.free_dur)):
            if duration < min_us:
                continue
            end = start + duration
            if start < first or end > last:
                outside += 1
                continue
            # calls starting before the span's end and ending after its start; none is longer than the
            # longest call, so the search can begin that far before the span
            low = bisect.bisect_left(starts, start - longest_call)
            high = bisect.bisect_left(starts, end)
            calls, busy = 0, 0.0
            for i in range(low, high):
                if ends[i] > start:
                    calls += 1
                    busy += min(ends[i], end) - max(starts[i], start)
            spans.append({"start_us": start, "duration_us": duration, "host_calls": calls, "host_busy_us": busy})
        return spans, outside

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
        """No host event and no frequency sample (device idle spans alone are no host timeline)."""
        return not (self.host_events or self.freq or self.torch_op)

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


def _intern(table: Dict[str, int], text: str) -> int:
    """The id of ``text`` in ``table`` (added when new; -1 once the table is full)."""
    found = table.get(text)
    if found is None:
        if len(table) >= MAX_NAMES:
            return -1
        found = table[text] = len(table)
    return found


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
        if name == FREE_EVENT and not (isinstance(args, dict) and "Task Type" in args):
            start, duration = number(event.get("ts")), number(event.get("dur"))
            if start is not None and duration is not None:
                timeline.add_free(start, duration)
                timeline.free_source = "Free events of the trace"
                timeline.idle_measured = True
            continue
        if isinstance(args, dict) and "Task Type" in args:
            count += 1
            if "matmul" in name.lower():
                timeline.add_matmul(number(event.get("ts")) or 0.0, number(event.get("dur")) or 0.0)
            if on_tasks is not None:
                tasks.append({"op_name": name[:400], "core_type": str(args["Task Type"])[:64],
                              "duration_us": number(event.get("dur")) or 0.0})
                if len(tasks) >= TASK_BATCH:
                    on_tasks(tasks)
                    tasks.clear()
            continue
        if isinstance(args, dict) and "size(Byte)" in args and "transport type" in args:
            timeline.add_transfer(args, number(event.get("ts")), number(event.get("dur")))
            continue
        category = event.get("cat")
        start, duration = number(event.get("ts")) or 0.0, number(event.get("dur")) or 0.0
        timeline.add_host(name, category if isinstance(category, str) else "", start, duration)
        if name.startswith(TORCH_OP_PREFIXES):
            timeline.add_torch_op(name, event.get("tid"), start, duration,
                                  args.get("Call stack") if isinstance(args, dict) else None)
    return count
