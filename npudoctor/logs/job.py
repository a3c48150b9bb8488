"""A whole job's logs as users keep them: which rank, node and NPU each log is, one scan per rank, merged.

Layouts read (``JOB_DIR`` as given to ``logs scan``): a folder per node (as ascend-fd expects) when the job
folder holds two or more folders that are not log folders themselves; CANN's ``plog/``, ``device-N/``;
torchrun's ``--log-dir`` (``attempt_N/<local_rank>/stderr.log``); MindSpore's ``rank_N/``; file names such
as ``rank3.log``; ascend-fd's ``worker-N/`` node folders. A console that carries several ranks is split by
its line prefixes: torchrun's ``[rank3]:`` / ``[default3]:``, Ray's ``(RayWorkerWrapper pid=123,
ip=10.0.0.1)``. The logs' own fields (``RankID``, ``chipId``, ``device_id``, ``remote rank``) fill in
what the layout does not say (:mod:`npudoctor.logs.incidents`).

Each unit (a file, or one rank's lines of a shared console) is scanned on its own (the scanner as it is,
:func:`npudoctor.logs.engine.scan_paths`), so that every rank keeps its own first lines and times; the
units' results are put together into the one merged result of ``npudoctor.logs/1`` as if scanned at once.
A ``logs scan --format json`` document is itself an input: its units and incidents join the job's
(:func:`load_document`), so per-node documents merge into the verdict one scan of every log gives.
"""

from __future__ import annotations

import array
import itertools
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from npudoctor.errors import InputError
from npudoctor.logs import codes as codebase
from npudoctor.logs.engine import LogInput, expand_paths, read_chunks, scan_paths
from npudoctor.logs.incidents import (
    INFERRED_KINDS,
    Diagnosis,
    Incident,
    Unit,
    diagnose,
    incidents_of,
    iso,
    last_time,
    named_ranks,
    own_rank,
)
from npudoctor.logs.model import Evidence, FileSummary, LogFinding, ScanPart, ScanResult
from npudoctor.logs.rules import Rule, RuleSet, load_rules, with_rules
from npudoctor.logs.safeio import open_input
from npudoctor.logs.scanner import Scanner
from npudoctor.untrusted import clean, clean_value

# Folder names of log layouts (not node names): CANN's, torchrun's, MindSpore's, the usual words.
LAYOUT_FOLDER = re.compile(r"(?i)^(?:plog|debug|run|log|logs|ascend|ascend_log|device-\d+|attempt_\d+|\d+|"
                           r"rank[_-]?\d+|node[_-]?rank[_-]?\d+|npu[_-]?\d+|slog|event|security|process_log|"
                           r"operate|trace|stdout|stderr|output|outputs|profiling)$")
RANK_FOLDER = re.compile(r"(?i)^rank[_-]?(\d+)$")
DEVICE_FOLDER = re.compile(r"^device-(\d+)$")
ATTEMPT_FOLDER = re.compile(r"^attempt_\d+$")
# `rank3.log`, `train_rank_3.txt`, `rank-3.out.1`: the rank right before the extension.
RANK_FILE = re.compile(r"(?i)(?:^|[_.-])rank[_-]?(\d+)\.(?:log|txt|out|err)(?:\.\d+)?(?:\.gz)?$")
PLOG_PID = re.compile(r"^plog-(\d+)_")
# A device log, `device-N/device-<host pid>_<time>.log`: the host process it ran for (its plog's pid).
DEVICE_LOG_PID = re.compile(r"^device-(\d+)_")
# Console line prefixes that say whose line it is (at the start of a line, after Docker's `name  | `).
# Before them may stand Docker compose's `name  | `, a launcher's `host [stderr] ` or a timestamp.
PREFIX = re.compile(rb"^(?:[\w.-]+\s+\|\s|\S+ \[std(?:out|err)\] |\s*\d{4}-\d\d-\d\d[ T][\d:.,]+\s+)?"
                    rb"(?:\[(rank|default)(\d+)\]:\s?|\((\w+(?: [\w=]+)*?) pid=(\d+)(?:, ip=([\w.:-]+))?\)\s?)")
PREFIX_AT_LINE_START = re.compile(b"(?m)" + PREFIX.pattern)
# The rank an actor's name carries: vLLM's `VllmWorker rank=0`, `VllmWorker TP3`.
ACTOR_RANK = re.compile(rb"\b(?:rank=|TP)(\d+)\b")
# A console is split when its first SNIFF_BYTES hold this many prefixed lines (one owner: its rank is known).
SNIFF_BYTES = 64 * 1024
SNIFF_LINES = 3
# Owners one console is split into at most (a hostile or huge console cannot open a file per line); the
# lines of any further owner stay with the unprefixed lines.
MAX_OWNERS = 4096
# A split console's line is carried this far at most before it is routed as it is (memory stays bounded).
MAX_LINE_BYTES = 1024 * 1024
# What of a log's end is read for the time its log stopped.
TAIL_BYTES = 64 * 1024
# A split stream stays in memory up to this size, then spills to a temporary file.
SPOOL_BYTES = 4 * 1024 * 1024
# A JSON document given as input is at most this big (one node: findings and incidents, capped).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
SCHEMA_PREFIX = "npudoctor.logs/"


class DocumentError(InputError):
    """A JSON input that is not a ``logs scan`` document (one-line reason)."""


@dataclass
class JobScan:
    """A job's scan: the merged result (``npudoctor.logs/1``), its units, incidents and diagnosis."""

    result: ScanResult
    units: List[Unit]
    incidents: List[Incident]
    diagnosis: Diagnosis
    leftover: List[LogFinding] = field(default_factory=list)


@dataclass
class Place:
    node: str = ""
    rank: Optional[int] = None
    device: Optional[int] = None
    pid: Optional[int] = None


def place_of(path: str, root: str, node: str = "", node_folders: bool = False) -> Place:
    """Where the log at ``path`` (found under the job folder ``root``) comes from, by the layout."""
    relative = os.path.relpath(path, root) if root and path != root else os.path.basename(path)
    parts = [p for p in relative.split(os.sep) if p not in ("", ".")]
    place = Place(node=node)
    if not node and node_folders and len(parts) >= 2:
        place.node = clean(parts[0])  # a folder's name is someone else's text
    folders, name = parts[:-1], parts[-1] if parts else ""
    for index, folder in enumerate(folders):
        if RANK_FOLDER.match(folder):
            place.rank = int(RANK_FOLDER.match(folder).group(1))  # type: ignore[union-attr]
        elif DEVICE_FOLDER.match(folder):
            place.device = int(DEVICE_FOLDER.match(folder).group(1))  # type: ignore[union-attr]
        elif folder.isdigit() and index > 0 and ATTEMPT_FOLDER.match(folders[index - 1]):
            place.rank = int(folder)  # torchrun --log-dir: attempt_N/<local_rank>/stderr.log
    rank = RANK_FILE.search(name)
    if rank and place.rank is None:
        place.rank = int(rank.group(1))
    pid = PLOG_PID.match(name) or (DEVICE_LOG_PID.match(name) if place.device is not None else None)
    if pid:
        place.pid = int(pid.group(1))
    return place


def node_folders(root: str) -> bool:
    """Whether ``root`` is a job folder with a folder per node (:func:`are_node_folders`)."""
    try:
        names = [e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return False
    return are_node_folders(names)


def are_node_folders(names: Sequence[str]) -> bool:
    """Whether the sub-folders ``names`` of a job folder are a folder per node: two or more, none a log
    layout folder of its own (plog, device-N, attempt_N, rank_N, ...)."""
    return len(names) >= 2 and not any(LAYOUT_FOLDER.match(n) for n in names)


def input_node(path: str, node: str, side_by_side: bool, folders: bool) -> str:
    """The node of what is found under the input ``path``: ``node`` (``--node``), else the folder's own name
    when folders are named side by side (`logs scan node-a/ node-b/`; not `debug/ run/`, not a job folder
    with a folder per node, ``folders``), else "" (the layout or the logs say it)."""
    name = os.path.basename(os.path.normpath(path))
    return node or (clean(name) if side_by_side and not folders and not LAYOUT_FOLDER.match(name) else "")


def is_document(path: str) -> bool:
    """A ``logs scan --format json`` document given as input (by its name and first bytes)."""
    if not path.endswith(".json") or not os.path.isfile(path):
        return False
    try:
        with open_input(path) as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return SCHEMA_PREFIX.encode() in head


def scan_job(paths: Sequence[str], *, rules: Optional[RuleSet] = None, rule_files: Sequence[str] = (),
             jobs: int = 1, progress: Any = None, stdin: Optional[IO[bytes]] = None, follow_symlinks: bool = False,
             cwd: Optional[str] = None, installed: Optional[codebase.Installed] = None, node: str = "",
             opener: Any = None, extra_rules: Sequence[Rule] = (),
             places: Optional[Mapping[str, Place]] = None) -> JobScan:
    """Scan ``paths`` (files, job folders, ``-``, ``logs scan`` JSON documents) unit by unit; diagnose.
    ``extra_rules``: rules made for this scan (``--expect-success``), in worker processes too.

    With ``opener`` (path -> its bytes in chunks; OSError when unreadable) ``paths`` are files read through
    it, never from the local file system (``check --logs`` reads through the runner: live, ``--root``, a
    bundle); ``places`` says where each comes from in the job (its walker's :func:`place_of`)."""
    rules = with_rules(rules if rules is not None else load_rules(rule_files), extra_rules)
    merged = Scanner(rules, installed)
    units: List[Unit] = []
    incidents: List[Incident] = []
    leftover: List[LogFinding] = []
    documents = [p for p in paths if opener is None and is_document(p)]
    for document in documents:
        _add_document(document, merged, units, incidents, leftover)
    raw = [p for p in paths if p not in documents]
    if opener is not None:
        given = places or {}
        inputs = [(LogInput(path, path, "opener"), given.get(path) or place_of(path, os.path.dirname(path), node))
                  for path in raw]
        skipped: List[Tuple[str, str]] = []
    else:
        inputs, skipped = [], []
        folders_named = [p for p in raw if os.path.isdir(p)]
        for path in raw:
            found, passed = expand_paths([path], follow_symlinks, cwd)
            skipped.extend(passed)
            folders = os.path.isdir(path) and node_folders(path)
            root = path if os.path.isdir(path) else os.path.dirname(path)
            own_node = input_node(path, node, len(folders_named) > 1 and path in folders_named, folders)
            inputs.extend((item, place_of(item.path, root, own_node, folders)) for item in found)
    total = len(inputs)
    total_bytes = sum(item.size for item, _ in inputs)
    done = 0
    for index, (item, place) in enumerate(inputs):
        file_progress = None
        if progress is not None:
            progress(done, max(total_bytes, done), index, total)

            def file_progress(read: int, _total: int, _index: int, _files: int, done: int = done,
                              index: int = index) -> None:
                progress(done + read, max(total_bytes, done + read), index, total)
        if item.kind == "problem":
            merged.add_unreadable(item.name, item.problem)
            continue
        streams = None
        if opener is not None:
            read = _Read(opener, item.path)
            if read.chunks:
                streams = _split_console(item.name, read.head(), read.chunks, rules, installed)
        elif item.kind == "file":
            streams = _split_console(item.name, _head(item), _file_chunks(item), rules, installed)
        if streams:
            for owner, part, lines, tail in streams:
                stream_place = Place(place.node or owner.node, owner.rank if owner.rank is not None else place.rank,
                                     place.device, owner.pid if owner.pid is not None else place.pid)
                name = item.name + (f"#{owner.label}" if owner.label else "")
                part = _renumbered(part, item.name, lines)
                _add_unit(part, name, stream_place, tail, merged, units, incidents, leftover)
            _fold_split_summaries(merged, item.name)
            done += item.size
            continue
        if opener is not None:
            result = scan_paths([item.path], rules=rules, opener=read, installed=installed)
        else:
            result = scan_paths([item.path], rules=rules, rule_files=rule_files, jobs=jobs, stdin=stdin,
                                follow_symlinks=follow_symlinks, cwd=cwd, installed=installed,
                                progress=file_progress, extra_rules=extra_rules)
        summary = result.files[0]
        summary.path = item.name
        part = ScanPart(summary, result.levels, result.modules, result.codes, result.findings)
        tail = _tail_text(item) if opener is None else read.tail()
        _add_unit(part, item.name, place, tail, merged, units, incidents, leftover)
        done += max(item.size, summary.bytes)
    if progress is not None:
        progress(done, max(total_bytes, done), total, total)
    result = merged.result()
    result.skipped = skipped
    incidents, diagnosis = diagnose(incidents, units)
    return JobScan(result, units, incidents, diagnosis, leftover)


def _add_unit(part: ScanPart, name: str, place: Place, tail: str, merged: Scanner, units: List[Unit],
              incidents: List[Incident], leftover: List[LogFinding]) -> None:
    merged.add_parts([part])
    rank = place.rank
    if rank is None and tail:  # the log's own words: `RankID:8`, `rank[76]` (its end: where a dying job writes)
        rank = own_rank(tail)
    unit = Unit(name, place.node, rank, place.device, place.pid, iso(last_time(tail)) if tail else None)
    found, left = incidents_of(part.findings, unit, named=named_ranks(tail) if tail else ())
    units.append(unit)
    incidents.extend(found)
    leftover.extend(left)


class _Read:
    """One read of ``path`` through ``opener``, answered again to the scanner (never a second read)."""

    def __init__(self, opener: Any, path: str) -> None:
        self.chunks: List[bytes] = []
        self.failure: Optional[OSError] = None
        try:
            self.chunks = list(opener(path))
        except OSError as exc:
            self.failure = exc

    def __call__(self, _path: str) -> List[bytes]:
        if self.failure is not None:
            raise self.failure
        return self.chunks

    def head(self) -> bytes:
        """The first bytes, as much as :func:`_head` reads of a local file."""
        kept: List[bytes] = []
        size = 0
        for chunk in self.chunks:
            kept.append(chunk)
            size += len(chunk)
            if size >= SNIFF_BYTES:
                break
        return b"".join(kept)[:SNIFF_BYTES]

    def tail(self) -> str:
        """The end of the text (what :func:`_tail_text` reads of a local file)."""
        kept: List[bytes] = []
        size = 0
        for chunk in reversed(self.chunks):
            kept.insert(0, chunk)
            size += len(chunk)
            if size >= TAIL_BYTES:
                break
        return b"".join(kept)[-TAIL_BYTES:].decode("utf-8", "replace")


def _tail_text(item: LogInput) -> str:
    if item.kind != "file":
        return ""
    try:
        with open_input(item.path, regular_only=True, nofollow=item.nofollow) as handle:
            handle.seek(max(0, item.size - TAIL_BYTES))
            return handle.read(TAIL_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


# -- consoles that carry several ranks ---------------------------------------------------------------------
@dataclass(frozen=True)
class Owner:
    label: str  # "" for lines without a prefix
    rank: Optional[int] = None
    pid: Optional[int] = None
    node: str = ""


def _owner(match: re.Match[bytes]) -> Owner:
    word, number, actor, pid, ip = match.groups()
    if number is not None:
        return Owner(f"{word.decode()}{int(number)}", rank=int(number))
    host = ip.decode("ascii", "replace") if ip else ""
    rank = ACTOR_RANK.search(actor)
    name = actor.decode("ascii", "replace").replace(" ", "_")
    return Owner(f"{name}-pid{int(pid)}" + (f"@{host}" if host else ""), rank=int(rank.group(1)) if rank else None,
                 pid=int(pid), node=host)


def _head(item: LogInput) -> bytes:
    try:
        with open_input(item.path, regular_only=True, nofollow=item.nofollow) as handle:
            return handle.read(SNIFF_BYTES)
    except OSError:
        return b""


def _file_chunks(item: LogInput) -> Iterator[bytes]:
    with open_input(item.path, regular_only=True, nofollow=item.nofollow) as handle:
        yield from read_chunks(handle)


def _sniff(head: bytes) -> bool:
    if b"]:" not in head and b" pid=" not in head:  # no prefix of either kind: most logs end here
        return False
    prefixed = PREFIX_AT_LINE_START.finditer(head)
    return len(list(itertools.islice(prefixed, SNIFF_LINES))) >= SNIFF_LINES


Stream = Tuple["Owner", ScanPart, "array.array[int]", str]


def _split_console(name: str, head: bytes, chunks: Iterable[bytes], rules: RuleSet,
                   installed: Optional[codebase.Installed]) -> Optional[List[Stream]]:
    """A shared console split per owner and each owner's lines scanned: [(owner, part, line numbers in the
    file, tail text)], or None when the file is not such a console (``head``: its first bytes). One pass over
    the file's ``chunks``; each owner's lines go to a spooled buffer (memory bounded), with their line
    numbers in the file."""
    if not _sniff(head):
        return None
    spools: Dict[Owner, Tuple[IO[bytes], array.array[int]]] = {}
    lineno = 0
    carry = b""
    try:
        for chunk in chunks:
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            for line in data[:cut].split(b"\n")[:-1]:
                lineno += 1
                _route(line, lineno, spools)
            if len(carry) > MAX_LINE_BYTES:  # a line without end (binary junk): routed in pieces
                _route(carry, lineno + 1, spools)
                carry = b""
        if carry:
            _route(carry, lineno + 1, spools)
    except OSError:
        return None
    out = []
    for owner, (spool, lines) in spools.items():
        spool.seek(0)
        scanner = Scanner(rules, installed)
        scanner.scan_stream(name, read_chunks(spool))
        spool.seek(0, os.SEEK_END)
        size = spool.tell()
        spool.seek(max(0, size - TAIL_BYTES))
        tail = spool.read().decode("utf-8", "replace")
        spool.close()
        out.append((owner, scanner.export_part(), lines, tail))
    return sorted(out, key=lambda entry: (entry[0].rank is None, entry[0].rank or 0, entry[0].label))


def _route(line: bytes, lineno: int, spools: Dict[Owner, Tuple[IO[bytes], array.array[int]]]) -> None:
    match = PREFIX.match(line)
    owner = _owner(match) if match else Owner("")
    if match:
        line = line[match.end():]
        inner = PREFIX.match(line)  # Ray's prefix then torch's `[rank3]:`: the rank is the inner one
        if inner and inner.group(2) is not None:
            owner = Owner(f"{owner.label}/{_owner(inner).label}", rank=int(inner.group(2)), pid=owner.pid,
                          node=owner.node)
            line = line[inner.end():]
    if owner not in spools and len(spools) >= MAX_OWNERS:
        owner = Owner("")
    if owner not in spools:
        spools[owner] = (tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES),  # noqa: SIM115 (closed when scanned)
                         array.array("I"))
    spool, lines = spools[owner]
    spool.write(line + b"\n")
    lines.append(lineno)


def _renumbered(part: ScanPart, name: str, lines: array.array[int]) -> ScanPart:
    """``part``'s evidence at the lines of the whole file (a split stream's line k is the file's lines[k-1])."""
    def where(evidence: Evidence) -> Evidence:
        index = evidence.line - 1
        return Evidence(name, lines[index] if 0 <= index < len(lines) else evidence.line)

    findings = [_replace_evidence(f, where(f.first), where(f.last)) for f in part.findings]
    part.summary.path = name
    return ScanPart(part.summary, part.levels, part.modules, part.codes, findings)


def _replace_evidence(finding: LogFinding, first: Evidence, last: Evidence) -> LogFinding:
    import dataclasses

    return dataclasses.replace(finding, first=first, last=last, details=dict(finding.details))


def _fold_split_summaries(merged: Scanner, name: str) -> None:
    """The summaries of one console's owners as the one file they are (line counts add up to the file's)."""
    mine = [s for s in merged.files if s.path == name]
    if len(mine) < 2:
        return
    whole = FileSummary(name)
    for piece in mine:
        whole.lines += piece.lines
        whole.records += piece.records
        whole.bytes += piece.bytes
        whole.cut_lines += piece.cut_lines
        whole.examined_lines += piece.examined_lines
        whole.causes.update(piece.causes)
        if piece.status != "ok" and whole.status == "ok":
            whole.status, whole.error = piece.status, piece.error
    formats = [p.format for p in mine if p.format not in ("empty", "text")]
    whole.format = formats[0] if formats else "text"
    merged.files[:] = [s for s in merged.files if s.path != name] + [whole]


# -- per-node documents -------------------------------------------------------------------------------------
def load_document(path: str) -> Dict[str, Any]:
    """A ``logs scan --format json`` document (DocumentError with a one-line reason when it is not one)."""
    try:
        with open_input(path) as handle:
            raw = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise DocumentError(f"{path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"{path}: over {MAX_DOCUMENT_BYTES >> 20} MiB: not a logs scan document")
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise DocumentError(f"{path}: nested too deeply: not a logs scan document") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise DocumentError(f"{path}: not JSON ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(SCHEMA_PREFIX):
        raise DocumentError(f"{path}: not a logs scan document (no schema {SCHEMA_PREFIX}N)")
    if not isinstance(data.get("units"), list) or not isinstance(data.get("incidents"), list):
        raise DocumentError(f"{path}: a {data.get('schema')} document without units and incidents: write it "
                            f"again with this version's logs scan --format json")
    return data


def _add_document(path: str, merged: Scanner, units: List[Unit], incidents: List[Incident],
                  leftover: List[LogFinding]) -> None:
    data = clean_value(load_document(path))  # another node's text: no secret, no control character
    try:
        units.extend(Unit.from_dict(u) for u in data["units"])
        # what the logs said, not what one node's diagnosis concluded (a rank named for its silence there)
        incidents.extend(Incident.from_dict(i) for i in data["incidents"] if i.get("kind") not in INFERRED_KINDS)
        findings = [finding_from_dict(f) for f in data.get("findings", ())]
        files = data.get("files", ())
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DocumentError(f"{path}: a malformed logs scan document ({type(exc).__name__}: {exc})") from None
    for entry in files:
        summary = FileSummary(str(entry.get("path", "")), status=str(entry.get("status", "ok")),
                              error=entry.get("error"), format=str(entry.get("format", "unknown")),
                              lines=int(entry.get("lines", 0)), records=int(entry.get("records", 0)),
                              bytes=int(entry.get("bytes", 0)), examined_lines=int(entry.get("examined_lines", 0)))
        merged.files.append(summary)
    summary_block = data.get("summary", {})
    merged.levels.update({str(k): int(v) for k, v in summary_block.get("levels", {}).items()})
    merged.modules.update({str(k): int(v) for k, v in summary_block.get("modules", {}).items()})
    merged.codes.update({str(k): int(v) for k, v in summary_block.get("codes", {}).items()})
    for finding in findings:
        merged._merge_finding(finding, lambda values, new: values.update(new))
    leftover.extend(f for f in findings if f"{f.kind} {f.subject}" in set(data.get("leftover", ())))


def finding_from_dict(data: Dict[str, Any]) -> LogFinding:
    """A finding back from its ``npudoctor.logs/1`` form."""
    evidence = data.get("evidence", {})
    code = data.get("explain")
    details = {k: set(v) for k, v in evidence.items() if k not in ("first", "last", "sample") and isinstance(v, list)}
    return LogFinding(kind=str(data["kind"]), subject=str(data["subject"]), severity=str(data["severity"]),
                      title=str(data.get("title", "")), count=int(data.get("count", 1)),
                      first=_evidence(evidence.get("first", "")), last=_evidence(evidence.get("last", "")),
                      sample=str(evidence.get("sample", "")), fix=str(data.get("fix", "")),
                      rule=str(data.get("rule", "")), code=codebase.CodeInfo(**code) if code else None,
                      details=details)


def _evidence(text: str) -> Evidence:
    path, _, line = str(text).rpartition(":")
    return Evidence(path, int(line)) if line.isdigit() else Evidence(str(text), 0)



def diagnose_result(result: ScanResult) -> JobScan:
    """The job layer of a result scanned without it (each file one unit, its findings merged)."""
    units = [Unit(summary.path) for summary in result.readable_files]
    incidents, leftover = incidents_of(result.findings, Unit(""))
    for incident in incidents:
        incident.unit = incident.sources[0].rpartition(":")[0] if incident.sources else ""
    incidents, diagnosis = diagnose(incidents, units)
    return JobScan(result, units, incidents, diagnosis, leftover)
