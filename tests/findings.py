"""Looking findings up in a report, for the stage tests."""

from __future__ import annotations

from typing import Dict, List, Optional

from npudoctor.api import findings_by_id
from npudoctor.model.finding import Finding, Report, Status


def findings_of(report: Report, check_id: str, subject: Optional[str] = None) -> List[Finding]:
    """The findings of ``check_id`` (about ``subject`` when given); the test fails when there is none."""
    found = [f for f in findings_by_id(report, check_id) if subject is None or f.subject == subject]
    assert found, f"no {check_id} finding"
    return found


def one_finding(report: Report, check_id: str, subject: Optional[str] = None) -> Finding:
    """The only finding of ``check_id`` (about ``subject`` when given); the test fails on none or several."""
    found = findings_of(report, check_id, subject)
    assert len(found) == 1, found
    return found[0]


def statuses_of(report: Report, check_id: str) -> List[Status]:
    """The statuses of ``check_id``'s findings, in report order."""
    return [f.status for f in findings_by_id(report, check_id)]


def statuses_by_subject(report: Report, check_id: str) -> Dict[str, Status]:
    """subject -> status of ``check_id``'s findings."""
    return {f.subject: f.status for f in findings_by_id(report, check_id)}
