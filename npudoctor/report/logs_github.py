"""``logs scan --format github``: GitHub Actions workflow commands (``::error file=..,line=..::msg``).

One annotation per merged finding, placed at its first evidence line with a path relative to the workspace
(``GITHUB_WORKSPACE``, else the current folder) so that GitHub can attach it to the file; unreadable files
become warnings; the last line is a summary annotation with the verdict.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from npudoctor.logs.failon import finding_fails
from npudoctor.logs.model import ScanResult
from npudoctor.report.github import annotation, workspace_path

LEVEL = {"error": "error", "warn": "warning", "fallback": "warning", "info": "notice"}


def render(result: ScanResult, fail_on: Sequence[str] = ("error",), exit_code: int = 0,
           workspace: Optional[str] = None) -> str:
    out: List[str] = []
    for summary in result.files:
        if summary.status != "ok":
            out.append(annotation("warning", f"{summary.status}: {summary.error}", f"{summary.status} log",
                                  workspace_path(summary.path, workspace)))
    for finding in result.findings:
        title = f"{finding.kind}: {finding.subject}"
        first = f"{workspace_path(finding.first.file, workspace)}:{finding.first.line}"
        last = f"{workspace_path(finding.last.file, workspace)}:{finding.last.line}"
        message = f"{finding.title or finding.kind} (x{finding.count}, first {first}, last {last})"
        if finding.code is not None:
            message += f"\n{finding.code.meaning}"
        if finding.fix:
            message += f"\nfix: {finding.fix}"
        out.append(annotation(LEVEL[finding.severity], message, title, workspace_path(finding.first.file, workspace),
                              finding.first.line))
    failing = sum(1 for f in result.findings if finding_fails(f, fail_on))
    readable = len(result.readable_files)
    level = "error" if exit_code else "notice"
    summary_text = (f"{len(result.findings)} cause(s) in {readable} file(s), {failing} matching --fail-on "
                    f"{','.join(fail_on)}; {len(result.skipped)} skipped; exit {exit_code}")
    out.append(annotation(level, summary_text, "npudoctor logs scan"))
    return "".join(line + "\n" for line in out)
