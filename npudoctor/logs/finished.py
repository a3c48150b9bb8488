"""``logs scan --expect-success``: a run's log that lacks its success line is a run that did not finish.

A tool such as ATC says when it succeeded ("ATC run success"); a log of a run that was not found, crashed, was
killed or stopped halfway has no such line, and often no error a rule knows either. Told what a finished run
prints, a scan reports each input without it as an ``unfinished_run`` error, so a CI gate fails it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List

from npudoctor.logs.model import Evidence, LogFinding, ScanResult
from npudoctor.logs.rules import Rule

if TYPE_CHECKING:
    from npudoctor.logs.job import JobScan

# Tools whose success line is known, by name: the shipped rule that finds it (its kind and subject).
KNOWN_TOOLS: Dict[str, str] = {"atc": "ATC run success"}
_TOOL_KIND = {"atc": ("atc_success", "atc")}
MARKER_KIND = "success_line"
UNFINISHED_KIND = "unfinished_run"
MAX_MARKER_CHARS = 200


@dataclass(frozen=True)
class Expectation:
    """What a finished run's log holds: the text, and the (kind, subject) a scan counts it under."""

    text: str
    kind: str
    subject: str

    def rule(self) -> Rule:
        """The rule that finds ``text`` on any line of any level (none when a shipped rule finds it)."""
        return Rule(id="expect-success", kind=self.kind, severity="info", hints=(self.text,),
                    pattern=re.compile(re.escape(self.text)), title=f"Success line of the run: {self.text}",
                    subject=self.subject, any_level=True)


def expectation(value: str) -> Expectation:
    """The expectation ``--expect-success VALUE`` names: a known tool (``atc``) or the literal text of the
    success line. ValueError with a one-line reason for an empty or over-long text."""
    tool = value.strip().lower()
    if tool in KNOWN_TOOLS:
        kind, subject = _TOOL_KIND[tool]
        return Expectation(KNOWN_TOOLS[tool], kind, subject)
    text = value.strip()
    if not text or len(text) > MAX_MARKER_CHARS or "\n" in text:
        raise ValueError(f"--expect-success: expected a tool ({', '.join(KNOWN_TOOLS)}) or the text of the "
                         f"run's success line (one line, at most {MAX_MARKER_CHARS} characters)")
    return Expectation(text, MARKER_KIND, "success line")


def extra_rules(expected: Expectation) -> List[Rule]:
    """Rules a scan needs to see ``expected`` (a known tool's line is found by a shipped rule)."""
    return [] if expected.kind != MARKER_KIND else [expected.rule()]


def judge_finished(result: ScanResult, expected: Expectation) -> List[LogFinding]:
    """An ``unfinished_run`` error for each readable input that does not hold the success line; the
    findings are also added to ``result``."""
    missing = []
    for summary in result.readable_files:
        if summary.causes.get((expected.kind, expected.subject)):
            continue
        where = Evidence(summary.path, max(summary.lines, 1))
        missing.append(LogFinding(
            kind=UNFINISHED_KIND, subject=summary.path, severity="error",
            title=f"The run did not finish: no line says {expected.text!r}", count=1, first=where, last=where,
            sample="", rule="expect-success",
            fix=f"The tool did not report success (no {expected.text!r} line): read the log's last lines (not "
                "found, crashed, killed, stopped), fix that and run it again; in CI keep the tool's own exit "
                "status too."))
    result.findings.extend(missing)
    return missing


def judge_job_finished(job: JobScan, expected: Expectation) -> List[LogFinding]:
    """:func:`judge_finished` on a job's scan (:class:`npudoctor.logs.job.JobScan`), its findings also made
    incidents of their logs and the job diagnosed again: an unfinished run is what stopped the job."""
    from npudoctor.logs.incidents import diagnose, incidents_of

    missing = judge_finished(job.result, expected)
    if not missing:
        return missing
    units = {unit.source: unit for unit in job.units}
    found = []
    for finding in missing:
        unit = units.get(finding.subject)
        if unit is None:
            job.leftover.append(finding)
            continue
        made, left = incidents_of([finding], unit)
        found += made
        job.leftover.extend(left)
    job.incidents, job.diagnosis = diagnose([*job.incidents, *found], job.units)
    return missing
