"""Level 3: the reference CLIP training step in a child interpreter (``python -m npudoctor.workload.selftest``).

The child is the target interpreter (``--python``, else ``python3`` on PATH: the one training runs with),
with npudoctor's own directory *appended* to ``PYTHONPATH`` so that its torch (and torch_npu) win and only
npudoctor itself comes from here. It prints ``NPUDOCTOR-STAGE`` lines and one ``NPUDOCTOR-RESULT <json>``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Dict, Optional

from npudoctor.knowledge import setting
from npudoctor.probes import provides
from npudoctor.probes.sources import Command

SELFTEST_MODULE = "npudoctor.workload.selftest"


@dataclass(frozen=True)
class TrainTrial:
    python: str
    ran: bool
    rc: Optional[int]
    last_stage: str
    result: Optional[Dict[str, Any]]  # the npudoctor.trainresult/1 document, None when none came
    output_tail: str
    error: Optional[str] = None  # "timeout", "not-found", "not-recorded", ...
    timeout_s: float = 0.0


def parse_selftest_output(stdout: str) -> tuple[str, Optional[Dict[str, Any]]]:
    """(last stage, result document) from the child's stdout.

    >>> parse_selftest_output('NPUDOCTOR-STAGE train\\nNPUDOCTOR-RESULT {"schema": "x", "stage": "done"}\\n')
    ('train', {'schema': 'x', 'stage': 'done'})
    """
    stages = re.findall(r"^NPUDOCTOR-STAGE (.+)$", stdout, re.M)
    result = None
    for line in stdout.splitlines():
        if line.startswith("NPUDOCTOR-RESULT "):
            try:
                parsed = json.loads(line[len("NPUDOCTOR-RESULT "):])
            except ValueError:
                continue
            result = parsed if isinstance(parsed, dict) else None
    return (stages[-1] if stages else ""), result


@provides("train_selftest")
def train_selftest(ctx: Any) -> TrainTrial:
    """Equivalent to ``python3 -m npudoctor.workload.selftest --steps 40`` (tiny CLIP, memory log, leak verdict,
    operator and CPU comparisons), killed after ``train.timeout_s``."""
    from npudoctor.probes.libraries import installed_packages

    python = installed_packages(ctx).python or sys.executable
    env = dict(ctx.runner.environ())
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the directory holding npudoctor/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), own) if p)
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # torch_npu is probed and imported by the child itself
    settings = ctx.profile.get("train", {}) or {}
    timeout = float(setting(ctx.profile, "train.timeout_s"))
    argv = (python, "-m", SELFTEST_MODULE, "--steps", str(int(setting(ctx.profile, "train.steps"))),
            "--batch", str(int(setting(ctx.profile, "train.batch"))),
            "--settings", json.dumps(settings, sort_keys=True))
    result = ctx.runner.run(Command(argv, timeout_s=timeout, env=tuple(sorted(env.items()))))
    stage, document = parse_selftest_output(result.stdout)
    tail = re.sub(r"^NPUDOCTOR-(STAGE|RESULT) .*\n?", "", result.output, flags=re.M).strip()[-1500:]
    return TrainTrial(python, result.ran, result.rc, stage, document, tail, result.error, timeout)
