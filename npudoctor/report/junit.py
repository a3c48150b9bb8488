"""``--format junit``: one testsuite per stage (``npudoctor.pcie``), one testcase per check, for CI dashboards.

Testcase names must be the same on every machine, or a dashboard's history breaks: the name is the check ID
and the classname its stage, never a Bus-Id, an interpreter path or a version. Not even the class of the
subjects can go into the name: one check names different subjects on different machines (PCI002 has one per
NPU on a node, none when blocked on a machine without NPUs; VER007 names the driver or CANN, whichever is
missing). The findings of the check on each subject are folded into its testcase: it fails when any of them
fails, is skipped when all of them were skipped, and lists
each subject with its status in its message, body and properties (``subject 0000:41:00.0`` = ``fail``). A
testcase fails by the command's ``--fail-on``, as the exit code does: on FAIL (and ERROR, an ``error``
element), and on WARN too under ``--fail-on warn``; a WARN that does not fail passes, its text in
``system-out``. Every command's JUnit (check, prof analyze, logs scan) follows that one rule.

Text from the node (log lines, file contents) may hold characters XML 1.0 cannot carry (``\\x01``); they are
written as visible ``\\xNN`` escapes so that the document always parses.
"""

from __future__ import annotations

import json
import re
import sys
from typing import IO, Dict, List, Optional, Tuple
from xml.etree import ElementTree as ET

from npudoctor.model.finding import Finding, Report, Status
from npudoctor.report import terminal

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


def _failing(fail_on: str) -> Tuple[Status, ...]:
    """The statuses a testcase fails on under ``--fail-on`` (``warn`` or ``fail``), as the exit code does."""
    return (Status.FAIL, Status.WARN) if fail_on == "warn" else (Status.FAIL,)


def _case(stage: str, check_id: str, findings: List[Finding], fail_on: str = "fail") -> ET.Element:
    case = ET.Element("testcase", {"classname": f"npudoctor.{stage}", "name": xml_safe(check_id)})
    properties = ET.SubElement(case, "properties")
    ET.SubElement(properties, "property", {"name": "title", "value": xml_safe(findings[0].title)})
    for finding in findings:
        ET.SubElement(properties, "property", {"name": xml_safe(f"subject {finding.subject}".rstrip()),
                                               "value": finding.status.value})
    status = _worst(findings)
    shown = [f for f in findings if f.status is status] if status is not Status.PASS else findings
    body: List[str] = [findings[0].title]
    for finding in findings:
        body.append(_describe(finding))
        if finding.evidence:
            body.append("  evidence: " + json.dumps(dict(finding.evidence), ensure_ascii=False, default=str))
        if finding.fix and finding.status is not Status.PASS:
            body.append("  fix: " + finding.fix.replace("\n", "\n       "))
    text = xml_safe("\n".join(body))
    message = "; ".join(_describe(f) for f in shown)
    if len(findings) > 1 and status is not Status.PASS:
        message = f"{len(shown)} of {len(findings)} subjects: {message}"
    message = xml_safe(message)
    if status in _failing(fail_on):
        ET.SubElement(case, "failure", {"message": message, "type": status.value}).text = text
    elif status is Status.ERROR:
        ET.SubElement(case, "error", {"message": message, "type": "error"}).text = text
    elif status is Status.SKIP:
        ET.SubElement(case, "skipped", {"message": message})
        ET.SubElement(case, "system-out").text = text
    else:  # PASS, or a WARN that --fail-on lets pass
        ET.SubElement(case, "system-out").text = (message + "\n" + text) if status is Status.WARN else text
    return case


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
    root = ET.Element("testsuites", {"name": "npudoctor"})
    stages: Dict[str, Dict[str, List[Finding]]] = {}
    for finding in report.findings:
        stages.setdefault(finding.stage or "check", {}).setdefault(finding.id, []).append(finding)
    for stage, cases in stages.items():
        statuses = [_worst(findings) for findings in cases.values()]
        suite = ET.SubElement(root, "testsuite", {
            "name": f"npudoctor.{stage}",
            "tests": str(len(cases)),
            "failures": str(sum(s in _failing(fail_on) for s in statuses)),
            "errors": str(statuses.count(Status.ERROR)),
            "skipped": str(statuses.count(Status.SKIP)),
        })
        for check_id, findings in cases.items():
            suite.append(_case(stage, check_id, findings, fail_on))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
