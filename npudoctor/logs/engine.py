"""Inputs of a log scan: walking folders, opening files safely, chunking, the parallel scan of big files.

:func:`scan_paths` is the one entry point: ``logs scan``, ``check --logs`` (LOG001) and the dashboard call
it and get a :class:`~npudoctor.logs.model.ScanResult` back. The scanner itself stays pure (bytes in).

Files are opened the way untrusted input must be: the type is looked at (``lstat``) before opening, nothing
that is not a regular file is opened from a walked folder, ``open`` never blocks (``O_NONBLOCK``: a FIFO
without a writer cannot hang the scan), a symlink is not followed, named or met in a folder, unless asked
(the one link rule: :mod:`npudoctor.model.inputs`), and what is read from a device is capped.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from dataclasses import dataclass
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from npudoctor.logs.codes import Installed
from npudoctor.logs.model import FileSummary, ScanResult
from npudoctor.logs.rules import Rule, RuleSet, load_rules, with_rules
from npudoctor.logs.safeio import file_type, open_input
from npudoctor.logs.scanner import CHUNK_BYTES, Scanner
from npudoctor.model.inputs import NAMED_LINK, WALKED_LINK, is_named_link

# Files taken from a folder: plog-*.log, device-*.log, slogdlog, atrace ts_*.txt, rotated/zipped copies, and
# MindSpore's rank_N/logs/mindspore.log.<stamp> and its per-level mindspore.INFO / .WARNING / .ERROR.
LOG_FILE_NAME = re.compile(r"(?:\.log|\.txt|\.out|^slogdlog)(?:\.\d+)?(?:\.gz)?$"
                           r"|^mindspore\.(?:log\.[\w.-]+|INFO|WARNING|ERROR)(?:\.gz)?$")
# Regular files at least this big are split into ranges scanned by worker processes (``jobs``).
PARALLEL_MIN_BYTES = 64 * 1024 * 1024
# A device named on the command line (``/dev/zero``) is read this far at most.
MAX_DEVICE_BYTES = 16 * 1024 * 1024
# What a folder's skip list keeps by name (the rest are counted).
MAX_SKIPPED_NAMES = 200

# (done_bytes, total_bytes, files_done, files_total); total_bytes counts what is known in advance (stdin and
# pipes add to done only).
Progress = Callable[[int, int, int, int], None]
# Reads one input for callers that do not read local files (LOG001 reads through the node's runner).
Opener = Callable[[str], Iterable[bytes]]

_worker_rules: Dict[Tuple[Tuple[str, ...], Tuple[Rule, ...]], RuleSet] = {}


@dataclass(frozen=True)
class LogInput:
    """One input to scan: where to open it, how it is shown, what it is."""

    path: str
    name: str
    kind: str  # "file", "gzip", "stdin", "stream" (pipe, FIFO, device named on the command line), "problem"
    size: int = 0
    problem: str = ""  # kind "problem": why it cannot be read at all
    nofollow: bool = False  # opened with O_NOFOLLOW: the walk saw a regular file there, not a link


def display_path(path: str, cwd: Optional[str] = None) -> str:
    """``path`` relative to the current folder when it lies below it, else as given."""
    if not os.path.isabs(path):
        return os.path.normpath(path)
    base = os.path.abspath(cwd or os.getcwd())
    if path == base or not path.startswith(base.rstrip(os.sep) + os.sep):
        return path
    return os.path.relpath(path, base)


def expand_paths(paths: Sequence[str], follow_symlinks: bool = False,
                 cwd: Optional[str] = None) -> Tuple[List[LogInput], List[Tuple[str, str]]]:
    """(inputs, skipped) for the command-line ``paths``.

    Folders are walked (sorted) for log files; from a folder only regular files are taken. A symbolic link,
    named or met in a walk, is read only with ``follow_symlinks`` (the one link rule,
    :mod:`npudoctor.model.inputs`). ``skipped`` lists (path, reason) of what a walk passed over; what cannot be
    read at all is an input of kind "problem". A path named on the command line is otherwise read as given
    (files, folders, pipes such as ``<(kubectl logs ...)``, ``-`` for stdin).
    """
    inputs: List[LogInput] = []
    skipped: List[Tuple[str, str]] = []
    for path in paths:
        if path == "-":
            inputs.append(LogInput("-", "<stdin>", "stdin"))
            continue
        shown = display_path(path, cwd)
        if not follow_symlinks and is_named_link(path):
            inputs.append(_problem(shown, NAMED_LINK))
            continue
        try:
            st = os.stat(path)
        except FileNotFoundError:
            inputs.append(_problem(shown, "no such file or directory"))
            continue
        except OSError as exc:
            inputs.append(_problem(shown, exc.strerror or str(exc)))
            continue
        if stat.S_ISDIR(st.st_mode):
            before = len(inputs)
            _walk(path, follow_symlinks, cwd, inputs, skipped)
            if len(inputs) == before:
                inputs.append(_problem(shown, "no log files in this directory"))
        elif stat.S_ISREG(st.st_mode):
            kind = "gzip" if path.endswith(".gz") else "file"
            inputs.append(LogInput(path, shown, kind, st.st_size))
        else:
            inputs.append(LogInput(path, shown, "stream"))
    return inputs, skipped


def _problem(name: str, reason: str) -> LogInput:
    return LogInput(name, name, "problem", problem=reason)


def _walk(root: str, follow_symlinks: bool, cwd: Optional[str], inputs: List[LogInput],
          skipped: List[Tuple[str, str]]) -> None:
    def note(exc: OSError) -> None:
        inputs.append(_problem(display_path(str(exc.filename), cwd), exc.strerror or str(exc)))

    for folder, dirs, files in os.walk(root, onerror=note):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(folder, name)
            shown = display_path(full, cwd)
            if not LOG_FILE_NAME.search(name):
                skipped.append((shown, "not logs"))
                continue
            try:
                st = os.lstat(full)
                link = stat.S_ISLNK(st.st_mode)
                if link:
                    if not follow_symlinks:
                        skipped.append((shown, WALKED_LINK))
                        continue
                    st = os.stat(full)
            except FileNotFoundError:
                skipped.append((shown, "broken symlink"))
                continue
            except OSError as exc:
                inputs.append(_problem(shown, exc.strerror or str(exc)))
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped.append((shown, f"not a regular file ({file_type(st.st_mode)})"))
                continue
            kind = "gzip" if name.endswith(".gz") else "file"
            inputs.append(LogInput(full, shown, kind, st.st_size, nofollow=not link))


def read_chunks(handle: IO[bytes], chunk_bytes: int = CHUNK_BYTES, limit: Optional[int] = None) -> Iterator[bytes]:
    """The bytes of ``handle`` in chunks of about ``chunk_bytes`` (at most ``limit`` bytes in all).

    Reads are single calls (``read1`` on buffered streams) gathered into a chunk, so that a read error
    after some data (a dropped pipe) first yields what came before it, then raises.
    """
    read = getattr(handle, "read1", handle.read)
    left = limit
    pending: List[bytes] = []
    size = 0
    while left is None or left > 0:
        want = chunk_bytes - size if left is None else min(chunk_bytes - size, left)
        try:
            data = read(want)
        except Exception:
            if pending:
                yield b"".join(pending)
            raise
        if not data:
            break
        pending.append(data)
        size += len(data)
        if left is not None:
            left -= len(data)
        if size >= chunk_bytes:
            yield b"".join(pending) if len(pending) > 1 else pending[0]
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


def gunzip_chunks(raw: Iterable[bytes], chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Decompress a gzip stream chunk by chunk (members one after another).

    What decompresses is yielded before a cut or corrupt end raises (EOFError / zlib.error), so that a
    truncated ``.gz`` keeps its readable lines (the scan marks it partial). Output per step is capped:
    a small bomb cannot take memory.
    """
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    in_member = False
    for data in raw:
        while data:
            if not in_member:
                data = data.lstrip(b"\x00")  # padding between or after members, as gzip(1) allows
                if not data:
                    break
                in_member = True
            out = inflater.decompress(data, chunk_bytes)
            if out:
                yield out
            data = inflater.unconsumed_tail
            while not data and not inflater.eof:  # drain what one input step holds, chunk by chunk
                out = inflater.decompress(b"", chunk_bytes)
                if not out:
                    break
                yield out
                data = inflater.unconsumed_tail
            if inflater.eof:
                data = inflater.unused_data
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                in_member = False
    if in_member:
        raise EOFError("compressed file ended before the end of the stream (truncated .gz)")


def _local_chunks(item: LogInput, stdin: Optional[IO[bytes]]) -> Iterator[bytes]:
    if item.kind == "stdin":
        if stdin is None:
            raise OSError(0, "no standard input to read")
        yield from read_chunks(stdin)
        return
    regular = item.kind in ("file", "gzip")
    with open_input(item.path, regular_only=regular, nofollow=item.nofollow) as handle:
        if item.kind == "gzip":
            yield from gunzip_chunks(read_chunks(handle))
        elif item.kind == "stream" and stat.S_ISCHR(os.fstat(handle.fileno()).st_mode):
            yield from read_chunks(handle, limit=MAX_DEVICE_BYTES)
            if handle.read(1):
                raise OSError(0, f"a device: read only its first {MAX_DEVICE_BYTES >> 20} MiB")
        elif item.kind == "file" and item.size > CHUNK_BYTES:
            yield from read_ahead(read_chunks(handle))
        else:
            yield from read_chunks(handle)


def read_ahead(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks``, the next one read by a helper thread while this one is scanned: a read does not hold the
    interpreter lock, so with a core to spare the reading costs no time. One chunk ahead at most (memory
    stays bounded); a read error comes where it would have come, after the chunks before it. (A bare thread
    and two queues: importing concurrent.futures costs a `logs scan` 10-20 ms.)"""
    import queue
    import threading

    iterator = iter(chunks)
    asks: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: read the next chunk; False: stop
    answers: queue.SimpleQueue[Tuple[Optional[bytes], Optional[BaseException]]] = queue.SimpleQueue()

    def reader() -> None:
        while asks.get():
            try:
                chunk = next(iterator, None)
            except BaseException as exc:  # handed to the scanning thread, raised there
                answers.put((None, exc))
                return
            answers.put((chunk, None))
            if chunk is None:
                return

    thread = threading.Thread(target=reader, name="npudoctor-read-ahead", daemon=True)
    thread.start()
    asks.put(True)
    try:
        while True:
            chunk, error = answers.get()
            if error is not None:
                raise error
            if chunk is None:
                return
            asks.put(True)
            yield chunk
            del chunk  # hold one chunk while the next is read
    finally:
        asks.put(False)
        thread.join()  # the file is closed after this: no read may be running


def _range_chunks(path: str, start: int, stop: int) -> Iterator[bytes]:
    with open_input(path) as handle:
        handle.seek(start)
        yield from read_chunks(handle, limit=stop - start)


def _scan_range(path: str, name: str, start: int, stop: int, rule_files: Tuple[str, ...],
                extra_rules: Tuple[Rule, ...] = ()) -> Any:
    """Worker process: scan bytes [start, stop) of ``path`` (cut at line starts) with the pure engine."""
    key = (rule_files, extra_rules)
    if key not in _worker_rules:
        _worker_rules[key] = with_rules(load_rules(rule_files), extra_rules)
    scanner = Scanner(_worker_rules[key])
    scanner.scan_stream(name, _range_chunks(path, start, stop))
    return scanner.export_part()


def line_boundaries(path: str, size: int, parts: int) -> List[int]:
    """Offsets just after a newline near each of ``parts`` equal cuts of the file (0 and size included)."""
    cuts = [0]
    with open_input(path) as handle:
        for index in range(1, parts):
            handle.seek(max(size * index // parts, cuts[-1]))
            probe = handle.read(1 << 20)
            newline = probe.find(b"\n")
            if newline >= 0 and handle.tell() - len(probe) + newline + 1 < size:
                cuts.append(handle.tell() - len(probe) + newline + 1)
    cuts.append(size)
    return sorted(set(cuts))


def _scan_parallel(scanner: Scanner, item: LogInput, jobs: int, rule_files: Tuple[str, ...],
                   extra_rules: Tuple[Rule, ...]) -> Optional[FileSummary]:
    """Scan a big regular file in ``jobs`` worker processes; None when no worker could start."""
    import concurrent.futures

    try:
        cuts = line_boundaries(item.path, item.size, jobs)
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_scan_range, item.path, item.name, a, b, rule_files, extra_rules)
                       for a, b in zip(cuts, cuts[1:])]
            parts = [f.result() for f in futures]
    except (OSError, concurrent.futures.process.BrokenProcessPool):
        return None  # no worker processes here (sandbox, no /dev/shm): scan in this process
    return scanner.add_parts(parts)


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def scan_paths(paths: Sequence[str], *, rules: Optional[RuleSet] = None, rule_files: Sequence[str] = (),
               jobs: int = 1, progress: Optional[Progress] = None, stdin: Optional[IO[bytes]] = None,
               follow_symlinks: bool = False, opener: Optional[Opener] = None,
               cwd: Optional[str] = None, installed: Optional[Installed] = None,
               extra_rules: Sequence[Rule] = ()) -> ScanResult:
    """Scan files, folders (walked for log files), ``.gz`` files and ``-`` (``stdin``); one merged result.

    ``rules`` default to the shipped ones plus ``rule_files`` (raises :class:`~npudoctor.logs.rules.RulesError`
    for a bad file). ``jobs`` > 1 scans big regular files in worker processes. ``progress`` is called as
    bytes are scanned. ``opener`` reads each of ``paths`` instead of the local file system (no walking):
    LOG001 reads a node's plogs through its runner. Inputs that cannot be read become "unreadable" or
    "partial" files of the result, with the reason; ``result.skipped`` names what a walk passed over.
    ``installed``: CANN's registry texts read on the node (:func:`npudoctor.probes.cann_codes.texts_on_node`):
    code findings then read as ``explain`` shows them there. ``extra_rules`` are made for this scan (the
    success line of ``logs scan --expect``) and added to ``rules``, in worker processes too.
    """
    rule_files, extra = tuple(rule_files), tuple(extra_rules)
    scanner = Scanner(with_rules(rules if rules is not None else load_rules(rule_files), extra), installed)
    if opener is not None:
        inputs = [LogInput(path, path, "opener") for path in paths]
        skipped: List[Tuple[str, str]] = []
    else:
        inputs, skipped = expand_paths(paths, follow_symlinks, cwd)
    total = sum(item.size for item in inputs)
    done = 0
    for index, item in enumerate(inputs):
        if progress is not None:
            progress(done, total, index, len(inputs))
        if item.kind == "problem":
            scanner.add_unreadable(item.name, item.problem)
            continue
        summary: Optional[FileSummary] = None
        if jobs > 1 and item.kind == "file" and item.size >= PARALLEL_MIN_BYTES:
            summary = _scan_parallel(scanner, item, jobs, rule_files, extra)
        if summary is None:
            chunks = opener(item.path) if opener is not None else _local_chunks(item, stdin)
            summary = scanner.scan_stream(item.name, _counted(chunks, done, total, index, len(inputs), progress))
        done += max(item.size, summary.bytes if item.kind != "gzip" else 0)
        total = max(total, done)
    if progress is not None:
        progress(done, total, len(inputs), len(inputs))
    result = scanner.result()
    result.skipped = skipped
    return result


def _counted(chunks: Iterable[bytes], done: int, total: int, index: int, files: int,
             progress: Optional[Progress]) -> Iterator[bytes]:
    if progress is None:
        yield from chunks
        return
    read = 0
    for chunk in chunks:
        read += len(chunk)
        progress(done + read, max(total, done + read), index, files)
        yield chunk
