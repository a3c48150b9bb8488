"""``npudoctor collect --samples N --interval S``: ``npu-smi info`` recorded N times, for the dashboard's replay.

Each answer is kept under its own key, ``sample:NNNN:cmd:npu-smi info``, with ``t_s`` (seconds from the first
sample) in the bundle manifest; the check's own ``npu-smi info`` record is untouched, so ``check --from``
reads the bundle as before.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from npudoctor.probes.npu_smi import NPU_SMI_DIRS
from npudoctor.probes.runner import Runner
from npudoctor.probes.sources import Command

SAMPLE_PREFIX = "sample:"
NPU_SMI_INFO = Command(("npu-smi", "info"), timeout_s=15.0, extra_dirs=NPU_SMI_DIRS)


def sample_key(index: int, command: Command = NPU_SMI_INFO) -> str:
    """>>> sample_key(3)
    'sample:0003:cmd:npu-smi info'
    """
    return f"{SAMPLE_PREFIX}{index:04d}:{command.key}"


def record_samples(runner: Runner, count: int, interval_s: float, command: Command = NPU_SMI_INFO,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep,
                   on_sample: Optional[Callable[[int, int], None]] = None) -> List[Tuple[str, Dict[str, Any]]]:
    """Equivalent to ``for i in $(seq N); do timeout 15 npu-smi info; sleep S; done``, each answer timed.

    Samples start every ``interval_s`` seconds (a slow npu-smi shortens the wait, never shifts the grid);
    the records are in the recording runner's ``(key, {"kind", "value", "t_s"})`` form for the bundle.
    """
    records: List[Tuple[str, Dict[str, Any]]] = []
    start = clock()
    for index in range(count):
        due = start + index * interval_s
        wait = due - clock()
        if wait > 0:
            sleep(wait)
        taken = clock() - start
        if on_sample is not None:  # progress: sample index + 1 of count is being taken
            on_sample(index, count)
        result = runner.run(command)
        records.append((sample_key(index, command), {"kind": "command", "value": result, "t_s": taken}))
    return records
