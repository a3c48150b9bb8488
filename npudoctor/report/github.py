"""``--format github``, the one writer of GitHub Actions workflow commands (``::error file=..,line=..::msg``):
an annotation per thing found that matters, then the command's verdict and exit code (error when the run
fails, else notice). Adapters per result model: :func:`of_report` for the model's findings (check, prof: one
per FAIL/ERROR/WARN), :func:`of_scan` for ``logs scan`` (one per cause at its first line, unreadable files).

Someone else's text is cleaned as in every report (:func:`npudoctor.untrusted.clean`), then escaped as GitHub's
toolkit does (actions/toolkit ``command.ts``): ``%``, CR and LF; also ``:`` and ``,`` in property values.
Paths are relative to the workspace so that GitHub attaches the annotations to files.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, List, NamedTuple, Optional, Sequence

from npudoctor.model.finding import Report, Status
from npudoctor.untrusted import clean, one_line, printable

if TYPE_CHECKING:
    from npudoctor.logs.job import JobScan
    from npudoctor.logs.model import ScanResult


def escape_data(text: str) -> str:
    """A workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``title=``, ``file=``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workspace_path(path: str, workspace: Optional[str] = None) -> str:
    """``path`` relative to the workspace (``GITHUB_WORKSPACE``, else the current folder) when it lies inside
    it, else as it is."""
    base = os.path.abspath(workspace or os.environ.get("GITHUB_WORKSPACE") or os.getcwd())
    full = os.path.abspath(path)
    if full.startswith(base.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, base)
    return path


def annotation(level: str, message: str, title: str = "", file: str = "", line: Optional[int] = None) -> str:
    """One workflow command line (without its newline): ``level`` is error, warning or notice. The message and
    title quote someone else's text: cleaned (npudoctor.untrusted); ``file`` stays the real path, since GitHub
    places the annotation by it (only control characters are dropped)."""
    message, title = clean(message), one_line(clean(title))
    properties = []
    if file:
        properties.append(f"file={escape_property(printable(file))}")
        if line is not None:
            properties.append(f"line={line}")
    if title:
        properties.append(f"title={escape_property(title)}")
    return f"::{level}{' ' + ','.join(properties) if properties else ''}::{escape_data(message)}"


class Annotation(NamedTuple):
    """One workflow command: ``level`` is error, warning or notice; ``file`` and ``line`` place it."""

    level: str
    message: str
    title: str = ""
    file: str = ""
    line: Optional[int] = None


def render(annotations: Iterable[Annotation], command: str, verdict: str, exit_code: int) -> str:
    """The document: each annotation, then the summary (``verdict; exit N``, titled ``command``)."""
    out = [annotation(*item) for item in annotations]
    out.append(annotation("error" if exit_code else "notice", f"{verdict}; exit {exit_code}", command))
    return "".join(line + "\n" for line in out)


# -- the rooms' results as annotations ---------------------------------------------------------------------
FINDING_LEVEL = {Status.FAIL: "error", Status.ERROR: "error", Status.WARN: "warning"}
LOG_LEVEL = {"error": "error", "warn": "warning", "fallback": "warning", "info": "notice"}


def of_report(report: Report) -> List[Annotation]:
    """A finding that is not PASS or SKIP: titled by its ID, title and subject; its detail and fix."""
    return [Annotation(FINDING_LEVEL[f.status], f.detail + (f"\nfix: {f.fix}" if f.fix else ""),
                       f"{f.id} {f.title}" + (f" [{f.subject}]" if f.subject else ""))
            for f in report.findings if f.status in FINDING_LEVEL]


def of_scan(result: ScanResult, workspace: Optional[str] = None, job: Optional[JobScan] = None) -> List[Annotation]:
    """Each file that could not be read (a warning on it), then each incident at its first source (the
    diagnosis on the root cause), then each merged cause no incident holds at its first line."""
    out = [Annotation("warning", f"{summary.status}: {summary.error}", f"{summary.status} log",
                      workspace_path(summary.path, workspace))
           for summary in result.files if summary.status != "ok"]
    held = set()
    if job is not None:
        from npudoctor.logs.incidents import who

        for incident in job.incidents:
            held.update(incident.findings)
            path, _, line = (incident.sources[0] if incident.sources else "").rpartition(":")
            message = job.diagnosis.verdict if incident.role == "root" else incident.title
            message += f"\ncodes: {', '.join(incident.codes)}" if incident.codes else ""
            message += f"\nfirst: {incident.first_time}" if incident.first_time else ""
            message += f"\nafter {incident.caused_by}" if incident.caused_by else ""
            message += f"\nfix: {incident.fix}" if incident.fix else ""
            place = who(incident)
            out.append(Annotation("error" if incident.role != "consequence" else "warning", message,
                                  f"{incident.id} {incident.role}: {place + ' ' if place else ''}{incident.label}",
                                  workspace_path(path, workspace) if path else "",
                                  int(line) if line.isdigit() else None))
    for finding in result.findings:
        if f"{finding.kind} {finding.subject}" in held:
            continue
        first = f"{workspace_path(finding.first.file, workspace)}:{finding.first.line}"
        last = f"{workspace_path(finding.last.file, workspace)}:{finding.last.line}"
        message = f"{finding.title or finding.kind} (x{finding.count}, first {first}, last {last})"
        if finding.code is not None:
            message += f"\n{finding.code.meaning}"
        if finding.fix:
            message += f"\nfix: {finding.fix}"
        out.append(Annotation(LOG_LEVEL[finding.severity], message, f"{finding.kind}: {finding.subject}",
                              workspace_path(finding.first.file, workspace), finding.first.line))
    return out


def report_document(report: Report, command: str, exit_code: int, scope: Optional[str] = None) -> str:
    """The document of a run's findings (``check``, ``prof``), summed up by the text report's verdict."""
    from npudoctor.report.console import verdict

    return render(of_report(report), command, verdict(report, scope=scope), exit_code)


def scan_document(result: ScanResult, fail_on: Sequence[str], exit_code: int, workspace: Optional[str] = None,
                  job: Optional[JobScan] = None) -> str:
    """``logs scan``'s document: "2 cause(s) in 2 file(s), 1 matching --fail-on error; 4 skipped; exit 1"."""
    from npudoctor.logs.failon import finding_fails

    failing = sum(1 for f in result.findings if finding_fails(f, fail_on))
    verdict = (f"{len(result.findings)} cause(s) in {len(result.readable_files)} file(s), {failing} matching "
               f"--fail-on {','.join(fail_on)}; {len(result.skipped)} skipped")
    if job is not None and job.incidents:
        verdict = f"{job.diagnosis.verdict} {len(job.incidents)} incident(s); {verdict}"
    return render(of_scan(result, workspace, job), "npudoctor logs scan", verdict, exit_code)
