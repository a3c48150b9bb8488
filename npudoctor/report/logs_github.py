"""``logs scan --format github``: GitHub Actions workflow commands (``::error file=..,line=..::msg``).

One annotation per merged finding, placed at its first evidence line; unreadable files become warnings.
"""

from __future__ import annotations

from typing import List

from npudoctor.logs.scanner import ScanResult

LEVEL = {"error": "error", "warn": "warning", "fallback": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(result: ScanResult) -> str:
    out: List[str] = []
    for summary in result.files:
        if summary.status != "ok":
            out.append(f"::warning file={_property(summary.path)},title={_property('unreadable log')}::"
                       f"{_data(f'{summary.status}: {summary.error}')}")
    for finding in result.findings:
        title = f"{finding.kind}: {finding.subject}"
        message = (f"{finding.title or finding.kind} "
                   f"(x{finding.count}, first {finding.first}, last {finding.last})")
        if finding.code is not None:
            message += f"\n{finding.code.meaning}"
        if finding.fix:
            message += f"\nfix: {finding.fix}"
        where = f"file={_property(finding.first.file)},line={finding.first.line}"
        out.append(f"::{LEVEL[finding.severity]} {where},title={_property(title)}::{_data(message)}")
    return "".join(line + "\n" for line in out)
