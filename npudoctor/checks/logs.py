"""Checks of the logs stage: what the newest CANN plogs say."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, List, Tuple

from npudoctor.checks.registry import CheckContext, Outcome, error, passed, skip
from npudoctor.checks.registry import check as register
from npudoctor.model.finding import Status

if TYPE_CHECKING:
    from npudoctor.logs.scanner import LogFinding

# The option key `npudoctor check --logs DIR` fills (a sequence of directories).
LOGS_DIRS_OPTION = "logs_dirs"
# Where plogs lie under a log root: ~/ascend/log/{run,debug}/plog/ (current), ~/ascend/log/plog/ (older),
# or the plog folder itself.
PLOG_SUBDIRS = ("", "plog", "run/plog", "debug/plog")
PLOG_NAME = re.compile(r"^plog[-_](?:\d+_)?(\d{14,17})\.log$|^plog[-_].*\.log$")


def _plog_files(ctx: CheckContext, root: str) -> Tuple[List[str], List[str]]:
    """(plog paths newest first, problems) under ``root``; names carry their start time."""
    found: List[Tuple[str, str]] = []
    problems: List[str] = []
    for sub in PLOG_SUBDIRS:
        folder = f"{root.rstrip('/')}/{sub}" if sub else root
        listing = ctx.runner.list_dir(folder)
        if listing.error:
            if not sub:
                problems.append(f"{folder}: {listing.error}")
            continue
        for name in listing.entries:
            match = PLOG_NAME.match(name)
            if match:
                found.append((match.group(1) or "", f"{folder.rstrip('/')}/{name}"))
    found.sort(reverse=True)
    return [path for _, path in found], problems


def _outcome(finding: LogFinding) -> Outcome:
    from npudoctor.logs.rules import SEVERITY_STATUS  # loaded with the scanner anyway, only with --logs

    detail = (f"{finding.title or finding.kind}: {finding.count} line(s), "
              f"first {finding.first}, last {finding.last}")
    if finding.code is not None:
        detail += f". {finding.code.meaning}"
    evidence = {"count": finding.count, "first": str(finding.first), "last": str(finding.last),
                "sample": finding.sample, "kind": finding.kind}
    subject = f"{finding.kind}:{finding.subject}"
    status = SEVERITY_STATUS[finding.severity]
    if status is Status.PASS:
        return passed(subject, detail, evidence)
    return Outcome(status, subject, detail, evidence, finding.fix)


@register("LOG001", stage="logs", title="Newest CANN plogs")
def newest_plogs(ctx: CheckContext) -> Iterable[Outcome]:
    """Scan the newest CANN plogs for errors, device exceptions, HCCL timeouts and CPU fallbacks.

    When a job dies, the reason is in ``~/ascend/log/{run,debug}/plog/plog-<pid>_<time>.log`` among
    thousands of INFO lines. This check reads the newest plogs of each directory given with
    ``npudoctor check --logs DIR`` (``logs.newest_files`` per directory, at most ``logs.max_bytes_per_file``
    bytes from the end of each: the evidence says when a file was cut), merges what they say per cause and explains
    error codes (EZ9999, EI0006, 507011, ...). It reports FAIL for errors (device exceptions, HCCL timeouts,
    error codes, ERROR records) and WARN for warnings and operators that fall back from the AI Core.

    Fix: follow the fix printed with each finding; `npudoctor logs scan DIR` gives the full report, with
    every file and line.
    """
    roots = tuple(ctx.options.get(LOGS_DIRS_OPTION, ()) or ())
    if not roots:
        yield skip("no log directory given (npudoctor check --logs DIR)")
        return
    newest = int(ctx.profile.get("logs.newest_files", 5))
    max_bytes = int(ctx.profile.get("logs.max_bytes_per_file", 16 * 1024 * 1024))
    from npudoctor.logs.scanner import Scanner  # only with --logs: the scanner's patterns cost start-up time

    scanner = Scanner()
    problems: List[str] = []
    cut: List[str] = []
    scanned: List[str] = []
    for root in roots:
        paths, root_problems = _plog_files(ctx, root)
        problems.extend(root_problems)
        for path in paths[:newest]:
            # The news of a dying job is at the end of its plog.
            content = ctx.runner.read_text(path, max_bytes=max_bytes, tail=True)
            if content.text is None:
                problems.append(f"{path}: {content.error}")
                scanner.add_unreadable(path, content.error or "unreadable")
                continue
            scanner.scan_bytes(path, content.text.encode("utf-8"))
            scanned.append(path)
            if content.truncated:
                cut.append(path)
    evidence = {"files_scanned": scanned, "max_bytes_per_file": max_bytes, "files_cut_at_max_bytes": cut,
                "problems": problems}
    if not scanned:
        if problems:
            yield error("no plog could be read: " + "; ".join(problems[:5]), evidence=evidence)
        else:
            yield skip(f"no plog-*.log files under {', '.join(roots)}", evidence=evidence)
        return
    result = scanner.result()
    outcomes = [_outcome(f) for f in result.findings]
    if not outcomes:
        records = sum(f.records for f in result.files)
        yield passed(detail=f"{len(scanned)} plog(s), {records} records: no errors, warnings or fallbacks",
                     evidence=evidence)
        return
    first = outcomes[0]
    yield Outcome(first.status, first.subject, first.detail, {**first.evidence, "scan": evidence}, first.fix)
    yield from outcomes[1:]
