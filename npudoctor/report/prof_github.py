"""``prof --format github``: GitHub Actions workflow commands, one per PROF finding that is not PASS/SKIP, then a
summary annotation with the verdict (as ``logs scan --format github`` ends)."""

from __future__ import annotations

from typing import TYPE_CHECKING, List

from npudoctor.model.finding import Status
from npudoctor.report.github import annotation

if TYPE_CHECKING:
    from npudoctor.prof.model import ProfResult

LEVEL = {Status.FAIL: "error", Status.ERROR: "error", Status.WARN: "warning"}


def render(result: ProfResult, exit_code: int = 0) -> str:
    from npudoctor.report.console import verdict
    from npudoctor.report.prof_console import verdict_scope

    out: List[str] = []
    for finding in result.findings:
        level = LEVEL.get(finding.status)
        if level is None:
            continue
        title = f"{finding.id} {finding.title}" + (f" [{finding.subject}]" if finding.subject else "")
        message = finding.detail + (f"\nfix: {finding.fix}" if finding.fix else "")
        out.append(annotation(level, message, title))
    sentence = verdict(result.as_report(), scope=verdict_scope(result))
    out.append(annotation("error" if exit_code else "notice", f"{sentence}; exit {exit_code}", "npudoctor prof"))
    return "".join(line + "\n" for line in out)
