"""``logs scan --format github``: GitHub Actions workflow commands (``::error file=..,line=..::msg``).

One annotation per merged finding, placed at its first evidence line with a path relative to the workspace
(``GITHUB_WORKSPACE``, else the current folder) so that GitHub can attach it to the file; unreadable files
become warnings; the last line is a summary annotation with the verdict.
"""

from __future__ import annotations

import os
from typing import List, Optional, Sequence

from npudoctor.logs.failon import finding_fails
from npudoctor.logs.scanner import ScanResult

LEVEL = {"error": "error", "warn": "warning", "fallback": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def workspace_path(path: str, workspace: Optional[str] = None) -> str:
    """``path`` relative to the workspace when it lies inside it, else as it is."""
    base = os.path.abspath(workspace or os.environ.get("GITHUB_WORKSPACE") or os.getcwd())
    full = os.path.abspath(path)
    if full.startswith(base.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, base)
    return path


def render(result: ScanResult, fail_on: Sequence[str] = ("error",), exit_code: int = 0,
           workspace: Optional[str] = None) -> str:
    out: List[str] = []
    for summary in result.files:
        if summary.status != "ok":
            where = _property(workspace_path(summary.path, workspace))
            out.append(f"::warning file={where},title={_property(f'{summary.status} log')}::"
                       f"{_data(f'{summary.status}: {summary.error}')}")
    for finding in result.findings:
        title = f"{finding.kind}: {finding.subject}"
        first = f"{workspace_path(finding.first.file, workspace)}:{finding.first.line}"
        last = f"{workspace_path(finding.last.file, workspace)}:{finding.last.line}"
        message = f"{finding.title or finding.kind} (x{finding.count}, first {first}, last {last})"
        if finding.code is not None:
            message += f"\n{finding.code.meaning}"
        if finding.fix:
            message += f"\nfix: {finding.fix}"
        where = f"file={_property(workspace_path(finding.first.file, workspace))},line={finding.first.line}"
        out.append(f"::{LEVEL[finding.severity]} {where},title={_property(title)}::{_data(message)}")
    failing = sum(1 for f in result.findings if finding_fails(f, fail_on))
    readable = len(result.readable_files)
    level = "error" if exit_code else "notice"
    summary_text = (f"{len(result.findings)} cause(s) in {readable} file(s), {failing} matching --fail-on "
                    f"{','.join(fail_on)}; {len(result.skipped)} skipped; exit {exit_code}")
    out.append(f"::{level} title={_property('npudoctor logs scan')}::{_data(summary_text)}")
    return "".join(line + "\n" for line in out)
