"""One reading of the node: its accelerators (NPUs or GPUs) and the host, from whatever the node has.

>>> from npudoctor.parsers.npu_smi import parse_npu_smi_info
>>> from npudoctor.probes.sources import CommandResult
>>> snap = snapshot_from_npu_smi(CommandResult(("npu-smi", "info"), 0, '''
... | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
... | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
... +===========================+===============+====================================================+
... | 0     910B3               | Warning       | 91.1        32                0    / 0             |
... | 0                         | 0000:C1:00.0  | 37          0    / 0          3397 / 65536         |
... +===========================+===============+====================================================+
... '''), taken_at=100.0)
>>> device = snap.devices[0]
>>> device.label, device.health, device.util_pct, device.mem_used_mib, device.mem_total_mib
('NPU 0', 'Warning', 37, 3397, 65536)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from npudoctor.parsers.npu_smi import NpuSmiParseError, NpuSmiTable, parse_npu_smi_info, recognise_failure
from npudoctor.parsers.nvidia_smi import NvidiaSmiParseError, number, parse_csv, parse_query_gpu
from npudoctor.probes.npu_smi import NPU_SMI_DIRS
from npudoctor.probes.runner import Runner
from npudoctor.probes.sources import Command, CommandResult

NPU_SMI_INFO = ("npu-smi", "info")
GPU_FIELDS = ("index", "name", "uuid", "utilization.gpu", "memory.used", "memory.total", "temperature.gpu",
              "power.draw")
NVIDIA_SMI_GPUS = ("nvidia-smi", "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv")
NVIDIA_SMI_APPS = ("nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_gpu_memory", "--format=csv")


@dataclass(frozen=True)
class Holder:
    """A process holding device memory."""

    pid: int
    name: str
    memory_mib: Optional[int]


@dataclass(frozen=True)
class DeviceReading:
    """One chip (NPU die or GPU) at one moment; None where the tool printed no value."""

    key: str  # stable across readings: "npu:0", "npu:3/chip:1", "gpu:0"
    label: str  # for people: "NPU 0", "NPU 3/1", "GPU 0"
    name: str
    health: Optional[str]  # npu-smi's Health (OK, Warning, Alarm, Critical); None where the tool has none
    util_pct: Optional[float]  # AI Core % on Ascend, GPU utilisation on CUDA
    mem_used_mib: Optional[int]  # HBM on Ascend, device memory on CUDA
    mem_total_mib: Optional[int]
    temp_c: Optional[float]
    power_w: Optional[float]
    bus_id: Optional[str] = None
    holders: Tuple[Holder, ...] = ()

    @property
    def mem_pct(self) -> Optional[float]:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return 100.0 * self.mem_used_mib / self.mem_total_mib


@dataclass(frozen=True)
class HostReading:
    cpu_pct: Optional[float]
    mem_used_mib: Optional[int]
    mem_total_mib: Optional[int]
    load_1m: Optional[float] = None
    cpus: Optional[int] = None


@dataclass(frozen=True)
class Snapshot:
    """What one poll found. ``kind``: "npu", "cuda" or "host" (no device tool answered: ``note`` says why)."""

    taken_at: float  # when the answer arrived (the caller's clock)
    kind: str
    devices: Tuple[DeviceReading, ...] = ()
    host: Optional[HostReading] = None
    error: Optional[str] = None  # the device tool ran but gave no readings: why, in one line
    note: str = ""
    source: str = ""  # "npu-smi 24.1.0.3", "nvidia-smi", "replay t=12.0s"
    duration_s: float = 0.0  # how long the device tool took
    tool_version: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


def _holders_by_npu(table: NpuSmiTable) -> Dict[Tuple[int, Optional[int]], List[Holder]]:
    holders: Dict[Tuple[int, Optional[int]], List[Holder]] = {}
    for process in table.processes:
        holders.setdefault((process.npu_id, process.chip_id), []).append(
            Holder(process.pid, process.name, process.memory_mib))
    return holders


def readings_from_npu_smi(table: NpuSmiTable) -> Tuple[DeviceReading, ...]:
    """One reading per chip of a parsed ``npu-smi info`` table (A3: two dies per NPU, one row each)."""
    holders = _holders_by_npu(table)
    chips_per_npu: Dict[int, int] = {}
    for chip in table.chips:
        chips_per_npu[chip.npu_id] = chips_per_npu.get(chip.npu_id, 0) + 1
    readings = []
    for chip in table.chips:
        several = chips_per_npu[chip.npu_id] > 1
        label = f"NPU {chip.npu_id}" + (f"/{chip.chip_id}" if several and chip.chip_id is not None else "")
        # HBM where the chip has it (910 family); DDR "Memory-Usage" on 310-class chips without HBM.
        used, total = chip.hbm_used_mib, chip.hbm_total_mib
        if not total:
            used, total = chip.memory_used_mib, chip.memory_total_mib
        chip_holders = holders.get((chip.npu_id, chip.chip_id), [])
        if chip.chip_id == 0 and not several:
            chip_holders = chip_holders or holders.get((chip.npu_id, None), [])
        readings.append(DeviceReading(
            key=chip.subject, label=label, name=chip.name, health=chip.health, util_pct=chip.aicore_pct,
            mem_used_mib=used, mem_total_mib=total, temp_c=chip.temp_c, power_w=chip.power_w,
            bus_id=chip.bus_id, holders=tuple(chip_holders)))
    return tuple(readings)


def snapshot_from_npu_smi(result: CommandResult, taken_at: float, host: Optional[HostReading] = None,
                          source: str = "") -> Snapshot:
    """A snapshot from one run of ``npu-smi info``; a failed run gives no devices and says why."""
    if result.error is not None:
        return Snapshot(taken_at, "npu", host=host, error=f"npu-smi info: {result.error}",
                        duration_s=result.duration_s, source=source or "npu-smi")
    try:
        table = parse_npu_smi_info(result.stdout)
    except NpuSmiParseError as exc:
        failure = recognise_failure(result.output)
        reason = failure.line if failure else str(exc)
        return Snapshot(taken_at, "npu", host=host, error=f"npu-smi info: {reason}", duration_s=result.duration_s,
                        source=source or "npu-smi")
    source = source or f"npu-smi {table.tool_version or ''} ({result.duration_s:.1f}s)"
    return Snapshot(taken_at, "npu", readings_from_npu_smi(table), host, duration_s=result.duration_s,
                    source=source, tool_version=table.tool_version)


def _int(value: Optional[float]) -> Optional[int]:
    return None if value is None else int(value)


def readings_from_nvidia_smi(gpus_csv: str, apps_csv: str = "") -> Tuple[DeviceReading, ...]:
    """Readings from ``nvidia-smi --query-gpu`` CSV, with the holders from ``--query-compute-apps``."""
    holders: Dict[str, List[Holder]] = {}
    if apps_csv.strip():
        try:
            for row in parse_csv(apps_csv):
                pid = number(row, "pid")
                if pid is not None:
                    holders.setdefault(str(row.get("gpu_uuid") or ""), []).append(
                        Holder(int(pid), str(row.get("process_name") or ""), _int(number(row, "used_gpu_memory"))))
        except NvidiaSmiParseError:
            pass  # processes are decoration; the GPU rows still count
    readings = []
    for position, row in enumerate(parse_query_gpu(gpus_csv)):
        index = _int(number(row, "index"))
        index = position if index is None else index
        readings.append(DeviceReading(
            key=f"gpu:{index}", label=f"GPU {index}", name=str(row.get("name") or ""), health=None,
            util_pct=number(row, "utilization.gpu"), mem_used_mib=_int(number(row, "memory.used")),
            mem_total_mib=_int(number(row, "memory.total")), temp_c=number(row, "temperature.gpu"),
            power_w=number(row, "power.draw"), holders=tuple(holders.get(str(row.get("uuid") or ""), ()))))
    return tuple(readings)


def host_reading() -> HostReading:
    """CPU and memory of this machine (psutil); the CPU share is since the previous call."""
    import os

    import psutil

    memory = psutil.virtual_memory()
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return HostReading(cpu_pct=psutil.cpu_percent(interval=None), mem_used_mib=(memory.total - memory.available) >> 20,
                       mem_total_mib=memory.total >> 20, load_1m=load, cpus=psutil.cpu_count())


class Sampler:
    """Anything that gives one :class:`Snapshot` per call (live node, replayed recording, tests)."""

    description = "sampler"

    def sample(self) -> Snapshot:
        raise NotImplementedError

    def close(self) -> None:
        """Stop what a running sample started (a hung npu-smi is killed, not left behind at exit)."""


class NodeSampler(Sampler):
    """Reads this node through the probes' runner: ``npu-smi info`` when the node has it, else nvidia-smi,
    else the host alone. Which tool is found is decided once, at the first sample."""

    def __init__(self, runner: Runner, timeout_s: float = 15.0, clock: Callable[[], float] = time.time,
                 host: Optional[Callable[[], HostReading]] = host_reading) -> None:
        self.runner = runner
        self.timeout_s = timeout_s
        self.clock = clock
        self.host = host
        self.kind: Optional[str] = None
        self.description = runner.description

    def close(self) -> None:
        self.runner.close()

    def _detect(self) -> str:
        if self.runner.which("npu-smi", NPU_SMI_DIRS):
            return "npu"
        if self.runner.which("nvidia-smi"):
            return "cuda"
        return "host"

    def sample(self) -> Snapshot:
        if self.kind is None:
            self.kind = self._detect()
        host = self.host() if self.host is not None else None
        if self.kind == "npu":
            result = self.runner.run(Command(NPU_SMI_INFO, timeout_s=self.timeout_s, extra_dirs=NPU_SMI_DIRS))
            return snapshot_from_npu_smi(result, self.clock(), host)
        if self.kind == "cuda":
            return self._cuda(host)
        return Snapshot(self.clock(), "host", host=host, source="host only",
                        note="no accelerator tool on this machine (neither npu-smi nor nvidia-smi is on PATH or "
                             "in /usr/local/sbin): showing the host only")

    def _cuda(self, host: Optional[HostReading]) -> Snapshot:
        gpus = self.runner.run(Command(NVIDIA_SMI_GPUS, timeout_s=self.timeout_s))
        if gpus.error is not None or gpus.rc:
            why = gpus.error or (gpus.output.strip().splitlines() or [f"exit code {gpus.rc}"])[0]
            return Snapshot(self.clock(), "cuda", host=host, error=f"nvidia-smi: {why}", source="nvidia-smi",
                            duration_s=gpus.duration_s)
        apps = self.runner.run(Command(NVIDIA_SMI_APPS, timeout_s=self.timeout_s))
        try:
            devices = readings_from_nvidia_smi(gpus.stdout, apps.stdout if apps.error is None else "")
        except NvidiaSmiParseError as exc:
            return Snapshot(self.clock(), "cuda", host=host, error=str(exc), source="nvidia-smi",
                            duration_s=gpus.duration_s)
        return Snapshot(self.clock(), "cuda", devices, host, source="nvidia-smi",
                        duration_s=gpus.duration_s + apps.duration_s)


class Timeline:
    """Recorded ``npu-smi info`` answers at their offsets from the first one (seconds), in order."""

    def __init__(self, samples: Sequence[Tuple[float, CommandResult]], name: str = "recording") -> None:
        if not samples:
            raise ValueError(f"{name}: no npu-smi samples recorded (record with `npudoctor collect --samples N`)")
        self.samples = sorted(samples, key=lambda item: item[0])
        self.name = name
        # A recording of one sample still plays (it repeats); the span is at least one second.
        self.span_s = max(self.samples[-1][0] - self.samples[0][0], 1.0)

    def at(self, offset_s: float) -> Tuple[int, CommandResult]:
        """The sample shown ``offset_s`` seconds into the recording (it loops)."""
        start = self.samples[0][0]
        position = start + (offset_s % (self.span_s + self._step()))
        index = 0
        for candidate, (t, _result) in enumerate(self.samples):
            if t <= position:
                index = candidate
        return index, self.samples[index][1]

    def _step(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        return self.span_s / (len(self.samples) - 1)


class ReplaySampler(Sampler):
    """Plays a :class:`Timeline` at ``speed`` times real time, looping; the speed can change while playing."""

    def __init__(self, timeline: Timeline, speed: float = 1.0, clock: Callable[[], float] = time.time,
                 host: Optional[Callable[[], HostReading]] = None) -> None:
        self.timeline = timeline
        self.clock = clock
        self.host = host
        self.description = f"replay {timeline.name}"
        self._speed = speed
        self._origin_wall = clock()
        self._origin_offset = 0.0
        self._parsed: Dict[int, Tuple[DeviceReading, ...]] = {}
        self._errors: Dict[int, Snapshot] = {}

    @property
    def speed(self) -> float:
        return self._speed

    def offset_s(self) -> float:
        return self._origin_offset + (self.clock() - self._origin_wall) * self._speed

    def set_speed(self, speed: float) -> None:
        """Change speed without jumping: the recording goes on from where it is now."""
        self._origin_offset = self.offset_s()
        self._origin_wall = self.clock()
        self._speed = max(0.125, min(speed, 64.0))

    def sample(self) -> Snapshot:
        offset = self.offset_s()
        index, result = self.timeline.at(offset)
        now = self.clock()
        host = self.host() if self.host is not None else None
        source = f"{self.timeline.name} #{index + 1}/{len(self.timeline.samples)} x{self._speed:g}"
        if index not in self._parsed and index not in self._errors:
            snap = snapshot_from_npu_smi(result, now)
            if snap.error is not None:
                self._errors[index] = snap
            else:
                self._parsed[index] = snap.devices
        if index in self._errors:
            failed = self._errors[index]
            return Snapshot(now, "npu", host=host, error=failed.error, source=source)
        return Snapshot(now, "npu", self._parsed[index], host, source=source, duration_s=result.duration_s)
