"""One poller per node: the report kept on the node (``check --save-report PATH``) and read back by every
other agent (``check --last-report PATH --max-age S``).

npu-smi is not safe to run concurrently, and a DaemonSet, NPD's plugins and a per-job gate each running it
every few minutes would do just that. So one agent runs the checks and keeps its last report on the node,
written atomically (the textfile's writer); NPD, the init-container gate and the Prometheus textfile read it.
The report's age is its file's modification time (the poller replaces it after each run); a reader given
``--max-age`` says when it is older, and never passes a stale report off as a fresh verdict.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Iterator, List, Mapping, NamedTuple, Optional, Sequence

from npudoctor.errors import InputError
from npudoctor.fleet.reportdoc import MAX_REPORT_BYTES, ReportShapeError, check_report
from npudoctor.fleet.textfile import TextfileError, check_target, write_atomically
from npudoctor.model.finding import Finding, Report, Status
from npudoctor.model.scope import scope_of
from npudoctor.parsers import jsondoc


class LastReportError(InputError):
    """The kept report cannot be read (one line; the reader says "could not tell")."""


class LastReport(NamedTuple):
    report: Report
    age_s: float


PREVIOUS = ".previous"  # the report before the last one, beside it: what healed since (ClusterD's recover)


def save(path: str, report: Report) -> None:
    """Keep ``report`` at ``path`` as its JSON document, replacing the last one in one step; the last one
    becomes ``PATH.previous``."""
    from npudoctor.report import json_report

    with named_save_report():
        check_target(path)
        if os.path.isfile(path) and not os.path.islink(path):
            with contextlib.suppress(OSError):  # no previous report is only no recover event
                os.replace(path, path + PREVIOUS)
        write_atomically(path, json_report.document_text(report.to_dict()))


@contextlib.contextmanager
def named_save_report() -> Iterator[None]:
    """The textfile writer's errors name ``--textfile``; here the path is ``--save-report``'s."""
    try:
        yield
    except TextfileError as exc:
        text = str(exc)
        raise TextfileError("--save-report" + text[len("--textfile"):] if text.startswith("--textfile") else text) \
            from None


def load_previous(path: str) -> Optional[Report]:
    """The report kept before the last one (None when there is none or it cannot be read)."""
    try:
        return load(path + PREVIOUS).report
    except LastReportError:
        return None


def load(path: str, now: float = 0.0) -> LastReport:
    """The report kept at ``path`` and its age in seconds (from the file's modification time)."""
    from npudoctor.probes.safe_open import UnsafeFile, read_file

    try:
        stat = os.stat(path)
        data = read_file(path, MAX_REPORT_BYTES + 1, whole=True).data
    except FileNotFoundError:
        raise LastReportError(f"--last-report {path}: no report there yet (is the node's poller running?)") \
            from None
    except (OSError, UnsafeFile) as exc:
        raise LastReportError(f"--last-report {path}: cannot read: {getattr(exc, 'strerror', None) or exc}") \
            from None
    if len(data) > MAX_REPORT_BYTES:
        raise LastReportError(f"--last-report {path}: larger than {MAX_REPORT_BYTES} bytes: not a report")
    try:
        document = check_report(jsondoc.loads(data, path))
    except (jsondoc.JsonDocumentError, ReportShapeError) as exc:
        raise LastReportError(f"--last-report {path}: {exc}") from None
    age = max(0.0, (now or time.time()) - stat.st_mtime)
    report = from_document(document, f"report:{path}")
    report.started = stat.st_mtime  # the run's end, as near its start as the document can say
    return LastReport(report, age)


def from_document(document: Mapping[str, Any], source: str) -> Report:
    """A :class:`Report` again from its ``npudoctor.report/1`` document (already shape-checked)."""
    findings: List[Finding] = []
    for item in document.get("findings") or []:
        try:
            status = Status(item.get("status"))
        except ValueError:
            raise LastReportError(f"{source}: finding {item.get('id')!r} has no status npudoctor knows") from None
        evidence = item.get("evidence")
        findings.append(Finding(
            id=str(item.get("id") or ""), status=status, title=str(item.get("title") or ""),
            subject=str(item.get("subject") or ""), detail=str(item.get("detail") or ""),
            evidence=evidence if isinstance(evidence, dict) else {}, fix=str(item.get("fix") or ""),
            stage=str(item.get("stage") or ""), cause=str(item.get("cause") or "")))
    return Report(findings=findings, tool=dict(document.get("tool") or {}), host=dict(document.get("host") or {}),
                  source=source, inventory=dict(document.get("inventory") or {}))


def select(report: Report, only: Sequence[str], skip: Sequence[str], scope: str = "", strict: bool = True) -> Report:
    """The findings ``--only``/``--skip``/``--scope`` keep (an ID, an ID prefix or a stage, as for a run);
    ``strict``: none kept is an error."""

    def matches(finding: Finding, pattern: str) -> bool:
        wanted = pattern.lower()
        return finding.id.lower().startswith(wanted) or finding.stage == wanted

    kept = [f for f in report.findings
            if (not only or any(matches(f, p) for p in only)) and not any(matches(f, p) for p in skip)
            and (not scope or scope_of(f.id) == scope)]
    if not kept and strict:
        raise LastReportError(f"{report.source}: no finding left by --only/--skip/--scope "
                              f"(the poller may run a narrower --scope)")
    return Report(findings=kept, tool=report.tool, host=report.host, source=report.source,
                  inventory=report.inventory, started=report.started)


def stale_reason(age_s: float, max_age_s: float) -> str:
    """Why a reader cannot tell from a report older than it accepts."""
    return f"last report {age_s:.0f} s old (max {max_age_s:.0f} s)"
