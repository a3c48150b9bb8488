"""``--format junit``, the one JUnit writer (:func:`document` over :class:`Suite` and :class:`Case`), with an
adapter per result model: :func:`render` for the model's findings (check, prof: a testsuite per stage, a
testcase per check), :func:`scan_document` for ``logs scan`` (a testcase per input file and per cause).

Testcase names are the same on every machine, or a dashboard's history breaks: the check ID, its stage the
classname, never a Bus-Id, a path or a version (one check names different subjects on different machines:
PCI002 one per NPU, none on a machine without NPUs). The findings of a check fold into its testcase, each
subject with its status in its message, body and properties (``subject 0000:41:00.0`` = ``fail``). A testcase
fails by the command's ``--fail-on``, as the exit code does: on FAIL (ERROR: an ``error`` element), on WARN
too under ``--fail-on warn``; a WARN that does not fail passes, its text in ``system-out``. A log file fails
when it holds a failing cause; an unreadable one is an error.

Someone else's text is cleaned (:func:`npudoctor.untrusted.clean`: findings clean themselves, the log adapter
what it quotes); the writer writes what XML 1.0 cannot carry (``\\x01``) as a visible ``\\xNN`` escape.
"""

from __future__ import annotations

import json
import re
import sys
from typing import IO, TYPE_CHECKING, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple
from xml.etree import ElementTree as ET

from npudoctor.model.finding import Finding, Report, Status, failing
from npudoctor.report import terminal
from npudoctor.untrusted import clean

if TYPE_CHECKING:
    from npudoctor.logs.job import JobScan
    from npudoctor.logs.model import LogFinding, ScanResult

# Characters XML 1.0 forbids (C0 controls but tab/newline/CR, lone surrogates, U+FFFE/U+FFFF).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Worst first: the testcase of a check and subject class takes the worst status of its findings.
_SEVERITY = (Status.ERROR, Status.FAIL, Status.WARN, Status.PASS, Status.SKIP)


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold written as ``\\xNN``."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _worst(findings: List[Finding]) -> Status:
    statuses = {f.status for f in findings}
    if statuses == {Status.SKIP}:
        return Status.SKIP
    return next(s for s in _SEVERITY if s in statuses)


def _describe(finding: Finding) -> str:
    where = f"{finding.subject}: " if finding.subject else ""
    return f"{finding.status.value}: {where}{finding.detail}".rstrip(": ")


class Case(NamedTuple):
    """One testcase: ``outcome`` is ``failure``, ``error``, ``skipped`` or "" (passed); ``text`` the failure's or
    error's body, else ``system-out``; ``properties`` (name, value) pairs, None for no element."""

    classname: str
    name: str
    outcome: str = ""
    message: str = ""
    kind: str = ""
    text: Optional[str] = None
    properties: Optional[Sequence[Tuple[str, str]]] = None


class Suite(NamedTuple):
    name: str
    cases: Sequence[Case]
    properties: Optional[Sequence[Tuple[str, str]]] = None


def _properties(parent: ET.Element, pairs: Sequence[Tuple[str, str]]) -> None:
    ET.SubElement(parent, "properties").extend(
        ET.Element("property", {"name": xml_safe(name), "value": xml_safe(value)}) for name, value in pairs)


def _testcase(case: Case) -> ET.Element:
    element = ET.Element("testcase", {"classname": xml_safe(case.classname), "name": xml_safe(case.name)})
    if case.properties is not None:
        _properties(element, case.properties)
    if case.outcome in ("failure", "error"):
        ET.SubElement(element, case.outcome, {"message": xml_safe(case.message), "type": case.kind}).text = \
            xml_safe(case.text or "")
        return element
    if case.outcome == "skipped":
        ET.SubElement(element, "skipped", {"message": xml_safe(case.message)})
    if case.text is not None:
        ET.SubElement(element, "system-out").text = xml_safe(case.text)
    return element


def document(name: str, suites: Iterable[Suite]) -> str:
    """The JUnit document: each suite with its counts (tests, failures, errors, skipped) and testcases."""
    root = ET.Element("testsuites", {"name": name})
    for suite in suites:
        outcomes = [case.outcome for case in suite.cases]
        element = ET.SubElement(root, "testsuite", {
            "name": suite.name, "tests": str(len(outcomes)), "failures": str(outcomes.count("failure")),
            "errors": str(outcomes.count("error")), "skipped": str(outcomes.count("skipped"))})
        if suite.properties is not None:
            _properties(element, suite.properties)
        element.extend(_testcase(case) for case in suite.cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _case(stage: str, check_id: str, findings: List[Finding], fail_on: str = "fail") -> Case:
    properties = [("title", findings[0].title), *((f"subject {f.subject}".rstrip(), f.status.value) for f in findings)]
    status = _worst(findings)
    shown = [f for f in findings if f.status is status] if status is not Status.PASS else findings
    body: List[str] = [findings[0].title]
    for finding in findings:
        body.append(_describe(finding))
        if finding.evidence:
            body.append("  evidence: " + json.dumps(dict(finding.evidence), ensure_ascii=False, default=str))
        if finding.fix and finding.status is not Status.PASS:
            body.append("  fix: " + finding.fix.replace("\n", "\n       "))
    text = "\n".join(body)
    message = "; ".join(_describe(f) for f in shown)
    if len(findings) > 1 and status is not Status.PASS:
        message = f"{len(shown)} of {len(findings)} subjects: {message}"
    case = Case(f"npudoctor.{stage}", check_id, message=message, text=text, properties=properties)
    if status in failing(fail_on):
        return case._replace(outcome="failure", kind=status.value)
    if status is Status.ERROR:
        return case._replace(outcome="error", kind="error")
    if status is Status.SKIP:
        return case._replace(outcome="skipped")
    # PASS, or a WARN that --fail-on lets pass
    return case._replace(text=(message + "\n" + text) if status is Status.WARN else text)


def ascii_only(document: str) -> str:
    """``document`` with every character beyond ASCII as a character reference (``&#10003;``): the same XML."""
    return document.encode("ascii", "xmlcharrefreplace").decode("ascii")


def emit(document: str, stream: Optional[IO[str]] = None) -> None:
    """Write a JUnit document to ``stream`` (stdout), as character references where the stream cannot
    encode a character."""
    stream = stream or sys.stdout
    stream.write(document if terminal.can_encode(document, stream) else ascii_only(document))
    stream.flush()


def render(report: Report, fail_on: str = "fail") -> str:
    """The JUnit document of ``report``; testcases fail as ``--fail-on`` (``fail`` or ``warn``) says."""
    stages: Dict[str, Dict[str, List[Finding]]] = {}
    for finding in report.findings:
        stages.setdefault(finding.stage or "check", {}).setdefault(finding.id, []).append(finding)
    return document("npudoctor", (Suite(f"npudoctor.{stage}", [_case(stage, check_id, findings, fail_on)
                                                               for check_id, findings in cases.items()])
                                  for stage, cases in stages.items()))


def _cause_body(finding: LogFinding) -> str:
    parts = [finding.title, f"count: {finding.count}", f"first: {finding.first}", f"last: {finding.last}",
             f"sample: {finding.sample}"]
    if finding.code is not None:
        parts.append(f"meaning: {finding.code.meaning}")
        if finding.code.cause:
            parts.append(f"cause: {finding.code.cause}")
    if finding.fix:
        parts.append(f"fix: {finding.fix}")
    return "\n".join(p for p in parts if p)


def _incident_body(incident: object, job: object) -> str:
    data = incident.to_dict()  # type: ignore[attr-defined]
    lines = [f"{key}: {', '.join(map(str, value)) if isinstance(value, list) else value}"
             for key, value in data.items() if value not in (None, [], "")]
    return "\n".join(lines)


def scan_document(result: ScanResult, fail_on: Sequence[str] = ("error",), job: Optional[JobScan] = None) -> str:
    """``logs scan``'s document: a file fails when it holds a cause matching ``--fail-on`` (its causes listed),
    an unreadable file is an error; an incident is a testcase (named by its role and kind, never a path or a
    rank: the same on every run), failing when one of its findings matches; a cause no incident holds fails
    when it matches, else passes with its text in system-out."""
    from npudoctor.logs.failon import finding_fails

    failing = {(f.kind, f.subject): f for f in result.findings if finding_fails(f, fail_on)}
    cases = []
    for summary in result.files:
        keys = [key for key in summary.causes if key in failing]
        case = Case("npudoctor.logs.file", clean(summary.path))
        if summary.status != "ok":
            message = clean(f"{summary.status}: {summary.error}")
            case = case._replace(outcome="error", message=message, kind=summary.status, text=message)
        elif keys:
            lines = sum(summary.causes[key] for key in keys)
            message = f"{len(keys)} cause(s) matching --fail-on {','.join(fail_on)} in {lines} line(s)"
            case = case._replace(outcome="failure", kind="fail-on", message=clean(message),
                                 text=clean("\n".join(sorted(f"{kind} {subject}" for kind, subject in keys))))
        cases.append(case)
    held = set()
    seen: Dict[str, int] = {}
    for incident in job.incidents if job is not None else ():
        held.update(incident.findings)
        name = f"{incident.role} {incident.kind}"
        seen[name] = seen.get(name, 0) + 1  # one case per incident: the second of a kind is "#2"
        case = Case(f"npudoctor.logs.incident.{incident.role}", name + (f" #{seen[name]}" if seen[name] > 1 else ""),
                    text=clean(_incident_body(incident, job)))
        if any(key in {f"{k} {s}" for k, s in failing} for key in incident.findings):
            case = case._replace(outcome="failure", kind=incident.role, message=clean(
                job.diagnosis.verdict if incident.role == "root" else incident.title))  # type: ignore[union-attr]
        cases.append(case)
    for finding in result.findings:
        if f"{finding.kind} {finding.subject}" in held:
            continue
        case = Case(f"npudoctor.logs.{finding.kind}", clean(f"{finding.kind} {finding.subject}"),
                    text=clean(_cause_body(finding)))
        if (finding.kind, finding.subject) in failing:
            case = case._replace(outcome="failure", kind=finding.severity,
                                 message=clean(f"{finding.title or finding.kind} ({finding.subject}) x{finding.count}"))
        cases.append(case)
    return document("npudoctor.logs", [Suite("npudoctor.logs", cases, [("fail_on", ",".join(fail_on))])])
