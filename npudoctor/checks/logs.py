"""Checks of the logs stage: what the newest CANN plogs say."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Tuple

from npudoctor.checks.registry import CheckContext, Outcome, error, passed, setting, skip
from npudoctor.checks.registry import check as register
from npudoctor.model.finding import Status
from npudoctor.model.inputs import NAMED_LINK, WALKED_LINK

if TYPE_CHECKING:
    from npudoctor.logs.job import Place
    from npudoctor.logs.model import LogFinding

# The option key `npudoctor check --logs DIR` fills (a sequence of directories).
LOGS_DIRS_OPTION = "logs_dirs"
# Where plogs lie under a log root: ~/ascend/log/{run,debug}/plog/ (current), ~/ascend/log/plog/ (older),
# or the plog folder itself.
PLOG_SUBDIRS = ("", "plog", "run/plog", "debug/plog")
PLOG_NAME = re.compile(r"^plog[-_](?:\d+_)?(\d{14,17})\.log$|^plog[-_].*\.log$")
# A job tree (a folder per node, device-N, rank_N, attempt_N/<rank>) is walked this deep, through this many
# folders, for this many logs at most (a hostile or mistaken --logs / cannot make LOG001 read a whole disk).
MAX_WALK_DEPTH = 12
MAX_WALKED_FOLDERS = 20000
MAX_WALKED_LOGS = 20000


def _plog_files(ctx: CheckContext, root: str) -> Tuple[List[str], List[str], List[Tuple[str, str]]]:
    """(plog paths newest first, problems, skipped) under ``root``; names carry their start time. What is
    not a regular file (a FIFO) or is a link (to /dev/zero, a folder elsewhere) is skipped, never opened; a
    ``root`` that is a link is refused (the one link rule: :mod:`npudoctor.model.inputs`)."""
    found: List[Tuple[str, str]] = []
    problems: List[str] = []
    skipped: List[Tuple[str, str]] = []
    for sub in PLOG_SUBDIRS:
        folder = f"{root.rstrip('/')}/{sub}" if sub else root
        if ctx.runner.path_info(folder).link_target is not None:
            if not sub:
                problems.append(f"{folder}: {NAMED_LINK}")
                break
            skipped.append((folder, WALKED_LINK))
            continue
        listing = ctx.runner.list_dir(folder)
        if listing.error:
            if not sub:
                problems.append(f"{folder}: {listing.error}")
            continue
        for name in listing.entries:
            match = PLOG_NAME.match(name)
            if not match:
                continue
            path = f"{folder.rstrip('/')}/{name}"
            reason = _unsafe(ctx, path)
            if reason:
                skipped.append((path, reason))
            else:
                found.append((match.group(1) or "", path))
    found.sort(reverse=True)
    return [path for _, path in found], problems, skipped


class _JobTree:
    """The logs of a job tree under one ``--logs`` root, walked through the runner as ``logs scan`` walks a
    folder (sorted, a folder's files before its sub-folders, log names only, no link followed): the newest
    ``newest`` plogs of each folder and every other log file."""

    def __init__(self, ctx: CheckContext, root: str, newest: int) -> None:
        from npudoctor.logs.engine import LOG_FILE_NAME

        self.files: List[str] = []
        self.skipped: List[Tuple[str, str]] = []
        self.problems: List[str] = []
        self.subfolders: List[str] = []  # the root's own sub-folders (a folder per node?)
        self.nested = False  # whether a log lies below a sub-folder: a tree, not a folder of loose files
        self._folders = 0
        self._ctx, self._newest, self._log_name = ctx, newest, LOG_FILE_NAME
        self._walk(root.rstrip("/") or "/", 0)

    def _walk(self, folder: str, depth: int) -> None:
        self._folders += 1
        if self._folders > MAX_WALKED_FOLDERS or len(self.files) >= MAX_WALKED_LOGS:
            self.skipped.append((folder, f"not walked: over {MAX_WALKED_FOLDERS} folders or {MAX_WALKED_LOGS} logs"))
            return
        listing = self._ctx.runner.list_dir(folder)
        if listing.error:
            self.problems.append(f"{folder}: {listing.error}")
            return
        plogs: List[Tuple[str, str]] = []
        others: List[str] = []
        folders: List[str] = []
        for name in listing.entries:
            path = f"{folder.rstrip('/')}/{name}"
            info = self._ctx.runner.path_info(path)
            if info.kind == "dir" and info.link_target is None:
                folders.append(path)
            elif not self._log_name.search(name):
                continue  # not logs (logs scan passes over them too)
            elif (reason := _unsafe(self._ctx, path)):
                self.skipped.append((path, reason))
            elif PLOG_NAME.match(name):
                plogs.append((PLOG_NAME.match(name).group(1) or "", path))  # type: ignore[union-attr]
            else:
                others.append(path)
        kept = {path for _, path in sorted(plogs, reverse=True)[:self._newest]}.union(others)
        for name in listing.entries:  # in the folder's order, as logs scan reads them
            path = f"{folder.rstrip('/')}/{name}"
            if path in kept and len(self.files) < MAX_WALKED_LOGS:
                self.files.append(path)
                self.nested = self.nested or depth > 0
        if depth == 0:
            self.subfolders = [path.rsplit("/", 1)[1] for path in folders]
        if depth >= MAX_WALK_DEPTH:
            self.skipped.extend((path, f"deeper than {MAX_WALK_DEPTH} folders") for path in folders)
            return
        for path in folders:
            self._walk(path, depth + 1)


def _unsafe(ctx: CheckContext, path: str) -> str:
    """Why ``path`` must not be opened ("" when it may): only regular files met in the folder are read, never a
    link (the one link rule: :mod:`npudoctor.model.inputs`)."""
    info = ctx.runner.path_info(path)
    if info.error == "not-recorded":  # a bundle made before file types were recorded: its text is safe
        return ""
    if info.link_target is not None:
        return WALKED_LINK
    if info.exists and info.kind != "file":
        return f"not a regular file ({info.kind})"
    return ""


# How the finding kinds the scanner gives itself read in a merged LOG001 line.
KIND_LABELS = {"error_code": "error codes", "error_record": "ERROR records no rule or code explains",
               "warning_record": "WARNING records no rule or code explains"}


def _merged_outcome(kind: str, findings: List[LogFinding]) -> Outcome:
    """One outcome per cause (finding kind): its subjects with their line counts, worst first."""
    from npudoctor.logs.model import SEVERITY_STATUS

    findings = sorted(findings, key=lambda f: (SEVERITY_STATUS[f.severity] is not Status.FAIL, -f.count))
    worst = findings[0]
    lines = sum(f.count for f in findings)
    titles = {f.title for f in findings}
    label = KIND_LABELS.get(kind) or (worst.title if len(titles) == 1 and worst.title else kind.replace("_", " "))
    shown = ", ".join(f"{f.subject} x{f.count}" for f in findings[:MAX_SUBJECTS_SHOWN])
    more = f", {len(findings) - MAX_SUBJECTS_SHOWN} more" if len(findings) > MAX_SUBJECTS_SHOWN else ""
    detail = f"{label}: {shown}{more} ({lines} line(s), first {worst.first})"
    if worst.code is not None:
        detail += f". {worst.subject}: {worst.code.meaning}"
    evidence = {"kind": kind, "count": lines,
                "subjects": [{"subject": f.subject, "count": f.count, "first": str(f.first), "last": str(f.last),
                              "sample": f.sample} for f in findings[:20]]}
    status = SEVERITY_STATUS[worst.severity]
    if status is Status.PASS:
        return passed(kind, detail, evidence)
    return Outcome(status, kind, detail, evidence, worst.fix)


MAX_SUBJECTS_SHOWN = 4


@register("LOG001", stage="logs", title="Newest CANN plogs", settings=("logs.newest_files", "logs.max_bytes_per_file"))
def newest_plogs(ctx: CheckContext) -> Iterable[Outcome]:
    """Scan the newest CANN plogs for errors, device exceptions, HCCL timeouts and CPU fallbacks.

    When a job dies, the reason is in ``~/ascend/log/{run,debug}/plog/plog-<pid>_<time>.log`` among thousands of
    INFO lines. This check reads the newest plogs of each directory given with ``npudoctor check --logs DIR``
    (``logs.newest_files`` per directory, at most ``logs.max_bytes_per_file`` bytes from the end of each: the
    evidence says when a file was cut), gives the diagnosis first (one incident per failure; the root cause, the
    consequences that followed it, as ``logs scan`` says it), then merges what they say per cause (one finding
    per kind of problem, with its subjects and line counts) and explains error codes (EZ9999, EI0006, 507011,
    ...). It reports FAIL for errors (device exceptions, HCCL timeouts, error codes, ERROR records) and WARN for
    warnings and operators that fall back from the AI Core. Only regular files inside the directory are read
    (FIFOs, devices and links met in it are skipped).

    A directory without plogs of its own that holds a whole job's logs (a folder per node, ``device-N/``,
    ``rank_N/``, torchrun's ``attempt_N/<rank>/``), or several node folders given as repeated ``--logs``, is
    read as ``npudoctor logs scan`` reads it: every log file of the tree (the newest ``logs.newest_files``
    plogs of each folder), and the diagnosis names each failing rank by its node, rank and NPU.

    Fix: follow the fix printed with each finding; `npudoctor logs scan DIR` gives the full report, with
    every file and line.
    """
    roots = tuple(ctx.options.get(LOGS_DIRS_OPTION, ()) or ())
    if not roots:
        yield skip("no log directory given (npudoctor check --logs DIR)")
        return
    newest = int(setting(ctx, "logs.newest_files"))
    max_bytes = int(setting(ctx, "logs.max_bytes_per_file"))
    # only with --logs: the scanner's patterns cost start-up time
    from npudoctor.logs.job import are_node_folders, input_node, place_of, scan_job

    problems: List[str] = []
    cut: List[str] = []
    chosen: List[str] = []
    skipped: List[Tuple[str, str]] = []
    places: Dict[str, Place] = {}
    folders_named = [root for root in roots if ctx.runner.path_info(root).kind == "dir"]
    for root in roots:
        paths, root_problems, root_skipped = _plog_files(ctx, root)
        tree: Optional[_JobTree] = None
        if not paths and not root_problems:  # no plog folder: a job tree (nodes, device-N, rank_N, attempt_N)?
            tree = _JobTree(ctx, root, newest)
            tree = tree if tree.nested else None
        if tree is not None:
            paths, root_problems, root_skipped = tree.files, tree.problems, tree.skipped
        else:
            paths = paths[:newest]
        problems.extend(root_problems)
        skipped.extend(root_skipped)
        chosen.extend(paths)
        # where each log comes from in the job, as `logs scan` places it (its node, rank and NPU)
        folders = tree is not None and are_node_folders(tree.subfolders)
        node = input_node(root, "", len(folders_named) > 1 and root in folders_named, folders)
        places.update((path, place_of(path, root, node, folders)) for path in paths)

    def read_tail(path: str) -> List[bytes]:
        # The news of a dying job is at the end of its plog.
        content = ctx.runner.read_text(path, max_bytes=max_bytes, tail=True)
        if content.text is None:
            problems.append(f"{path}: {content.error}")
            raise OSError(0, content.error or "unreadable", path)
        if content.truncated:
            cut.append(path)
        return [content.text.encode("utf-8")]

    from npudoctor.probes.cann_codes import read_installed_registry

    registry = read_installed_registry(ctx.runner)  # codes read as `explain` shows them on this node
    job = scan_job(chosen, opener=read_tail, installed=registry.codes if registry else None, places=places)
    result = job.result
    scanned = [f.path for f in result.files if f.status == "ok"]
    evidence = {"files_scanned": scanned, "max_bytes_per_file": max_bytes, "files_cut_at_max_bytes": cut,
                "problems": problems, "skipped": [f"{path}: {reason}" for path, reason in skipped]}
    if not scanned:
        if problems:
            yield error("no plog could be read: " + "; ".join(problems[:5]), evidence=evidence)
        else:
            where = ", ".join(roots)
            extra = f" ({len(skipped)} skipped: {skipped[0][1]})" if skipped else ""
            yield skip(f"no plog-*.log files under {where}{extra}", evidence=evidence)
        return
    by_kind: Dict[str, List[LogFinding]] = {}
    for finding in result.findings:
        by_kind.setdefault(finding.kind, []).append(finding)
    outcomes = [_merged_outcome(kind, findings) for kind, findings in by_kind.items()]
    if not outcomes:
        records = sum(f.records for f in result.files)
        yield passed(detail=f"{len(scanned)} plog(s), {records} records: no errors, warnings or fallbacks",
                     evidence=evidence)
        return
    if job.incidents:  # the diagnosis first, as `logs scan` says it: the root cause, then what followed
        root = next((i for i in job.incidents if i.id == job.diagnosis.root_cause), job.incidents[0])
        outcomes.insert(0, Outcome(Status.FAIL, "diagnosis", job.diagnosis.verdict, {
            "diagnosis": job.diagnosis.to_dict(), "incidents": [i.to_dict() for i in job.incidents[:50]]},
            root.fix))
    first = outcomes[0]
    yield Outcome(first.status, first.subject, first.detail, {**first.evidence, "scan": evidence}, first.fix)
    yield from outcomes[1:]
