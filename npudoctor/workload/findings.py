"""The train-step run as a report: the same TRN findings ``check --level 3`` gives, for an in-process run."""

from __future__ import annotations

import platform
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional

from npudoctor import __version__
from npudoctor.checks import workload as checks
from npudoctor.checks.registry import REGISTRY, Outcome
from npudoctor.knowledge import setting
from npudoctor.model.finding import Finding, Report
from npudoctor.model.profile import NodeProfile


def train_report(document: Dict[str, Any], profile: NodeProfile, injected: Optional[str] = None) -> Report:
    """Findings TRN001-TRN006 for a ``npudoctor.trainresult/1`` document (parts not run are left out)."""
    parts: List[tuple] = [("TRN001", lambda: checks.device_outcome(document, python=sys.executable))]
    if document.get("train"):
        parts += [
            ("TRN002", lambda: checks.loss_outcome(document)),
            ("TRN003", lambda: checks.leak_outcome(document, injected)),
            ("TRN005", lambda: checks.data_wait_outcome(
                document, float(setting(profile, "train.data_wait_max_fraction")))),
        ]
        if "cpu_fallbacks" in document["train"] or document.get("ops_audit") is not None:
            parts.append(("TRN006", lambda: checks.fallback_outcomes(document)))
    if document.get("ops") is not None or document.get("compare_cpu") is not None:
        parts.append(("TRN004", lambda: checks.numerics_outcomes(document)))
    findings: List[Finding] = []
    for check_id, outcomes in sorted(parts, key=lambda part: part[0]):
        findings.extend(_stamp(check_id, outcomes))
    return Report(findings=findings,
                  tool={"name": "npudoctor", "version": __version__,
                        "python": ".".join(map(str, sys.version_info[:3])), "profile": profile.name,
                        "command": "train-step"},
                  host={"hostname": platform.node()}, source="live")


def leak_report(verdict: Dict[str, Any], device: str, source: str) -> Report:
    """``npudoctor leak analyze``: the TRN003 finding for a recorded log's leak verdict (``LeakVerdict.to_dict()``)."""
    document = {"device": device, "train": {"verdict": verdict}}
    return Report(findings=_stamp("TRN003", lambda: checks.leak_outcome(document)),
                  tool={"name": "npudoctor", "version": __version__, "command": "leak analyze"}, source=source)


def _stamp(check_id: str, outcomes: Callable[[], Iterable[Outcome]]) -> List[Finding]:
    spec = REGISTRY[check_id]
    return [Finding(id=spec.id, status=o.status, title=spec.title, subject=o.subject, detail=o.detail,
                    evidence=dict(o.evidence), fix=o.fix, stage=spec.stage) for o in outcomes()]
