"""``logs scan --format junit``: one testcase per input file and per merged finding, for CI dashboards.

A testcase fails by the same ``--fail-on`` rule as the exit code: a finding that matches is a failure, one
that does not is a passing testcase with its text in ``system-out``; a file fails when it holds a failing
finding (a file full of errors is not a passing testcase). Unreadable files are errors. Text from logs and
file names may hold characters that XML 1.0 cannot carry: written as ``\\xNN``, as in every JUnit document
(``report.junit.xml_safe``).
"""

from __future__ import annotations

from typing import Dict, Sequence, Tuple
from xml.etree import ElementTree as ET

from npudoctor.logs.failon import finding_fails
from npudoctor.logs.model import FileSummary, LogFinding, ScanResult
from npudoctor.report.junit import xml_safe

_xml = xml_safe


def _body(finding: LogFinding) -> str:
    parts = [finding.title, f"count: {finding.count}", f"first: {finding.first}", f"last: {finding.last}",
             f"sample: {finding.sample}"]
    if finding.code is not None:
        parts.append(f"meaning: {finding.code.meaning}")
        if finding.code.cause:
            parts.append(f"cause: {finding.code.cause}")
    if finding.fix:
        parts.append(f"fix: {finding.fix}")
    return _xml("\n".join(p for p in parts if p))


def _file_failures(summary: FileSummary, failing: Dict[Tuple[str, str], LogFinding]) -> Tuple[int, int]:
    """(failing causes, their lines) of one file."""
    keys = [key for key in summary.causes if key in failing]
    return len(keys), sum(summary.causes[key] for key in keys)


def render(result: ScanResult, fail_on: Sequence[str] = ("error",)) -> str:
    failing = {(f.kind, f.subject): f for f in result.findings if finding_fails(f, fail_on)}
    root = ET.Element("testsuites", {"name": "npudoctor.logs"})
    file_failures = {id(s): _file_failures(s, failing) for s in result.files}
    failures = len(failing) + sum(1 for causes, _ in file_failures.values() if causes)
    errors = sum(1 for f in result.files if f.status != "ok")
    suite = ET.SubElement(root, "testsuite", {
        "name": "npudoctor.logs", "tests": str(len(result.findings) + len(result.files)),
        "failures": str(failures), "errors": str(errors), "skipped": "0"})
    ET.SubElement(suite, "properties").extend([ET.Element("property", {"name": "fail_on", "value": ",".join(fail_on)})])
    for summary in result.files:
        case = ET.SubElement(suite, "testcase", {"classname": "npudoctor.logs.file", "name": _xml(summary.path)})
        causes, lines = file_failures[id(summary)]
        if summary.status != "ok":
            message = _xml(f"{summary.status}: {summary.error}")
            error = ET.SubElement(case, "error", {"message": message, "type": summary.status})
            error.text = message
        elif causes:
            names = sorted(f"{kind} {subject}" for kind, subject in summary.causes if (kind, subject) in failing)
            failure = ET.SubElement(case, "failure", {
                "message": _xml(f"{causes} cause(s) matching --fail-on {','.join(fail_on)} in {lines} line(s)"),
                "type": "fail-on"})
            failure.text = _xml("\n".join(names))
    for finding in result.findings:
        case = ET.SubElement(suite, "testcase", {"classname": f"npudoctor.logs.{finding.kind}",
                                                 "name": _xml(f"{finding.kind} {finding.subject}")})
        if (finding.kind, finding.subject) in failing:
            element = ET.SubElement(case, "failure", {
                "message": _xml(f"{finding.title or finding.kind} ({finding.subject}) x{finding.count}"),
                "type": finding.severity})
            element.text = _body(finding)
        else:
            ET.SubElement(case, "system-out").text = _body(finding)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
