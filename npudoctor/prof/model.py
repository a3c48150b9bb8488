"""The profiling doctor's data: a rank as read, the result of an analysis, and the PASS/WARN/FAIL rule.

The readers fill :class:`Rank`, the checks read it, the engine returns :class:`ProfResult`, the renderers
show it; none of them needs the engine's code for the shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from npudoctor.model import inputs
from npudoctor.model.finding import Finding, Report, Status, Summary
from npudoctor.prof.layout import Source
from npudoctor.untrusted import clean_value

if TYPE_CHECKING:
    from npudoctor.prof.kernels import KernelStats

SCHEMA = "npudoctor.prof/1"


@dataclass
class Rank:
    """One rank (or device) of the profiled job and what was read for it."""

    label: str
    source: Source
    device: str = ""                     # Device_id within an msprof collection holding several devices
    kernel: Optional[KernelStats] = None
    groups: Any = None                   # kernel groups of this rank/device (pandas DataFrame)
    tables_read: Dict[str, List[str]] = field(default_factory=dict)
    step_trace: Any = None               # DataFrame of step_trace_time rows (canonical columns)
    memory: Dict[str, Any] = field(default_factory=dict)
    links: List[Dict[str, Any]] = field(default_factory=list)  # communication.json bandwidth records
    utilization: Dict[str, Any] = field(default_factory=dict)   # sample-based per-core pipe ratios
    host_apis: List[Dict[str, Any]] = field(default_factory=list)  # api_statistic: the slowest host APIs
    problems: List[str] = field(default_factory=list)
    unused: List[str] = field(default_factory=list)  # files seen and not read (listed in the output)
    timeline: Any = None                 # HostTimeline: host-side events (trace_view.json or the .db)
    pp_stages: Any = None                # DataFrame of cluster_step_trace_time's Type=stage rows (PROF035)

    def core_count(self) -> Any:
        return self.source.core_count(self.device or None)


@dataclass
class ProfResult:
    ranks: List[Rank]
    findings: List[Finding]
    problems: List[str]
    paths: Sequence[str] = ()
    # (input, reason) for every PATH given that gave no readable table, and every rank whose tables all
    # failed: they make the exit code at least 1 (npudoctor.model.inputs).
    unreadable: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def summary(self) -> Summary:
        return Summary.of(self.findings)

    def exit_code(self, fail_on: str = "fail") -> int:
        return inputs.exit_code(self.as_report().exit_code(fail_on), len(self.unreadable))

    def as_report(self) -> Report:
        return Report(findings=list(self.findings), tool={"name": "npudoctor prof"}, source=", ".join(self.paths))

    def to_dict(self) -> Dict[str, Any]:
        from npudoctor.prof import figures

        # Op names and paths come from the profiled job's own files: no secret, no control character.
        return clean_value({
            "schema": SCHEMA,
            "paths": list(self.paths),
            "ranks": [figures.rank_dict(rank) for rank in self.ranks],
            "aicpu_ops": figures.aicpu_ops_all(self.ranks),
            "findings": [f.to_dict() for f in self.findings],
            "summary": self.summary.to_dict(),
            "problems": list(self.problems),
            "unreadable": [{"input": where, "reason": reason} for where, reason in self.unreadable],
        })


def status_for(value: float, warn: Optional[float], fail: Optional[float], higher_is_worse: bool = True) -> Status:
    """PASS / WARN / FAIL of ``value`` against profile thresholds (either may be None: not used)."""
    def beyond(limit: Optional[float]) -> bool:
        if limit is None:
            return False
        return value >= float(limit) if higher_is_worse else value < float(limit)

    if beyond(fail):
        return Status.FAIL
    if beyond(warn):
        return Status.WARN
    return Status.PASS
