"""The leak verdict over a ``npudoctor.memlog/1`` log: pure Python, torch-free.

What it decides, after a warm-up (the first steps allocate optimizer state, caches and workspaces):

- **device leak**: ``allocated_bytes`` keeps rising. The slope is Theil-Sen's (median of pairwise slopes, so a
  few odd steps cannot fake or hide it) and its significance is a Mann-Kendall trend test (one-sided, for a
  rise, ties corrected). A one-time rise (a step change: a new buffer at step 300 that then stays) is told
  apart from a leak by asking that *both* halves of the window rise; it is reported, not called a leak.
  The projected out-of-memory step extrapolates the slope to the device's total memory.
- **reserved growth**: ``reserved_bytes`` rising while ``allocated_bytes`` is flat: the caching allocator
  holds more and more (fragmentation, or many differently-sized blocks). Not a leak of the program, but it
  ends in an OOM all the same; the advice is ``empty_cache()`` between phases or expandable segments.
- **host leak**: the process's ``rss_bytes`` rising (on the CPU this is the only memory there is; on a device
  it catches pinned buffers, Python objects and data pipelines that keep what they load).

The work is bounded: a long log is thinned to ``max_points`` evenly spaced records before the O(m^2) pair
statistics, so a 100,000-step log costs the same as a 256-step one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor.model.units import human_bytes
from npudoctor.workload.memlog import Record, last_run

#: ``PYTORCH_*_ALLOC_CONF`` settings that let the caching allocator grow segments instead of fragmenting.
EXPANDABLE_NPU = "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"
EXPANDABLE_CUDA = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


@dataclass(frozen=True)
class LeakSettings:
    """Thresholds (profile keys ``train.leak.*``)."""

    warmup_steps: Optional[int] = None  # records skipped at the start; None: warmup_fraction of the run
    warmup_fraction: float = 0.2
    min_warmup_steps: int = 3
    min_points: int = 8  # fewer records after the warm-up: no verdict (insufficient data)
    alpha: float = 0.001  # Mann-Kendall one-sided significance for "it rises"
    min_device_slope_bytes_per_step: float = 4096.0  # allocator counters are exact: small leaks count
    min_host_slope_bytes_per_step: float = 131072.0  # RSS moves with malloc's moods: only larger rises count
    min_growth_bytes: float = 1 << 20  # total rise over the window below this is not worth a verdict
    max_points: int = 256

    @classmethod
    def from_mapping(cls, values: Optional[Mapping[str, Any]]) -> LeakSettings:
        if not values:
            return cls()
        known = {name: values[name] for name in cls.__dataclass_fields__ if name in values}
        return cls(**known)


@dataclass(frozen=True)
class Trend:
    """The rise of one series over the analysed window."""

    series: str
    points: int
    slope_per_step: float  # Theil-Sen, bytes per step
    confidence: float  # 1 - p of the one-sided Mann-Kendall test for a rise (0..1)
    rise_bytes: float  # median of the last quarter minus median of the first quarter of the window
    persistent: bool  # both halves of the window rise (a leak), not only one (a step change)
    growing: bool  # significant, steep enough, large enough and persistent
    last_value: float


@dataclass(frozen=True)
class LeakVerdict:
    """The verdict on one run. ``leak`` is true for a device or a host leak (not for reserved-only growth).

    ``slope_bytes_per_step`` and ``confidence`` describe the series the verdict is about (``series``): the
    leaking one, else device ``allocated_bytes`` when recorded, else host ``rss_bytes``. ``confidence`` is
    ``1 - p`` of the Mann-Kendall test for a rise of that series.
    """

    leak: bool
    kind: str  # "device", "host", "none", or "insufficient-data"
    series: Optional[str]
    slope_bytes_per_step: float
    confidence: float
    projected_oom_step: Optional[int]
    reserved_growth: bool
    reserved_slope_bytes_per_step: Optional[float]
    rss_growth: bool
    rss_slope_bytes_per_step: Optional[float]
    step_change_bytes: Optional[float]
    device: Optional[str]
    steps_total: int
    warmup_steps: int
    steps_analyzed: int
    first_step: Optional[int]
    last_step: Optional[int]
    alloc_retries: Optional[int]
    ooms: Optional[int]
    summary: str
    advice: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"schema": "npudoctor.leak/1", **asdict(self)}


def analyze(records: Sequence[Record], settings: Optional[LeakSettings] = None,
            **overrides: Any) -> LeakVerdict:
    """Judge the last run in ``records`` (memlog/1 records, e.g. from :func:`memlog.read_records`).

    ``overrides`` replace single :class:`LeakSettings` fields (``analyze(r, warmup_steps=0)``).
    """
    settings = settings or LeakSettings()
    if overrides:
        settings = LeakSettings(**{**asdict(settings), **overrides})
    run = sorted(last_run(list(records)), key=lambda r: r["step"])
    total = len(run)
    warmup = settings.warmup_steps
    if warmup is None:
        warmup = max(settings.min_warmup_steps, math.ceil(settings.warmup_fraction * total))
    warmup = max(0, min(warmup, total))
    window = run[warmup:]
    device = next((r.get("device") for r in reversed(run) if r.get("device")), None)
    retries = _delta(run, "alloc_retries")
    ooms = _last(run, "ooms")
    base: Dict[str, Any] = dict(
        device=device, steps_total=total, warmup_steps=warmup, steps_analyzed=len(window),
        first_step=window[0]["step"] if window else None, last_step=window[-1]["step"] if window else None,
        alloc_retries=retries, ooms=int(ooms) if ooms is not None else None,
    )

    allocated = _trend(window, "allocated_bytes", settings.min_device_slope_bytes_per_step, settings)
    reserved = _trend(window, "reserved_bytes", settings.min_device_slope_bytes_per_step, settings)
    rss = _trend(window, "rss_bytes", settings.min_host_slope_bytes_per_step, settings)
    if allocated is None and rss is None:
        return LeakVerdict(
            leak=False, kind="insufficient-data", series=None, slope_bytes_per_step=0.0, confidence=0.0,
            projected_oom_step=None, reserved_growth=False, reserved_slope_bytes_per_step=None,
            rss_growth=False, rss_slope_bytes_per_step=None, step_change_bytes=None,
            summary=(f"not enough steps to judge: {len(window)} after a warm-up of {warmup} "
                     f"(at least {settings.min_points} with memory figures are needed)"),
            advice=[f"record more steps (e.g. --steps {warmup + 4 * settings.min_points})"], **base)

    device_leak = allocated is not None and allocated.growing
    host_leak = rss is not None and rss.growing
    reserved_growth = reserved is not None and reserved.growing and not device_leak
    subject = allocated if device_leak or (not host_leak and allocated is not None) else rss
    assert subject is not None
    leak = device_leak or host_leak
    kind = "device" if device_leak else "host" if host_leak else "none"

    oom_step: Optional[int] = None
    if leak:
        if device_leak:
            capacity = _last(run, "device_total_bytes")
            used = max(v for v in (allocated.last_value if allocated else None, _last(run, "reserved_bytes"))
                       if v is not None)
        else:
            capacity, used = _last(run, "host_total_bytes"), subject.last_value
        oom_step = _projected_step(base["last_step"], used, capacity, subject.slope_per_step)

    step_change = None
    for trend in (allocated, rss):
        if trend is not None and not trend.growing and not trend.persistent and trend.confidence >= 1 - settings.alpha \
                and trend.rise_bytes >= settings.min_growth_bytes:
            step_change = trend.rise_bytes
            break

    advice = _advice(kind, reserved_growth, device, retries, ooms, step_change)
    summary = _summary(kind, subject, oom_step, reserved_growth, reserved, rss, step_change, len(window))
    return LeakVerdict(
        leak=leak, kind=kind, series=subject.series, slope_bytes_per_step=subject.slope_per_step,
        confidence=subject.confidence, projected_oom_step=oom_step, reserved_growth=reserved_growth,
        reserved_slope_bytes_per_step=reserved.slope_per_step if reserved else None,
        rss_growth=host_leak, rss_slope_bytes_per_step=rss.slope_per_step if rss else None,
        step_change_bytes=step_change, summary=summary, advice=advice, **base)


def _values(window: Sequence[Record], key: str) -> Tuple[List[float], List[float]]:
    xs: List[float] = []
    ys: List[float] = []
    for record in window:
        value = record.get(key)
        if isinstance(value, (int, float)):
            xs.append(float(record["step"]))
            ys.append(float(value))
    return xs, ys


def _trend(window: Sequence[Record], key: str, min_slope: float, settings: LeakSettings) -> Optional[Trend]:
    xs, ys = _values(window, key)
    if len(xs) < settings.min_points:
        return None
    last_value = ys[-1]
    xs, ys = _thin(xs, ys, settings.max_points)
    slope, confidence = theil_sen_mann_kendall(xs, ys)
    rise = _rise(ys)
    half = len(ys) // 2
    span = xs[-1] - xs[0]
    # Each half must rise by a quarter of what the slope predicts for it; a step change lifts one half only.
    expected_half = max(slope, 0.0) * span / 2
    persistent = half >= 4 and all(_rise(part) >= 0.25 * expected_half > 0 for part in (ys[:half], ys[half:]))
    growing = (confidence >= 1 - settings.alpha and slope >= min_slope and slope * span >= settings.min_growth_bytes
               and persistent)
    return Trend(series=key, points=len(xs), slope_per_step=slope, confidence=confidence, rise_bytes=rise,
                 persistent=persistent, growing=growing, last_value=last_value)


def _thin(xs: List[float], ys: List[float], limit: int) -> Tuple[List[float], List[float]]:
    """At most ``limit`` evenly spaced points, first and last included."""
    n = len(xs)
    if n <= limit:
        return xs, ys
    picks = sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return [xs[i] for i in picks], [ys[i] for i in picks]


def _rise(ys: Sequence[float]) -> float:
    """Median of the last quarter minus median of the first quarter (robust to single odd steps)."""
    quarter = max(1, len(ys) // 4)
    return _median(ys[-quarter:]) - _median(ys[:quarter])


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def theil_sen_mann_kendall(xs: Sequence[float], ys: Sequence[float]) -> Tuple[float, float]:
    """Theil-Sen slope and the one-sided Mann-Kendall confidence (1 - p) that ``ys`` rises with ``xs``.

    >>> slope, conf = theil_sen_mann_kendall([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 2, 4, 6, 8, 10, 12, 14, 16, 18])
    >>> slope, round(conf, 4)
    (2.0, 1.0)
    >>> theil_sen_mann_kendall([0, 1, 2, 3], [5, 5, 5, 5])
    (0.0, 0.0)
    """
    n = len(xs)
    slopes: List[float] = []
    s = 0
    for i in range(n - 1):
        xi, yi = xs[i], ys[i]
        for j in range(i + 1, n):
            dy = ys[j] - yi
            if dy > 0:
                s += 1
            elif dy < 0:
                s -= 1
            dx = xs[j] - xi
            if dx:
                slopes.append(dy / dx)
    slope = _median(slopes) if slopes else 0.0
    # Variance of S with the correction for tied values (allocator counters repeat exactly).
    counts: Dict[float, int] = {}
    for y in ys:
        counts[y] = counts.get(y, 0) + 1
    variance = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in counts.values())) / 18
    if variance <= 0:
        return slope, 0.0
    z = (s - 1) / math.sqrt(variance) if s > 0 else (s + 1) / math.sqrt(variance) if s < 0 else 0.0
    p_rise = 0.5 * math.erfc(z / math.sqrt(2))
    return slope, 1.0 - p_rise


def _last(run: Sequence[Record], key: str) -> Optional[float]:
    for record in reversed(run):
        value = record.get(key)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _delta(run: Sequence[Record], key: str) -> Optional[int]:
    values = [r[key] for r in run if isinstance(r.get(key), (int, float))]
    return int(values[-1] - values[0]) if values else None


def _projected_step(last_step: Optional[int], used: Optional[float], capacity: Optional[float],
                    slope: float) -> Optional[int]:
    if last_step is None or used is None or not capacity or slope <= 0:
        return None
    if used >= capacity:
        return last_step
    return last_step + math.ceil((capacity - used) / slope)


def _summary(kind: str, subject: Trend, oom_step: Optional[int], reserved_growth: bool, reserved: Optional[Trend],
             rss: Optional[Trend], step_change: Optional[float], steps: int) -> str:
    conf = f"{subject.confidence * 100:.1f}%" if subject.confidence < 0.9995 else ">99.9%"
    if kind == "device":
        text = (f"device memory leak: allocated grows {human_bytes(subject.slope_per_step)}/step "
                f"(confidence {conf}, {steps} steps)")
    elif kind == "host":
        text = (f"host memory leak: process RSS grows {human_bytes(subject.slope_per_step)}/step "
                f"(confidence {conf}, {steps} steps)")
    else:
        text = f"no leak: {subject.series.replace('_bytes', '')} flat over {steps} steps " \
               f"({human_bytes(subject.slope_per_step)}/step)"
    if oom_step is not None:
        text += f"; out of memory at about step {oom_step}"
    if reserved_growth and reserved is not None:
        text += f"; reserved grows {human_bytes(reserved.slope_per_step)}/step while allocated is flat"
    if step_change is not None:
        text += f"; one-time rise of {human_bytes(step_change)} (not a leak)"
    return text


def _advice(kind: str, reserved_growth: bool, device: Optional[str], retries: Optional[int], ooms: Optional[float],
            step_change: Optional[float]) -> List[str]:
    advice: List[str] = []
    if kind == "device":
        advice.append("something keeps tensors alive across steps: a loss or output stored with its graph "
                      "(append loss.item() or loss.detach(), not loss), a growing list or cache of tensors, "
                      "hooks holding activations")
    if kind == "host":
        advice.append("the process keeps host memory across steps: tensors or batches kept in Python lists, "
                      "a cache in the Dataset, pinned buffers; compare tracemalloc snapshots between steps")
    if reserved_growth:
        backend = "npu" if device and device.startswith("npu") else "cuda" if device and device.startswith("cuda") \
            else None
        setting = {"npu": EXPANDABLE_NPU, "cuda": EXPANDABLE_CUDA}.get(backend or "", f"{EXPANDABLE_NPU} (NPU) "
                                                                                      f"or {EXPANDABLE_CUDA} (CUDA)")
        call = f"torch.{backend}.empty_cache()" if backend else "torch.npu.empty_cache() / torch.cuda.empty_cache()"
        advice.append(f"the caching allocator fragments (reserved grows, allocated does not): set {setting}, "
                      f"or call {call} between phases with different tensor shapes")
    if retries:
        advice.append(f"{retries} allocations succeeded only after the allocator freed its cache (alloc retries): "
                      "memory is near full; expect slow steps and then an OOM")
    if ooms:
        advice.append(f"the allocator reported {int(ooms)} out-of-memory error(s)")
    if step_change is not None and kind == "none":
        advice.append("a one-time rise is a buffer created once (optimizer state, an eval pass); "
                      "record more steps if it keeps happening")
    return advice
