"""The training memory log: one JSON line per step, schema ``npudoctor.memlog/2`` (``/1`` logs still read).

Pure Python and torch-free: the dashboard and the fleet tools read these logs without torch.
``npudoctor train-step`` and :class:`npudoctor.monitor.MemoryMonitor` write them; ``npudoctor leak analyze``
and :func:`npudoctor.workload.leak.analyze` judge them.

Schema ``npudoctor.memlog/2`` (every line is one self-contained JSON object; units are in the key names;
a value that the device or the host cannot give is ``null``, never a made-up 0):

==========================  ========  ==============================================================
key                         type      meaning
==========================  ========  ==============================================================
``schema``                  str       ``"npudoctor.memlog/2"`` (``/1``: written before the keys marked 2)
``run``                     str       id of the run that wrote the line (a file may hold several runs)
``step``                    int       training step, from 0 (or from where the user's loop counts)
``time_unix_s``             float     wall-clock time the step ended (seconds since the epoch)
``step_s``                  float     wall time of the whole step, data wait included
``data_wait_s``             float     time spent waiting for the next batch (DataLoader)
``loss``                    float     the step's loss (``null`` when unknown or not finite)
``logit_scale``             float     CLIP's ``exp(logit_scale)`` after clamping, when there is one
``device``                  str       ``"npu:0"``, ``"cuda:0"`` or ``"cpu"``
``allocated_bytes``         int       allocator: bytes in live tensors now (``allocated_bytes.all.current``)
``allocated_peak_bytes``    int       ... and its peak
``reserved_bytes``          int       allocator: bytes held from the device (``reserved_bytes.all.current``)
``reserved_peak_bytes``     int       ... and its peak
``active_bytes``            int       allocator: bytes in active blocks (``active_bytes.all.current``)
``active_peak_bytes``       int       ... and its peak
``alloc_retries``           int       allocations that succeeded only after freeing the cache (``num_alloc_retries``)
``ooms``                    int       out-of-memory errors the allocator raised (``num_ooms``)
``rss_bytes``               int       resident memory of the training process (every device, psutil)
``device_total_bytes``      int       the device's total memory (``null`` on the CPU)
``host_total_bytes``        int       the host's total memory
``inactive_split_bytes``    int       2: allocator: bytes in split blocks that are free but cannot be released
                                      (``inactive_split_bytes.all.current``; fragmentation on the device)
``workers_rss_bytes``       int       2: summed resident memory of the process's children (DataLoader workers;
                                      ``0`` with none; shared copy-on-write pages count in each)
``workers``                 int       2: how many child processes ``workers_rss_bytes`` sums
``malloc_in_use_bytes``     int       2: host C allocator: bytes in allocated chunks (glibc ``mallinfo2()``:
                                      ``uordblks + hblkhd``); ``null`` without glibc 2.33+ (musl, macOS, Windows)
``malloc_held_bytes``       int       2: host C allocator: bytes it holds from the system (``arena + hblkhd``);
                                      held growing while in use is flat is fragmentation, not kept objects
``cpu_fallbacks``           list      2, optional (older readers ignore it): the CPU-fallback warnings seen so
                                      far in the run, ``[{"op", "first_step", "count"}]``, on the records where
                                      that table changed, else ``null``
``pids``                    list      2, optional (older readers ignore it): the job's processes as the writer
                                      sees them, its own pid first, then the ranks its launcher started beside
                                      it (torchrun, mpirun); the dashboard tells them from other processes that
                                      hold a chip (SMI004)
==========================  ========  ==============================================================

A ``/1`` line reads with the keys marked 2 as ``null``: the verdict then says what it could not tell apart.

Writers append and flush one line per step, so a crash loses at most the last line and a reader can follow
the file while it grows; readers skip a torn (unterminated or unparsable) last line and any line that is not
a ``npudoctor.memlog/1`` or ``/2`` object.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import time
import uuid
from array import array
from typing import (
    IO,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    overload,
)

from npudoctor.errors import InputError
from npudoctor.model.inputs import NAMED_LINK
from npudoctor.parsers import jsondoc

SCHEMA = "npudoctor.memlog/2"
#: Schemas the readers accept: a /1 line lacks the /2 keys (read as ``None``).
READABLE_SCHEMAS = ("npudoctor.memlog/1", SCHEMA)

#: Keys every record carries (``None`` where the device cannot tell).
FIELDS = (
    "schema", "run", "step", "time_unix_s", "step_s", "data_wait_s", "loss", "logit_scale", "device",
    "allocated_bytes", "allocated_peak_bytes", "reserved_bytes", "reserved_peak_bytes", "active_bytes",
    "active_peak_bytes", "alloc_retries", "ooms", "rss_bytes", "device_total_bytes", "host_total_bytes",
    "inactive_split_bytes", "workers_rss_bytes", "workers", "malloc_in_use_bytes", "malloc_held_bytes",
    "cpu_fallbacks", "pids",
)
_INT_FIELDS = frozenset(name for name in FIELDS if name.endswith("_bytes")) | {"step", "alloc_retries", "ooms",
                                                                                "workers"}
_FLOAT_FIELDS = frozenset({"time_unix_s", "step_s", "data_wait_s", "loss", "logit_scale"})
_TEXT_FIELDS = frozenset({"run", "device"})

#: What a reader accepts, field by field; a record with a value outside it is refused whole (a 4000-digit
#: integer would overflow every float conversion downstream; ``"run": [1]`` cannot be compared or hashed).
MAX_COUNT = (1 << 63) - 1  # bytes and counters: what an int64 counter can hold
MAX_STEP = 1 << 53  # steps become floats in the verdict: exact up to here
MAX_TEXT_CHARS = 256  # a run id or a device name
MAX_RECORD_DEPTH = 8  # a record is a flat object; a line of [[[[... is no record
MAX_PID = 1 << 22  # Linux's PID_MAX_LIMIT
MAX_PIDS = 1024  # the ranks of one node, with room

#: A line longer than this is not a memlog record (a record is ~600 bytes); it is skipped unread.
MAX_LINE_BYTES = 1 << 16

Record = Dict[str, Any]
#: What the readers of a log (the verdict) need of a record: a read-only mapping (a dict or a column view).
RecordLike = Mapping[str, Any]
_R = TypeVar("_R", bound=RecordLike)


class MemlogError(InputError):
    """The log cannot be read at all (missing, not a regular file, no memlog records): one line for the user."""


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def make_record(step: int, run: str, **values: Any) -> Record:
    """A schema-complete record: known keys only, numbers normalised, non-finite floats as ``None``.

    >>> r = make_record(3, "abc", loss=float("nan"), allocated_bytes=1024.0, device="cpu")
    >>> r["schema"], r["step"], r["loss"], r["allocated_bytes"], r["reserved_bytes"]
    ('npudoctor.memlog/2', 3, None, 1024, None)
    """
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise TypeError(f"not {SCHEMA} keys: {', '.join(sorted(unknown))}")
    record: Record = dict.fromkeys(FIELDS)
    record.update(schema=SCHEMA, run=str(run), step=int(step))
    record["time_unix_s"] = time.time()
    for key, value in values.items():
        record[key] = _normalise(key, value)
    return record


def _normalise(key: str, value: Any) -> Any:
    if value is None:
        return None
    if key in _INT_FIELDS:
        return int(value)
    if key in _FLOAT_FIELDS:
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def check_appendable(path: str) -> None:
    """Append only to nothing, an empty file, or a memlog log (/1 or /2): never to a FIFO or device (it would block or
    vanish) nor to someone's other file (it would be spoiled)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise MemlogError(f"{path}: cannot open ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        raise MemlogError(f"{path}: a symbolic link (not followed; nothing is written through a link)")
    if not stat.S_ISREG(info.st_mode):
        raise MemlogError(f"{path}: not a regular file")
    if info.st_size == 0:
        return
    with _open_regular(path) as handle:
        first = handle.readline(MAX_LINE_BYTES + 1)
    if parse_line(first) is None:
        raise MemlogError(f"{path}: exists and is not a npudoctor.memlog log; choose another file "
                          "(nothing was written)")


class MemlogWriter:
    """Appends one flushed JSON line per record; never truncates an existing log.

    Use as a context manager, or call :meth:`close`. ``path`` may already hold earlier runs: each run's lines
    carry its own ``run`` id so readers can tell them apart.
    """

    def __init__(self, path: os.PathLike[str] | str, run: Optional[str] = None) -> None:
        self.path = os.fspath(path)
        self.run = run or new_run_id()
        check_appendable(self.path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:  # never through a link, even one made after the check
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            raise MemlogError(f"{self.path}: cannot open ({exc.strerror or exc})") from None
        self._file: Optional[IO[str]] = os.fdopen(fd, "a", encoding="utf-8")

    def write(self, step: int, **values: Any) -> Record:
        """Build a record for ``step`` and append it; returns the record written."""
        record = make_record(step, self.run, **values)
        self.write_record(record)
        return record

    def write_record(self, record: Mapping[str, Any]) -> None:
        if self._file is None:
            raise ValueError("memlog writer is closed")
        self._file.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> MemlogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_line(line: bytes | str) -> Optional[Record]:
    """One record from one line, or ``None`` for anything that is not a memlog/1 or /2 step record.

    >>> parse_line('{"schema":"npudoctor.memlog/1","run":"r","step":2,"allocated_bytes":5}')["step"]
    2
    >>> parse_line('{"schema":"other/1","step":2}') is None, parse_line('{"schema":"npudoc') is None
    (True, True)
    """
    if isinstance(line, bytes):
        if len(line) > MAX_LINE_BYTES:
            return None
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        obj = jsondoc.loads(line, "memlog line", max_depth=MAX_RECORD_DEPTH)
    except jsondoc.JsonDocumentError:
        return None
    if not isinstance(obj, dict) or obj.get("schema") not in READABLE_SCHEMAS:
        return None
    step = obj.get("step")
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        return None
    record: Record = dict.fromkeys(FIELDS)
    for key in FIELDS:
        value = obj.get(key)
        if value is None or key in ("schema", "step"):
            continue
        if key in _INT_FIELDS or key in _FLOAT_FIELDS:
            if type(value) not in (int, float):
                return None  # a string, list or object where a number belongs
            if value != value:
                continue  # nan (a writer with allow_nan): unknown, as the schema says
            if key in _INT_FIELDS:
                if not 0 <= value <= MAX_COUNT:
                    return None
            elif not -MAX_COUNT <= value <= MAX_COUNT:
                if type(value) is int:
                    return None  # a 4000-digit integer is no time or loss
                continue  # inf or 1e308 seconds or loss: unknown
        elif key in _TEXT_FIELDS and (type(value) is not str or len(value) > MAX_TEXT_CHARS):
            return None
        record[key] = value
    record["schema"], record["step"] = obj["schema"], step  # as written: a /1 log says less than a /2
    record["cpu_fallbacks"] = _fallbacks(obj.get("cpu_fallbacks"))
    record["pids"] = _pids(obj.get("pids"))
    return record


def _pids(value: Any) -> Optional[List[int]]:
    """``pids`` as written, or None when it is absent or not a short list of process ids (never trusted).

    >>> _pids([4242, 4243]), _pids([4242, "x"]), _pids([0]), _pids(4242), _pids([True])
    ([4242, 4243], None, None, None, None)
    """
    if not isinstance(value, list) or not 0 < len(value) <= MAX_PIDS:
        return None
    if not all(type(pid) is int and 0 < pid <= MAX_PID for pid in value):
        return None
    return list(value)


def _fallbacks(value: Any) -> Optional[List[Dict[str, Any]]]:
    """``cpu_fallbacks`` as written, or None when it is absent or not that shape (a reader never trusts it).

    >>> _fallbacks([{"op": "aten::isin.Tensor_Tensor_out", "first_step": 3, "count": 1}, {"op": 5}])
    [{'op': 'aten::isin.Tensor_Tensor_out', 'first_step': 3, 'count': 1}]
    """
    if not isinstance(value, list):
        return None
    kept = []
    for entry in value[:64]:
        if not isinstance(entry, dict) or not isinstance(entry.get("op"), str):
            continue
        numbers = [entry.get("first_step"), entry.get("count")]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
            continue
        kept.append({"op": entry["op"][:200], "first_step": numbers[0], "count": numbers[1]})
    return kept


def _open_regular(path: os.PathLike[str] | str) -> IO[bytes]:
    """Open ``path`` for reading only if it is a regular file (a FIFO or a device would hang or never end)."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_NOFOLLOW", 0))  # never through a link (to /proc/self/pagemap, elsewhere)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MemlogError(f"{name}: {NAMED_LINK}") from None
        raise MemlogError(f"{name}: cannot open ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MemlogError(f"{name}: not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


#: The part of a long log the readers judge: the verdict thins a run to 256 points anyway, and the last 64 MiB
#: hold ~100,000 steps of the last run.
TAIL_BYTES = 64 << 20
#: How far before the end a reader looks for the last complete line (a torn last line longer than the tail
#: would otherwise leave no record in it).
MAX_LAST_LINE_SCAN = 256 << 20


def read_records(path: os.PathLike[str] | str, max_bytes: Optional[int] = None,
                 max_records: Optional[int] = None) -> List[Record]:
    """Every memlog record (/1 or /2) in ``path``, in file order; torn and foreign lines are skipped.

    ``max_bytes`` reads only the last that many bytes of complete lines of a huge log (its first, partial line
    is dropped). ``max_records`` thins what is kept to between ``max_records`` and twice that, evenly spaced
    (the last record is always kept), so a plot of any log costs the same memory. The file is read up to the
    size it had when opened: a ``/proc`` file that says 0 bytes is empty, however much it would give.
    Raises :class:`MemlogError` when the file cannot be read or holds no record at all.
    """
    records: List[Record] = []
    stride, last = 1, None
    for seen, record in enumerate(_iter_records(path, max_bytes)):
        last = record
        if seen % stride == 0:
            records.append(record)
            if max_records is not None and len(records) >= 2 * max_records:
                records, stride = records[::2], stride * 2
    if last is None:
        raise MemlogError(f"{os.fspath(path)}: no npudoctor.memlog/1 or /2 records")
    if records[-1] is not last:
        records.append(last)
    return records


def read_columns(path: os.PathLike[str] | str, fields: Iterable[str], max_bytes: Optional[int] = None
                 ) -> RecordColumns:
    """Every record of ``path`` as :func:`read_records` reads it, holding only ``fields`` of each, as columns
    (8 bytes a number, 4 a text): what a reader that needs every record but few keys keeps (the leak verdict
    of a 64 MiB tail held 165 MiB of dicts). Raises :class:`MemlogError` as :func:`read_records` does."""
    columns = RecordColumns(fields)
    for record in _iter_records(path, max_bytes):
        columns.append(record)
    if not columns:
        raise MemlogError(f"{os.fspath(path)}: no npudoctor.memlog/1 or /2 records")
    return columns


def _iter_records(path: os.PathLike[str] | str, max_bytes: Optional[int]) -> Iterator[Record]:
    with _open_regular(path) as handle:
        end = os.fstat(handle.fileno()).st_size
        start = 0
        if max_bytes is not None and end > max_bytes:
            end = _end_of_last_line(handle, end)
            start = max(0, end - max_bytes)
            if start:
                handle.seek(start - 1)
                start -= 1  # the byte before the window tells whether it starts on a line
        handle.seek(start)
        for line in _lines(handle, end - start, partial_first=start > 0):
            record = parse_line(line)
            if record is not None:
                yield record


_MISSING = float("nan")


class RecordColumns(Sequence[RecordLike]):
    """Records held as columns of a few fields; item ``i`` is a read-only mapping of record ``i``'s fields.

    Counters and byte counts are kept as int64 exactly as written (a float one, which the schema allows, in a
    side table), other numbers as doubles; texts (run, device, schema) as indices into a table of the distinct
    ones: 8 bytes a number, 4 a text, and every value reads back as the record held it. A field not asked for
    raises KeyError, reads as ``None`` through ``get``.
    """

    def __init__(self, fields: Iterable[str]) -> None:
        self.fields: Tuple[str, ...] = tuple(dict.fromkeys(fields))
        numeric = [k for k in self.fields if k not in _TEXT_KEYS]
        self._counts: Dict[str, array] = {k: array("q") for k in numeric if k in _INT_FIELDS}
        self._uncounted: Dict[str, Dict[int, Any]] = {k: {} for k in self._counts}  # index -> a float value
        self._numbers: Dict[str, array] = {k: array("d") for k in numeric if k not in _INT_FIELDS}
        self._texts: Dict[str, array] = {k: array("I") for k in self.fields if k in _TEXT_KEYS}
        self._table: List[Optional[str]] = [None]
        self._index: Dict[Optional[str], int] = {None: 0}
        self._length = 0
        # key -> the function that reads record i's value (one call per read: the verdict reads ~15 per record)
        self.readers: Dict[str, Callable[[int], Any]] = {
            **{k: _count_reader(v, self._uncounted[k]) for k, v in self._counts.items()},
            **{k: _number_reader(v) for k, v in self._numbers.items()},
            **{k: _text_reader(v, self._table) for k, v in self._texts.items()}}

    def append(self, record: RecordLike) -> None:
        for key, counts in self._counts.items():
            value = record.get(key)
            if value is None:
                counts.append(_NO_COUNT)
            elif type(value) is int and 0 <= value <= MAX_COUNT:
                counts.append(value)
            else:  # a float (or anything else a caller's record holds): kept as it is, aside
                counts.append(_OTHER_VALUE)
                self._uncounted[key][self._length] = value
        for key, numbers in self._numbers.items():
            value = record.get(key)
            numbers.append(_MISSING if value is None else float(value))
        for key, texts in self._texts.items():
            text = record.get(key)
            index = self._index.get(text)
            if index is None:
                index = self._index[text] = len(self._table)
                self._table.append(text)
            texts.append(index)
        self._length += 1

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> RecordLike: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RecordLike]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [ColumnRecord(self, i) for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("record index out of range")
        return ColumnRecord(self, index)


_TEXT_KEYS = _TEXT_FIELDS | {"schema"}


_NO_COUNT, _OTHER_VALUE = -1, -2  # a counter column's marks: no value; a value kept aside (a float)


def _count_reader(counts: array, aside: Dict[int, Any]) -> Callable[[int], Any]:
    def read(index: int) -> Any:
        count = counts[index]
        if count >= 0:
            return count
        return None if count == _NO_COUNT else aside[index]

    return read


def _number_reader(numbers: array) -> Callable[[int], Any]:
    def read(index: int) -> Any:
        number = numbers[index]
        return None if number != number else number

    return read


def _text_reader(indices: array, table: List[Optional[str]]) -> Callable[[int], Any]:
    return lambda index: table[indices[index]]


class ColumnRecord(Mapping[str, Any]):
    """One record of a :class:`RecordColumns`, read from its columns when asked (holds no values itself)."""

    __slots__ = ("_columns", "_index")

    def __init__(self, columns: RecordColumns, index: int) -> None:
        self._columns = columns
        self._index = index

    def __getitem__(self, key: str) -> Any:
        return self._columns.readers[key](self._index)  # KeyError for a field not kept

    def get(self, key: str, default: Any = None) -> Any:
        reader = self._columns.readers.get(key)
        return default if reader is None else reader(self._index)

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns.fields)

    def __len__(self) -> int:
        return len(self._columns.fields)


def _end_of_last_line(handle: IO[bytes], size: int) -> int:
    """The offset just after the last newline of the file (``size`` when none is found close enough)."""
    chunk = 1 << 20
    position = size
    while position > 0 and size - position < MAX_LAST_LINE_SCAN:
        begin = max(0, position - chunk)
        handle.seek(begin)
        found = handle.read(position - begin).rfind(b"\n")
        if found >= 0:
            return begin + found + 1
        position = begin
    return size


def _lines(handle: IO[bytes], budget: Optional[int] = None, partial_first: bool = False) -> Iterator[bytes]:
    """Complete lines only, from at most ``budget`` bytes; over-long lines are skipped without being held in
    memory, and so is the first line when ``partial_first`` (the byte read first ends the line before)."""
    remaining = float("inf") if budget is None else budget
    skipping = partial_first
    while remaining > 0:
        line = handle.readline(int(min(MAX_LINE_BYTES + 1, remaining)))
        if not line:
            return
        remaining -= len(line)
        if skipping or len(line) > MAX_LINE_BYTES:
            skipping = not line.endswith(b"\n")  # the rest of an over-long or partial line
            continue
        yield line  # a last line without its newline too: parse_line tells a torn one from a whole one


def last_run(records: Sequence[_R]) -> List[_R]:
    """The records of the last run in a log that several runs appended to."""
    if not records:
        return []
    run = records[-1].get("run")
    return [r for r in records if r.get("run") == run]


class MemlogTail:
    """Follows a growing log without blocking: each :meth:`poll` returns the records appended since.

    A line still being written (no newline yet) is kept until it is complete; a file that was truncated or
    replaced is read again from its start.
    """

    def __init__(self, path: os.PathLike[str] | str, from_start: bool = True) -> None:
        self.path = os.fspath(path)
        self._offset = 0
        self._inode: Optional[int] = None
        self._partial = b""
        if not from_start:
            try:
                info = os.stat(self.path)
                self._offset, self._inode = info.st_size, info.st_ino
            except OSError:
                pass

    def poll(self, max_bytes: int = 1 << 24) -> List[Record]:
        try:
            handle = _open_regular(self.path)
        except MemlogError:
            return []  # not there yet, or gone for a moment: the next poll tries again
        with handle:
            info = os.fstat(handle.fileno())
            if info.st_ino != self._inode or info.st_size < self._offset:
                self._offset, self._partial, self._inode = 0, b"", info.st_ino
            handle.seek(self._offset)
            # Up to the size it says it has: a /proc file (size 0) would give bytes without end.
            chunk = handle.read(min(max_bytes, info.st_size - self._offset))
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # unterminated tail (empty when the chunk ended on a newline)
        if len(self._partial) > MAX_LINE_BYTES:
            self._partial = b""
        return [r for r in map(parse_line, lines) if r is not None]


def follow(path: os.PathLike[str] | str, interval_s: float = 0.5,
           stop_after_idle_s: Optional[float] = None) -> Iterator[Record]:
    """Yield records as they are appended (like ``tail -f``); stop after ``stop_after_idle_s`` of silence."""
    tail = MemlogTail(path)
    idle = 0.0
    while True:
        records = tail.poll()
        yield from records
        if records:
            idle = 0.0
        elif stop_after_idle_s is not None and idle >= stop_after_idle_s:
            return
        else:
            time.sleep(interval_s)
            idle += interval_s
