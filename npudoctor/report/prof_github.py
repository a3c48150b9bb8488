"""``prof --format github``: GitHub Actions workflow commands, one per PROF finding that is not PASS/SKIP."""

from __future__ import annotations

from typing import TYPE_CHECKING, List

from npudoctor.model.finding import Status
from npudoctor.report.logs_github import _data, _property  # the same escaping as `logs scan --format github`

if TYPE_CHECKING:
    from npudoctor.prof.engine import ProfResult

LEVEL = {Status.FAIL: "error", Status.ERROR: "error", Status.WARN: "warning"}


def render(result: ProfResult) -> str:
    out: List[str] = []
    for finding in result.findings:
        level = LEVEL.get(finding.status)
        if level is None:
            continue
        title = f"{finding.id} {finding.title}" + (f" [{finding.subject}]" if finding.subject else "")
        message = finding.detail + (f"\nfix: {finding.fix}" if finding.fix else "")
        out.append(f"::{level} title={_property(title)}::{_data(message)}")
    return "".join(line + "\n" for line in out)
