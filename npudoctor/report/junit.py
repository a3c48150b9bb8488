"""``--format junit``: one testcase per finding, grouped in one testsuite per stage, for CI dashboards."""

from __future__ import annotations

import json
from typing import Dict, List
from xml.etree import ElementTree as ET

from npudoctor.model.finding import Finding, Report, Status, Summary


def _case(finding: Finding) -> ET.Element:
    name = finding.id + (f" {finding.subject}" if finding.subject else "")
    case = ET.Element("testcase", {"classname": f"npudoctor.{finding.stage or 'check'}", "name": name})
    text_parts = [finding.title, finding.detail]
    if finding.evidence:
        text_parts.append("evidence: " + json.dumps(dict(finding.evidence), ensure_ascii=False, default=str))
    if finding.fix:
        text_parts.append("fix: " + finding.fix)
    body = "\n".join(p for p in text_parts if p)
    if finding.status in (Status.FAIL, Status.WARN):
        # A WARN is reported as a failure of type "warning" so that CI shows it; the exit code decides.
        element = ET.SubElement(case, "failure", {"message": finding.detail or finding.title,
                                                  "type": finding.status.value})
        element.text = body
    elif finding.status is Status.ERROR:
        element = ET.SubElement(case, "error", {"message": finding.detail or finding.title, "type": "error"})
        element.text = body
    elif finding.status is Status.SKIP:
        ET.SubElement(case, "skipped", {"message": finding.detail or "skipped"})
    else:
        out = ET.SubElement(case, "system-out")
        out.text = body
    return case


def render(report: Report) -> str:
    root = ET.Element("testsuites", {"name": "npudoctor"})
    stages: Dict[str, List[Finding]] = {}
    for finding in report.findings:
        stages.setdefault(finding.stage or "check", []).append(finding)
    for stage, findings in stages.items():
        counts = Summary.of(findings).counts
        suite = ET.SubElement(root, "testsuite", {
            "name": f"npudoctor.{stage}",
            "tests": str(len(findings)),
            "failures": str(counts[Status.FAIL] + counts[Status.WARN]),
            "errors": str(counts[Status.ERROR]),
            "skipped": str(counts[Status.SKIP]),
        })
        for finding in findings:
            suite.append(_case(finding))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
