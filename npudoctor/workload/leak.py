"""The leak verdict over a ``npudoctor.memlog`` log (/1 or /2): pure Python, torch-free.

Every memory series of the run is judged on its own, then the counters name the cause:

- **The end of the warm-up is found from the series**, not a fixed share: a change point (the knee of a
  two-slope, continuous least-squares fit on a running median) where a faster early rise turns into the
  run's later slope. Only what follows it is judged.
- **The shape of what follows**: its slope is Theil-Sen's (median of pairwise slopes) and its significance a
  Mann-Kendall trend test (one-sided, ties corrected). A *step* (one rise, then flat: a buffer created once)
  is told apart by removing the largest level shift and testing again: when nothing significant is left, it
  is a step, reported with its size and step, never a leak, whatever the jitter. A rise whose second half is
  much slower than its first is *still warming up* ("growing, may still be warm-up": record more steps).
  What rises steadily through the window is a leak when its total over the window is above the series'
  floor (exact allocator counters: 256 KiB; RSS: 1 MiB, and five times the series' own noise) or when it
  would run out of memory within ``oom_horizon_steps``; there is no per-step floor, so a slow leak over a
  long run is found.
- **The cause, from the counters**: device ``allocated_bytes`` rising: tensors kept alive (device leak);
  ``reserved_bytes`` rising while allocated is flat: the caching allocator fragments (not a leak of the
  program, but it ends in an OOM; ``inactive_split_bytes`` shows the split blocks); DataLoader workers' summed
  RSS rising: a worker keeps what it loads; the host C allocator's in-use bytes (glibc ``mallinfo2``) rising,
  or RSS rising beyond what malloc holds: the process keeps host objects; RSS and malloc's held bytes rising
  while in-use is flat: host allocator fragmentation. Without ``mallinfo2`` (a /1 log, musl, macOS) RSS
  growth cannot be split that way, and the verdict says so.

The work is bounded: a long log is thinned to ``max_points`` evenly spaced records before the O(m^2) pair
statistics, so a 100,000-step log costs the same as a 256-step one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor.model.units import confidence_percent, human_bytes
from npudoctor.workload.memlog import RecordLike, last_run

#: ``PYTORCH_*_ALLOC_CONF`` settings that let the caching allocator grow segments instead of fragmenting.
EXPANDABLE_NPU = "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"
EXPANDABLE_CUDA = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"

#: Shapes of a series after its warm-up.
FLAT, RISING, STEP, WARMING, SHORT = "flat", "rising", "step", "warming", "short"

#: Series whose counters are exact (an allocator's books); the others move with the kernel's page moods.
EXACT_SERIES = ("allocated_bytes", "reserved_bytes", "malloc_in_use_bytes")
#: Every record field :func:`analyze` reads: a reader may keep only these (``memlog.read_columns``).
VERDICT_FIELDS = ("schema", "run", "step", "device", "allocated_bytes", "reserved_bytes", "rss_bytes",
                  "workers_rss_bytes", "malloc_in_use_bytes", "malloc_held_bytes", "inactive_split_bytes",
                  "alloc_retries", "ooms", "device_total_bytes", "host_total_bytes")


@dataclass(frozen=True)
class LeakSettings:
    """Thresholds (profile keys ``train.leak.*``)."""

    warmup_steps: Optional[int] = None  # records skipped at the start; None: found from each series
    warmup_fraction: float = 0.5  # the found warm-up takes at most this share of the run
    min_warmup_steps: int = 3
    min_points: int = 8  # fewer records after the warm-up: no verdict (insufficient data)
    alpha: float = 0.001  # Mann-Kendall one-sided significance for "it rises"
    min_device_slope_bytes_per_step: float = 0.0  # optional per-step floors (0: the totals below decide)
    min_host_slope_bytes_per_step: float = 0.0
    min_growth_bytes: float = 1 << 20  # RSS-like series: smallest total rise over the window called a leak
    min_exact_growth_bytes: float = 1 << 18  # allocator counters (device, malloc in-use): they are exact
    min_outside_malloc_growth_bytes: float = 16 << 20  # RSS rising while malloc in-use is recorded and flat:
    # pymalloc arenas, mmaps and stacks move RSS by MiBs (a gc-churning run rose 11 MiB in its first 40 steps)
    noise_factor: float = 10.0  # ... and the total must be this many times the series' own noise
    oom_horizon_steps: float = 100_000  # a steady rise that fills memory within this many steps is a leak
    slowdown_ratio: float = 0.8  # second half rising slower than this share of the first (and outside both
    # slopes' 99% confidence intervals): still warming up
    half_alpha: float = 0.01  # the later half of a leak must rise on its own too (Mann-Kendall, one-sided)
    max_points: int = 160  # pairs grow with the square: 160 points cost 12,720 pairs, 256 cost 32,640

    @classmethod
    def from_mapping(cls, values: Optional[Mapping[str, Any]]) -> LeakSettings:
        if not values:
            return cls()
        known = {name: values[name] for name in cls.__dataclass_fields__ if name in values}
        return cls(**known)


@dataclass(frozen=True)
class Trend:
    """One series after its own warm-up."""

    series: str
    points: int
    warmup_steps: int  # records of the run before this series' change point
    first_step: float  # step where the judged window starts
    shape: str  # FLAT, RISING, STEP, WARMING or SHORT
    slope_per_step: float  # Theil-Sen over the window (the later half when the first half was warm-up)
    confidence: float  # 1 - p of the one-sided Mann-Kendall test for a rise (0..1)
    rise_bytes: float  # slope x window span (for a step: the step's size)
    noise_bytes: float  # robust spread around the trend line (1.4826 x MAD)
    step_bytes: Optional[float]  # the largest level shift, when the shape is STEP
    step_at: Optional[int]
    persistent: bool  # the rise runs through the window (not one step, not slowing down)
    growing: bool  # RISING and above the floor (total, noise or time to OOM)
    last_value: float


@dataclass(frozen=True)
class LeakVerdict:
    """The verdict on one run. ``leak`` is true for a device, host or worker leak (not for fragmentation,
    a one-time step or a warm-up that is still going).

    ``slope_bytes_per_step`` and ``confidence`` describe the series the verdict is about (``series``): the
    leaking one, else device ``allocated_bytes`` when recorded, else host ``rss_bytes``. ``cause`` names what
    the counters point at (``kept-tensors``, ``host-objects``, ``workers``, ``device-fragmentation``,
    ``host-fragmentation``, ``step``, ``warm-up``; ``None`` for a flat run).
    """

    leak: bool
    kind: str  # "device", "host", "workers", "none", "warm-up" or "insufficient-data"
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
    cause: Optional[str] = None
    growth_bytes: Optional[float] = None  # the subject's rise over its judged window
    step_change_at: Optional[int] = None
    host_fragmentation: bool = False
    workers_growth: bool = False
    workers_slope_bytes_per_step: Optional[float] = None
    malloc_in_use_slope_bytes_per_step: Optional[float] = None
    malloc_held_slope_bytes_per_step: Optional[float] = None
    inactive_split_slope_bytes_per_step: Optional[float] = None
    shapes: Dict[str, str] = field(default_factory=dict)  # series -> shape after its warm-up
    notes: List[str] = field(default_factory=list)  # what the log could not tell (no mallinfo2, /1 log)

    def to_dict(self) -> Dict[str, Any]:
        return {"schema": "npudoctor.leak/2", **asdict(self)}


def analyze(records: Sequence[RecordLike], settings: Optional[LeakSettings] = None,
            **overrides: Any) -> LeakVerdict:
    """Judge the last run in ``records`` (memlog records, e.g. from :func:`memlog.read_records`).

    ``overrides`` replace single :class:`LeakSettings` fields (``analyze(r, warmup_steps=0)``).
    """
    settings = settings or LeakSettings()
    if overrides:
        settings = LeakSettings(**{**asdict(settings), **overrides})
    run = sorted(last_run(list(records)), key=lambda r: r["step"])
    total = len(run)
    device = next((r.get("device") for r in reversed(run) if r.get("device")), None)
    retries = _delta(run, "alloc_retries")
    ooms = _last(run, "ooms")
    last_step = run[-1]["step"] if run else None
    device_free = _free(run, "device_total_bytes", ("reserved_bytes", "allocated_bytes"))
    host_free = _free(run, "host_total_bytes", ("rss_bytes", "workers_rss_bytes"))
    trends: Dict[str, Trend] = {}

    def judge(key: str) -> Optional[Trend]:
        free = device_free if key in ("allocated_bytes", "reserved_bytes", "inactive_split_bytes") else host_free
        trend = _trend(run, key, settings, free)
        if trend is not None:
            trends[key] = trend
        return trend

    # The series that name a leak; the two that only explain one are judged when it is there (the work halves).
    allocated, reserved, rss, workers, in_use = (judge(key) for key in (
        "allocated_bytes", "reserved_bytes", "rss_bytes", "workers_rss_bytes", "malloc_in_use_bytes"))
    held = judge("malloc_held_bytes") if rss is not None and rss.growing else None
    if reserved is not None and reserved.growing:
        judge("inactive_split_bytes")
    notes = _notes(run, rss, in_use)

    def grows(trend: Optional[Trend]) -> bool:
        return trend is not None and trend.growing

    # The cause, from the counters (the first that holds names the leak).
    kind, cause, subject = "none", None, None
    host_fragmentation = False
    # Host RSS growth that malloc's held bytes carry while its in-use bytes explain little of it: fragmentation.
    # (Kept objects pin the heap too: RSS then grows many times what is kept, so in-use growth is a leak first.)
    # (held is judged by its slope, not its shape: it moves with RSS page for page, a jitter may make one of two
    # near-equal series a step and the other a rise.)
    fragments = rss is not None and held is not None and rss.growing and \
        held.confidence >= 1 - settings.alpha and held.slope_per_step >= 0.5 * rss.slope_per_step
    if grows(allocated):
        kind, cause, subject = "device", "kept-tensors", allocated
    elif grows(in_use):
        kind, cause, subject = "host", "host-objects", in_use
        host_fragmentation = fragments and rss is not None and in_use is not None and \
            rss.slope_per_step > 4 * in_use.slope_per_step
    elif fragments:
        host_fragmentation, cause = True, "host-fragmentation"
    elif grows(rss) and rss is not None and (in_use is None or rss.rise_bytes >= max(
            settings.min_outside_malloc_growth_bytes, _floor(rss, settings))):
        kind, cause, subject = "host", "host-objects", rss
    if kind == "none" and grows(workers):
        kind, cause, subject = "workers", "workers", workers
    reserved_growth = grows(reserved) and kind != "device"
    if cause is None and reserved_growth:
        cause = "device-fragmentation"
    leak = kind in ("device", "host", "workers")

    judged = [t for t in (allocated, in_use, rss, workers) if t is not None]
    # No leak: the verdict speaks of a series that rises below its floor ("no leak yet"), else the main one.
    rising = next((t for t in judged if t.shape == RISING and t.rise_bytes >= 0.25 * _floor(t, settings)), None)
    main = subject or rising or allocated or rss or in_use
    if main is None or all(t.shape == SHORT for t in judged):
        longest = max((t.warmup_steps for t in judged), default=settings.min_warmup_steps)
        need = max(longest, settings.min_warmup_steps) + 2 * settings.min_points
        base = _base(device, total, longest, main, run, retries, ooms)
        return LeakVerdict(
            leak=False, kind="insufficient-data", series=None, slope_bytes_per_step=0.0, confidence=0.0,
            projected_oom_step=None, reserved_growth=False, reserved_slope_bytes_per_step=None,
            rss_growth=False, rss_slope_bytes_per_step=None, step_change_bytes=None,
            summary=(f"not enough steps to judge: {total} recorded "
                     f"(at least {settings.min_points} with memory figures after the warm-up are needed)"),
            advice=[f"record more steps (e.g. --steps {need})"], notes=notes, **base)

    step_trend = None
    warming = None
    if not leak:
        step_trend = next((t for t in judged if t.shape == STEP and t.step_bytes is not None
                           and t.step_bytes >= _floor(t, settings)), None)
        warming = next((t for t in judged if t.shape == WARMING), None)
        if cause is None and warming is not None:
            kind, cause = "warm-up", "warm-up"
        elif cause is None and step_trend is not None:
            cause = "step"
    if warming is not None and kind == "warm-up":
        main = warming
    oom_step: Optional[int] = None
    if leak and subject is not None:
        free = device_free if kind == "device" else host_free
        if free is not None:
            oom_step = last_step + max(0, math.ceil(free / subject.slope_per_step)) \
                if subject.slope_per_step > 0 and last_step is not None else None
    base = _base(device, total, main.warmup_steps, main, run, retries, ooms)
    step_change = step_trend.step_bytes if step_trend is not None else None
    summary = _summary(kind, cause, main, oom_step, reserved, rss, workers, held, step_trend, trends,
                       _floor(main, settings))
    advice = _advice(kind, cause, reserved_growth, device, retries, ooms, step_trend, warming, settings, total)
    if host_fragmentation and kind != "none":
        advice.append(_FIX["pinned-heap"])
    return LeakVerdict(
        leak=leak, kind=kind, series=main.series, slope_bytes_per_step=main.slope_per_step,
        confidence=main.confidence, projected_oom_step=oom_step, reserved_growth=reserved_growth,
        reserved_slope_bytes_per_step=reserved.slope_per_step if reserved else None,
        rss_growth=grows(rss), rss_slope_bytes_per_step=rss.slope_per_step if rss else None,
        step_change_bytes=step_change, summary=summary, advice=advice, cause=cause,
        growth_bytes=main.rise_bytes, step_change_at=step_trend.step_at if step_trend else None,
        host_fragmentation=host_fragmentation, workers_growth=grows(workers),
        workers_slope_bytes_per_step=workers.slope_per_step if workers else None,
        malloc_in_use_slope_bytes_per_step=in_use.slope_per_step if in_use else None,
        malloc_held_slope_bytes_per_step=held.slope_per_step if held else None,
        inactive_split_slope_bytes_per_step=trends["inactive_split_bytes"].slope_per_step
        if "inactive_split_bytes" in trends else None,
        shapes={key: trend.shape for key, trend in trends.items()}, notes=notes, **base)


def _base(device: Optional[str], total: int, warmup: int, main: Optional[Trend], run: Sequence[RecordLike],
          retries: Optional[int], ooms: Optional[float]) -> Dict[str, Any]:
    window = [r for r in run if main is not None and r["step"] >= main.first_step] if main else run[warmup:]
    return dict(device=device, steps_total=total, warmup_steps=warmup, steps_analyzed=len(window),
                first_step=window[0]["step"] if window else None, last_step=window[-1]["step"] if window else None,
                alloc_retries=retries, ooms=int(ooms) if ooms is not None else None)


def _notes(run: Sequence[RecordLike], rss: Optional[Trend], in_use: Optional[Trend]) -> List[str]:
    notes: List[str] = []
    if rss is not None and in_use is None:
        old = all(r.get("schema") == "npudoctor.memlog/1" for r in run)
        why = "a memlog/1 log" if old else "no glibc mallinfo2 on the recording host (musl, macOS, old glibc)"
        notes.append(f"host allocator counters not recorded ({why}): kept host objects and malloc "
                     "fragmentation cannot be told apart")
    if rss is not None and not any(isinstance(r.get("workers_rss_bytes"), int) for r in run):
        notes.append("DataLoader workers' memory not recorded (a memlog/1 log): a leak inside workers is not seen")
    return notes


def _free(run: Sequence[RecordLike], total_key: str, used_keys: Sequence[str]) -> Optional[float]:
    capacity = _last(run, total_key)
    if not capacity:
        return None
    used = 0.0
    for key in used_keys:
        value = _last(run, key)
        if value is not None:
            if total_key == "device_total_bytes":  # reserved holds allocated: the larger of the two is used
                used = max(used, value)
            else:
                used += value
    return max(0.0, capacity - used)


def _values(window: Sequence[RecordLike], key: str) -> Tuple[List[float], List[float]]:
    xs: List[float] = []
    ys: List[float] = []
    for record in window:
        value = record.get(key)
        # A byte count is 0..2^63 (a hostile or broken log's 1e308 would overflow the differences to inf).
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < _MAX_BYTES \
                and abs(record["step"]) < _MAX_BYTES:
            xs.append(float(record["step"]))
            ys.append(float(value))
    return xs, ys


_MAX_BYTES = float(1 << 63)


def _floor(trend: Trend, settings: LeakSettings) -> float:
    """The smallest total rise of this series worth a verdict: its counter's floor, and above its own noise."""
    base = settings.min_exact_growth_bytes if trend.series in EXACT_SERIES else settings.min_growth_bytes
    return max(base, settings.noise_factor * trend.noise_bytes)


def _trend(run: Sequence[RecordLike], key: str, settings: LeakSettings, free: Optional[float]) -> Optional[Trend]:
    xs, ys = _values(run, key)
    if len(xs) < 2:
        return None
    last_value = ys[-1]
    xs, ys = _thin(xs, ys, settings.max_points)
    if min(ys) == max(ys) and len(xs) >= settings.min_warmup_steps + settings.min_points:
        # constant (no workers: 0 every step): flat, without the pair statistics
        return Trend(series=key, points=len(xs), warmup_steps=0, first_step=xs[0], shape=FLAT, slope_per_step=0.0,
                     confidence=0.0, rise_bytes=0.0, noise_bytes=0.0, step_bytes=None, step_at=None,
                     persistent=False, growing=False, last_value=last_value)
    if settings.warmup_steps is not None:
        first = run[min(settings.warmup_steps, len(run) - 1)]["step"] if run else 0
        start = next((i for i, x in enumerate(xs) if x >= first), len(xs))
        if settings.warmup_steps >= len(run):
            start = len(xs)
    else:
        start = change_point(xs, ys, settings.min_warmup_steps,
                             max(settings.min_warmup_steps, int(settings.warmup_fraction * len(xs))))
    warmup_records = sum(1 for r in run if r["step"] < xs[start]) if start < len(xs) else len(run)
    wx, wy = xs[start:], ys[start:]
    if len(wx) < settings.min_points:
        return Trend(series=key, points=len(wx), warmup_steps=warmup_records, first_step=wx[0] if wx else xs[-1],
                     shape=SHORT, slope_per_step=0.0, confidence=0.0, rise_bytes=0.0, noise_bytes=0.0,
                     step_bytes=None, step_at=None, persistent=False, growing=False, last_value=last_value)
    base = settings.min_exact_growth_bytes if key in EXACT_SERIES else settings.min_growth_bytes
    shape, slope, confidence, noise, step, step_at, wx = _shape(wx, wy, settings, base)
    lowest = min(settings.min_warmup_steps, len(xs))
    if shape == FLAT and settings.warmup_steps is None and start > lowest:
        # The knee may have been one rise, not a ramp (a buffer made at step 300): then it is reported as a step.
        whole = _shape(xs[lowest:], ys[lowest:], settings, base)
        if whole[0] == STEP:
            shape, slope, confidence, noise, step, step_at, wx = whole
            start = lowest
            warmup_records = sum(1 for r in run if r["step"] < xs[start])
    span = wx[-1] - wx[0]
    rise = step if shape == STEP and step is not None else max(slope, 0.0) * span
    trend = Trend(series=key, points=len(wx), warmup_steps=warmup_records, first_step=wx[0], shape=shape,
                  slope_per_step=slope, confidence=confidence, rise_bytes=rise, noise_bytes=noise,
                  step_bytes=step, step_at=step_at, persistent=shape == RISING, growing=False,
                  last_value=last_value)
    min_slope = settings.min_device_slope_bytes_per_step if key in ("allocated_bytes", "reserved_bytes") \
        else settings.min_host_slope_bytes_per_step
    soon = free is not None and slope > 0 and free / slope <= settings.oom_horizon_steps
    growing = shape == RISING and slope > 0 and slope >= min_slope and (rise >= _floor(trend, settings) or soon)
    return Trend(**{**asdict(trend), "growing": growing})


def _shape(xs: List[float], ys: List[float], settings: LeakSettings, base_floor: float
           ) -> Tuple[str, float, float, float, Optional[float], Optional[int], List[float]]:
    """(shape, slope, confidence, noise, step size, step at, the xs judged) of a window after its warm-up;
    ``base_floor``: the series' smallest rise worth a word (a slowdown of less is flat, not a warm-up)."""
    slope, confidence = theil_sen_mann_kendall(xs, ys)
    noise = _noise(xs, ys, slope)
    significant = confidence >= 1 - settings.alpha and slope > 0
    if not significant:
        return FLAT, slope, confidence, noise, None, None, xs
    # A step: one level shift with flat ground on both sides (each side rises less than a quarter of the
    # shift, or not significantly); a ramp has no such place, a leak with one jump neither.
    at, size = largest_shift(ys)
    if size > 0 and all(_flat_beside(xs[part], ys[part], size, settings) for part in (slice(0, at), slice(at, None))):
        shifted = [y - size if i >= at else y for i, y in enumerate(ys)]
        rest, _ = theil_sen_mann_kendall(xs, shifted)
        return STEP, slope, confidence, _noise(xs, shifted, rest), size, int(xs[at]), xs
    # Freed again: what rose came back down by the end (a transient), whatever the slope over the window says.
    eighth = max(2, len(ys) // 8)
    if _median(ys[-eighth:]) - _median(ys[:eighth]) < 0.5 * slope * (xs[-1] - xs[0]):
        return FLAT, slope, confidence, noise, None, None, xs
    # The second half does not rise on its own: the rise ended (flat now). It rises clearly slower than the
    # first: a warm-up still going (or a leak behind it: more steps move the change point past the warm-up).
    half = len(xs) // 2
    if half >= 4:
        early, _, early_low, _ = sen_slope(xs[:half], ys[:half])
        late, late_confidence, _, late_high = sen_slope(xs[half:], ys[half:])
        if late_confidence < 1 - settings.half_alpha:
            return FLAT, slope, confidence, noise, None, None, xs  # it rose, then stopped: a warm-up that ended
        if early > 0 and late < settings.slowdown_ratio * early and late_high < early_low:
            late_noise = _noise(xs[half:], ys[half:], late)  # each half's own: the curve is no noise
            early_floor = max(base_floor, settings.noise_factor * _noise(xs[:half], ys[:half], early))
            late_floor = max(base_floor, settings.noise_factor * late_noise)
            if early * (xs[half - 1] - xs[0]) < early_floor or late * (xs[-1] - xs[half]) < late_floor:
                return FLAT, slope, confidence, noise, None, None, xs  # too small to be worth a word now
            return WARMING, late, late_confidence, late_noise, None, None, xs[half:]
    return RISING, slope, confidence, noise, None, None, xs


def _flat_beside(xs: Sequence[float], ys: Sequence[float], size: float, settings: LeakSettings) -> bool:
    if len(xs) < 3:
        return True
    slope, confidence = theil_sen_mann_kendall(xs, ys)
    return confidence < 1 - settings.alpha or max(slope, 0.0) * (xs[-1] - xs[0]) < 0.25 * size


def _noise(xs: Sequence[float], ys: Sequence[float], slope: float) -> float:
    """Robust spread of ``ys`` around the line of ``slope`` through them (1.4826 x median absolute deviation)."""
    residuals = [y - slope * x for x, y in zip(xs, ys)]
    centre = _median(residuals)
    return 1.4826 * _median([abs(r - centre) for r in residuals])


def largest_shift(ys: Sequence[float]) -> Tuple[int, float]:
    """(index, size) of the largest rise in level: median of the points after minus before, over windows of
    an eighth of the series (at least 2 points), so one odd point cannot fake it.

    >>> largest_shift([1, 1, 1, 1, 1, 9, 9, 9, 9, 9, 9])
    (5, 8.0)
    """
    n = len(ys)
    width = max(2, n // 8)
    best, best_at = 0.0, 0
    for i in range(width, n - width + 1):
        size = _median(ys[i:i + width]) - _median(ys[i - width:i])
        if size > best:
            best, best_at = size, i
    if best <= 0:
        return 0, 0.0
    # The level shift itself: the medians of everything after and before the jump.
    return best_at, _median(ys[best_at:]) - _median(ys[:best_at])


def change_point(xs: Sequence[float], ys: Sequence[float], lowest: int, highest: int) -> int:
    """Index where the warm-up ends: the knee of the best continuous two-slope least-squares fit (on a
    running median of 5, so single odd points do not pull it) when the early slope is at least twice the later
    one and the fit halves the error of one line; else ``lowest``. O(n) with running sums.

    >>> change_point(list(range(40)), [min(i, 10) * 100.0 for i in range(40)], 3, 20)
    10
    >>> change_point(list(range(40)), [5.0 + (i % 2) for i in range(40)], 3, 20)
    3
    """
    n = len(xs)
    highest = min(highest, n - 4)
    if highest <= lowest or n < 8:
        return min(lowest, n)
    smooth = [_median(ys[max(0, i - 2):i + 3]) for i in range(n)]
    x0, xspan = xs[0], (xs[-1] - xs[0]) or 1.0
    y0 = _median(smooth)
    yspan = (max(smooth) - min(smooth)) or 1.0
    u = [(x - x0) / xspan for x in xs]
    v = [(y - y0) / yspan for y in smooth]
    # suffix sums of 1, u, u^2, v, u v (for the hinge column h = max(0, u - u_c))
    sc = [0.0] * (n + 1)
    su = [0.0] * (n + 1)
    suu = [0.0] * (n + 1)
    sv = [0.0] * (n + 1)
    suv = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        sc[i], su[i], suu[i] = sc[i + 1] + 1, su[i + 1] + u[i], suu[i + 1] + u[i] * u[i]
        sv[i], suv[i] = sv[i + 1] + v[i], suv[i + 1] + u[i] * v[i]
    svv = sum(value * value for value in v)
    line = _line_sse(sc[0], su[0], suu[0], sv[0], suv[0], svv)
    best_sse, best = line, lowest
    for c in range(lowest, highest + 1):
        uc, m = u[c], sc[c]
        sh = su[c] - m * uc
        shh = suu[c] - 2 * uc * su[c] + m * uc * uc
        suh = suu[c] - uc * su[c]
        svh = suv[c] - uc * sv[c]
        gram = [[sc[0], su[0], sh], [su[0], suu[0], suh], [sh, suh, shh]]
        rhs = [sv[0], suv[0], svh]
        beta = _solve3(gram, rhs)
        # A warm-up rises at least twice as fast as what follows (a leak whose rate wobbles is no knee).
        if beta is None or beta[1] <= 0 or beta[1] + beta[2] > 0.5 * beta[1]:
            continue
        sse = svv - sum(b * r for b, r in zip(beta, rhs))
        if sse < best_sse:
            best_sse, best = sse, c
    if best != lowest and best_sse > 0.5 * line:
        return lowest  # the knee explains too little: no warm-up to speak of
    return best


def _line_sse(n: float, su: float, suu: float, sv: float, suv: float, svv: float) -> float:
    det = n * suu - su * su
    if det <= 0:
        return svv - sv * sv / n if n else 0.0
    b = (n * suv - su * sv) / det
    a = (sv - b * su) / n
    return svv - (a * sv + b * suv)


def _solve3(m: List[List[float]], r: List[float]) -> Optional[List[float]]:
    a = [[*row, value] for row, value in zip(m, r)]
    for col in range(3):
        pivot = max(range(col, 3), key=lambda row: abs(a[row][col]))
        if abs(a[pivot][col]) < 1e-12:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for row in range(3):
            if row != col:
                factor = a[row][col] / a[col][col]
                a[row] = [x - factor * y for x, y in zip(a[row], a[col])]
    return [a[i][3] / a[i][i] for i in range(3)]


def _thin(xs: List[float], ys: List[float], limit: int) -> Tuple[List[float], List[float]]:
    """At most ``limit`` evenly spaced points, first and last included."""
    n = len(xs)
    if n <= limit:
        return xs, ys
    picks = sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return [xs[i] for i in picks], [ys[i] for i in picks]


def _median(values: Sequence[float]) -> float:
    return _median_sorted(sorted(values))


def _median_sorted(ordered: Sequence[float]) -> float:
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
    slope, confidence, _, _ = sen_slope(xs, ys)
    return slope, confidence


def sen_slope(xs: Sequence[float], ys: Sequence[float], z: float = 2.576) -> Tuple[float, float, float, float]:
    """(slope, confidence of a rise, low, high): Theil-Sen's slope, the one-sided Mann-Kendall confidence,
    and Sen's confidence interval of the slope (two-sided, ``z`` = 2.576: 99%) from the same pairs.

    >>> sen_slope([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [0, 2, 4, 6, 8, 10, 12, 14, 16, 18])[2:]
    (2.0, 2.0)
    """
    n = len(xs)
    slopes: List[float] = []
    s = 0
    for i in range(n - 1):  # one row of pairs at a time, in comprehensions (3x faster than a double loop)
        xi, yi = xs[i], ys[i]
        rises = [y - yi for y in ys[i + 1:]]
        s += sum(1 for dy in rises if dy > 0) - sum(1 for dy in rises if dy < 0)
        slopes.extend([dy / (x - xi) for dy, x in zip(rises, xs[i + 1:]) if x != xi])
    slopes.sort()
    slope = _median_sorted(slopes) if slopes else 0.0
    # Variance of S with the correction for tied values (allocator counters repeat exactly).
    counts: Dict[float, int] = {}
    for y in ys:
        counts[y] = counts.get(y, 0) + 1
    variance = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in counts.values())) / 18
    if variance <= 0 or not slopes:
        return slope, 0.0, slope, slope
    half_width = z * math.sqrt(variance)
    low_rank = max(0, int((len(slopes) - half_width) / 2))
    high_rank = min(len(slopes) - 1, math.ceil((len(slopes) + half_width) / 2))
    score = (s - 1) / math.sqrt(variance) if s > 0 else (s + 1) / math.sqrt(variance) if s < 0 else 0.0
    p_rise = 0.5 * math.erfc(score / math.sqrt(2))
    return slope, 1.0 - p_rise, slopes[low_rank], slopes[high_rank]


def _last(run: Sequence[RecordLike], key: str) -> Optional[float]:
    for record in reversed(run):
        value = record.get(key)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _delta(run: Sequence[RecordLike], key: str) -> Optional[int]:
    values = [r[key] for r in run if isinstance(r.get(key), (int, float))]
    return int(values[-1] - values[0]) if values else None


_LABEL = {"allocated_bytes": "allocated", "reserved_bytes": "reserved", "rss_bytes": "process RSS",
          "workers_rss_bytes": "child processes' RSS (DataLoader workers)", "malloc_in_use_bytes": "host malloc in-use",
          "malloc_held_bytes": "host malloc held", "inactive_split_bytes": "inactive split blocks"}


def _summary(kind: str, cause: Optional[str], subject: Trend, oom_step: Optional[int], reserved: Optional[Trend],
             rss: Optional[Trend], workers: Optional[Trend], held: Optional[Trend], step: Optional[Trend],
             trends: Mapping[str, Trend], floor: float) -> str:
    """``floor``: the subject's smallest rise called a leak (a rise of a quarter of it is "no leak yet")."""
    label = _LABEL.get(subject.series, subject.series)
    steps = f"{subject.points} points from step {int(subject.first_step)}"
    growth = (f"{label} grows {human_bytes(subject.slope_per_step)}/step, {human_bytes(subject.rise_bytes)} "
              f"over the window (confidence {confidence_percent(subject.confidence)}, {steps})")
    if kind == "device":
        text = f"device memory leak: {growth}"
    elif kind == "host":
        text = f"host memory leak: {growth}"
    elif kind == "workers":
        text = f"memory leak in the DataLoader workers: {growth}"
    elif kind == "warm-up":
        text = (f"growing, may still be warm-up: {label} rises {human_bytes(subject.slope_per_step)}/step, "
                f"slowing down ({steps}); not judged yet")
    elif cause == "host-fragmentation" and rss is not None and held is not None:
        text = (f"no leak, but the host allocator fragments: RSS grows {human_bytes(rss.slope_per_step)}/step "
                f"and malloc holds {human_bytes(held.slope_per_step)}/step more while its in-use bytes are flat "
                f"(or a pool still filling: more steps tell)")
    elif subject.shape == RISING and subject.rise_bytes >= 0.25 * floor:
        text = (f"no leak yet: {label} rises {human_bytes(subject.slope_per_step)}/step, "
                f"{human_bytes(subject.rise_bytes)} over {subject.points} points from step {int(subject.first_step)}, "
                "less than a leak must add up to (record more steps to judge)")
    else:
        text = f"no leak: {label} flat after step {int(subject.first_step)} " \
               f"({human_bytes(subject.slope_per_step)}/step, {subject.points} points)"
    if oom_step is not None:
        text += f"; out of memory at about step {oom_step}"
    if cause == "device-fragmentation" and reserved is not None:
        text += f"; reserved grows {human_bytes(reserved.slope_per_step)}/step while allocated is flat"
        split = trends.get("inactive_split_bytes")
        if split is not None and split.growing:
            text += f" (inactive split blocks +{human_bytes(split.slope_per_step)}/step)"
    if kind == "host" and cause == "host-objects" and subject.series == "malloc_in_use_bytes" and rss is not None \
            and rss.growing and rss.slope_per_step > 4 * subject.slope_per_step:
        text += (f"; RSS grows {human_bytes(rss.slope_per_step)}/step, "
                 f"{rss.slope_per_step / max(subject.slope_per_step, 1.0):.0f}x what is kept: the kept objects "
                 "pin malloc's heap")
    if kind != "workers" and workers is not None and workers.growing:
        text += f"; the DataLoader workers also grow {human_bytes(workers.slope_per_step)}/step"
    if step is not None and step.step_bytes is not None:
        text += (f"; one-time rise of {human_bytes(step.step_bytes)} in {_LABEL.get(step.series, step.series)} "
                 f"at step {step.step_at} (a step, not a leak)")
    return text


_FIX = {
    "kept-tensors": "something keeps device tensors alive across steps: a loss or output stored with its graph "
                    "(append loss.item() or loss.detach(), not loss), a growing list or cache of tensors, hooks "
                    "holding activations; torch.cuda.memory._record_memory_history (CUDA) shows who allocates",
    "host-objects": "the training process keeps host objects across steps: tensors, batches or losses kept in "
                    "Python lists or dicts (keep loss.item(), detach and bound caches); compare tracemalloc and "
                    "gc.get_objects() counts between steps",
    "workers": "the DataLoader workers grow: the Dataset keeps what it loads (a cache in __getitem__ is kept "
               "once per worker); bound or drop the cache, share it through a file or shared memory, or let "
               "workers restart each epoch (persistent_workers=False)",
    "host-fragmentation": "the host C allocator fragments (RSS and malloc's held bytes grow, in-use does not): "
                          "variable tensor shapes leave holes; set MALLOC_ARENA_MAX=2 or MALLOC_TRIM_THRESHOLD_, "
                          "call ctypes.CDLL('libc.so.6').malloc_trim(0) between phases, or preload jemalloc or "
                          "tcmalloc (LD_PRELOAD)",
    "pinned-heap": "RSS grows many times what is kept: the kept objects pin partly used heap pages; freeing "
                   "them is the fix, MALLOC_ARENA_MAX=2 or malloc_trim(0) only return the rest sooner",
}


def _advice(kind: str, cause: Optional[str], reserved_growth: bool, device: Optional[str], retries: Optional[int],
            ooms: Optional[float], step: Optional[Trend], warming: Optional[Trend], settings: LeakSettings,
            total: int) -> List[str]:
    advice: List[str] = []
    if cause in _FIX:
        advice.append(_FIX[cause])
    if reserved_growth:
        backend = "npu" if device and device.startswith("npu") else "cuda" if device and device.startswith("cuda") \
            else None
        setting = {"npu": EXPANDABLE_NPU, "cuda": EXPANDABLE_CUDA}.get(backend or "", f"{EXPANDABLE_NPU} (NPU) "
                                                                                      f"or {EXPANDABLE_CUDA} (CUDA)")
        call = f"torch.{backend}.empty_cache()" if backend else "torch.npu.empty_cache() / torch.cuda.empty_cache()"
        advice.append(f"the caching allocator fragments (reserved grows, allocated does not): set {setting}, "
                      f"or call {call} between phases with different tensor shapes")
    if kind == "warm-up":
        advice.append(f"memory still rises but slower and slower (a warm-up: caches, allocator pools, worker "
                      f"copy-on-write); record more steps (e.g. --steps {max(2 * total, 200)}) to judge")
    if retries:
        advice.append(f"{retries} allocations succeeded only after the allocator freed its cache (alloc retries): "
                      "memory is near full; expect slow steps and then an OOM")
    if ooms:
        advice.append(f"the allocator reported {int(ooms)} out-of-memory error(s)")
    if step is not None and kind == "none":
        advice.append("a one-time rise is a buffer created once (optimizer state, an evaluation pass, a "
                      "checkpoint); record more steps if it keeps happening")
    return advice


def analyze_file(path: str, settings: Optional[LeakSettings] = None, **options: Any) -> Tuple[LeakVerdict, Any]:
    """The verdict on a memory log file, read as ``leak analyze`` reads it (the fields judged, the file's tail),
    and the records read. One reading for every command that judges a file (``leak analyze``, ``onboard
    --memlog``), so they give one verdict."""
    from npudoctor.workload.memlog import TAIL_BYTES, read_columns

    records = read_columns(path, VERDICT_FIELDS, max_bytes=TAIL_BYTES)
    return analyze(records, settings, **options), records
