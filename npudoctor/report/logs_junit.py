"""``logs scan --format junit``: one testcase per input file and per merged finding, for CI dashboards."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from npudoctor.logs.scanner import LogFinding, ScanResult


def _body(finding: LogFinding) -> str:
    parts = [finding.title, f"count: {finding.count}", f"first: {finding.first}", f"last: {finding.last}",
             f"sample: {finding.sample}"]
    if finding.code is not None:
        parts.append(f"meaning: {finding.code.meaning}")
        if finding.code.cause:
            parts.append(f"cause: {finding.code.cause}")
    if finding.fix:
        parts.append(f"fix: {finding.fix}")
    return "\n".join(p for p in parts if p)


def render(result: ScanResult) -> str:
    root = ET.Element("testsuites", {"name": "npudoctor.logs"})
    failures = sum(1 for f in result.findings if f.severity != "info")
    errors = sum(1 for f in result.files if f.status != "ok")
    suite = ET.SubElement(root, "testsuite", {
        "name": "npudoctor.logs", "tests": str(len(result.findings) + len(result.files)),
        "failures": str(failures), "errors": str(errors), "skipped": "0"})
    for summary in result.files:
        case = ET.SubElement(suite, "testcase", {"classname": "npudoctor.logs.file", "name": summary.path})
        if summary.status != "ok":
            message = f"{summary.status}: {summary.error}"
            error = ET.SubElement(case, "error", {"message": message, "type": "error"})
            error.text = summary.error
    for finding in result.findings:
        case = ET.SubElement(suite, "testcase", {"classname": f"npudoctor.logs.{finding.kind}",
                                                 "name": f"{finding.kind} {finding.subject}"})
        if finding.severity == "info":
            ET.SubElement(case, "system-out").text = _body(finding)
        else:
            # warn/fallback are failures (type warn/fallback) so that CI shows them; the exit code decides.
            element = ET.SubElement(case, "failure", {"message": f"{finding.title or finding.kind} "
                                                                 f"({finding.subject}) x{finding.count}",
                                                      "type": finding.severity})
            element.text = _body(finding)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
