"""Repeated operator sequences in a kernel table's task order (PROF025), found with array arithmetic.

A sequence is ``L`` consecutive tasks (``min_ops <= L <= max_ops``) not cut by a communication or AI CPU
task; two windows are the same sequence when their tasks have the same operator names and shapes in the same
order. Windows are hashed by a rolling polynomial over the task codes (64-bit, wrapping), so each length costs
a few passes over the arrays. A sequence's occurrences are counted without overlap (a run of 20 identical
tasks holds 6 sequences of 3, not 18), which keeps its summed time within the profile's span.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

HASH_BASE = 1_000_003
CANDIDATES_PER_LENGTH = 20  # most time-covering sequences per length whose occurrences are counted exactly


class Found(NamedTuple):
    codes: Tuple[int, ...]     # the tasks' codes in order
    first_row: int             # row of the first occurrence in the analysed tasks (0 = first data row)
    occurrences: int           # without overlap
    span_us: float             # summed first start to last end of the occurrences
    busy_us: float             # summed task durations
    moved_us: float            # summed data-movement pipe time (mte2 + fixpipe/mte3)
    core_us: float             # summed core busy time (aicore + aiv)
    typical_span_us: float     # the median occurrence's span (a set-up gap inside one occurrence moves it not)
    typical_busy_share: float  # the median of each occurrence's busy time / span


def _non_overlapping(positions: Any, length: int) -> Any:
    """The positions kept when each occurrence must start after the previous kept one ends (greedy)."""
    import numpy as np

    if len(positions) < 2 or int(np.diff(positions).min()) >= length:
        return positions
    kept = []
    end = -1
    for position in positions.tolist():
        if position >= end:
            kept.append(position)
            end = position + length
    return np.asarray(kept, dtype=np.int64)


def find(arrays: Dict[str, Any], min_ops: int, max_ops: int, min_repeats: int) -> Tuple[List[Found], float]:
    """Sequences of ``min_ops``..``max_ops`` tasks seen ``min_repeats`` times or more (not overlapping), with
    their times; and the span of the tasks analysed (first start to last end)."""
    import numpy as np
    import pandas as pd

    codes = np.asarray(arrays["code"], dtype=np.int64)
    n = len(codes)
    if not n:
        return [], 0.0
    start = np.asarray(arrays["start"], dtype=float)
    duration = np.asarray(arrays["dur"], dtype=float)
    end = start + duration
    stops = np.asarray(arrays["brk"], dtype=bool)
    usable = ~stops
    span_total = float(end[usable].max() - start[usable].min()) if usable.any() else 0.0
    cum = {name: np.concatenate(([0.0], np.cumsum(np.asarray(arrays[name], dtype=float))))
           for name in ("dur", "moved", "busy")}
    cut = np.concatenate(([0], np.cumsum(stops.astype(np.int64))))
    hashed = (codes + 1).astype(np.uint64)
    rolling = hashed.copy()
    found: List[Found] = []
    with np.errstate(over="ignore"):
        for length in range(2, max_ops + 1):
            windows = n - length + 1
            if windows <= 0:
                break
            rolling = rolling[:windows] * np.uint64(HASH_BASE) + hashed[length - 1:length - 1 + windows]
            if length < min_ops:
                continue
            first = np.arange(windows)
            last = first + length - 1
            valid = (cut[first + length] - cut[first] == 0) & (end[last] > start[first])
            if valid.sum() < min_repeats:
                continue
            positions = first[valid]
            keys, _ = pd.factorize(rolling[valid], sort=False)
            counts = np.bincount(keys)
            spans = np.bincount(keys, weights=end[positions + length - 1] - start[positions])
            candidates = np.nonzero(counts >= min_repeats)[0]
            if not len(candidates):
                continue
            candidates = candidates[np.argsort(-spans[candidates], kind="stable")][:CANDIDATES_PER_LENGTH]
            order = np.argsort(keys, kind="stable")
            bounds = np.concatenate(([0], np.cumsum(counts)))
            for key in candidates.tolist():
                kept = _non_overlapping(positions[order[bounds[key]:bounds[key + 1]]], length)
                if len(kept) < min_repeats:
                    continue
                tail = kept + length
                spans_kept = end[tail - 1] - start[kept]
                busy_kept = cum["dur"][tail] - cum["dur"][kept]
                found.append(Found(
                    codes=tuple(codes[kept[0]:kept[0] + length].tolist()), first_row=int(kept[0]),
                    occurrences=len(kept), span_us=float(spans_kept.sum()), busy_us=float(busy_kept.sum()),
                    moved_us=float((cum["moved"][tail] - cum["moved"][kept]).sum()),
                    core_us=float((cum["busy"][tail] - cum["busy"][kept]).sum()),
                    typical_span_us=float(np.median(spans_kept)),
                    typical_busy_share=float(np.median(np.minimum(busy_kept / spans_kept, 1.0)))))
    return found, span_total


def period(codes: Sequence[int]) -> Tuple[int, ...]:
    """The shortest block whose repetition is ``codes`` ((a, b, a, b) -> (a, b))."""
    for size in range(1, len(codes) + 1):
        if len(codes) % size == 0 and tuple(codes[:size]) * (len(codes) // size) == tuple(codes):
            return tuple(codes[:size])
    return tuple(codes)


def contains(longer: Sequence[int], shorter: Sequence[int]) -> bool:
    """Whether ``shorter`` occurs in ``longer`` read around (a rotation of a repeated block counts)."""
    ring = tuple(longer) * 2
    size = len(shorter)
    return any(ring[i:i + size] == tuple(shorter) for i in range(len(longer)))
