"""The recorded leak corpus (``tests/data/leak_corpus``, made by ``python bench/leak_corpus.py``): readers and
the per-run figures of the closing note.

    python -m tests.leak_corpus          # the per-run table: verdict, first right step, bytes/step vs kept
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from npudoctor.model.units import human_bytes
from npudoctor.workload import leak, memlog

CORPUS = Path(__file__).parent / "data" / "leak_corpus"

#: What each leaking run must be called: the cause its counters show.
EXPECTED_CAUSE = {"leak_dataset_cache_workers": "workers"}

#: Leaks that no honest statistic finds at 40-50 steps: a variable batch (16..256) moves malloc's in-use bytes by
#: +-3 MiB from step to step (the live batch), and 64 KiB/step passes ten times that noise only at ~200 steps.
#: Before that their verdict may be "no leak (yet)", never a leak of another cause.
FOUND_FROM = {"leak_variable_64k": 200}


def runs() -> List[Dict[str, Any]]:
    return json.loads((CORPUS / "index.json").read_text())["runs"]


def records(run: Dict[str, Any]) -> List[memlog.Record]:
    with gzip.open(CORPUS / run["file"], "rt", encoding="utf-8") as handle:
        parsed = (memlog.parse_line(line) for line in handle)
        return [record for record in parsed if record is not None]


def right(run: Dict[str, Any], verdict: leak.LeakVerdict, steps: Optional[int] = None) -> bool:
    """A clean run is never called a leak; a leaking one is, with the cause its construction has (before
    ``FOUND_FROM`` steps, not yet found is right too)."""
    if not run["leak"]:
        return not verdict.leak
    cause = EXPECTED_CAUSE.get(run["name"], "host-objects")
    if steps is not None and steps < FOUND_FROM.get(run["name"], 0) and not verdict.leak:
        return True
    return verdict.leak and verdict.cause == cause


def at(records_: List[memlog.Record], steps: int) -> leak.LeakVerdict:
    return leak.analyze([r for r in records_ if r["step"] < steps])


def first_right(run: Dict[str, Any], records_: List[memlog.Record], every: int = 10) -> Optional[int]:
    """The step count from which the verdict is right at every later count checked (every ``every`` steps)."""
    last = records_[-1]["step"] + 1
    counts = [*range(every, last, every), last]
    first: Optional[int] = None
    for count in counts:
        if right(run, at(records_, count)):
            first = count if first is None else first
        else:
            first = None
    return first


def table(counts: Tuple[int, ...] = (40, 50, 200, 300)) -> List[str]:
    lines = [f"{'run':<34}{'seed':>4}  " + "  ".join(f"@{c:<3}" for c in counts)
             + "  first  est/step   kept/step  cause / verdict at the end"]
    for run in runs():
        recs = records(run)
        verdicts = [at(recs, count) for count in counts]
        marks = "  ".join(("ok  " if right(run, v, c) else "XX  ") for v, c in zip(verdicts, counts))
        final = verdicts[-1]
        kept = run.get("kept_bytes_per_step")
        estimate = final.slope_bytes_per_step if final.leak else None
        lines.append(f"{run['name']:<34}{run['seed']:>4}  {marks}{first_right(run, recs) or '-':>5}  "
                     f"{human_bytes(estimate) if estimate is not None else '-':>9}  "
                     f"{human_bytes(kept) if kept else '-':>10}  {final.kind}/{final.cause}: "
                     f"{final.summary[:90]}")
    return lines


if __name__ == "__main__":
    print("\n".join(table()))
