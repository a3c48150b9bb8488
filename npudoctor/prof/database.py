"""Reading profiling ``.db`` exports with the standard library's sqlite3, as untrusted input.

torch_npu's profiler with ``export_type=db`` writes ``ascend_pytorch_profiler[_<rank>].db`` and ``analysis.db``,
MindSpore ``ascend_mindspore_profiler[_<rank>].db``, msprof ``msprof_<timestamp>.db``. Table and column names
are data (``checks/prof_columns/db.yaml``); what is read becomes the same grouped kernel table, step trace,
memory peaks and link records the CSV readers make, so the PROF checks do not know which one they judge.

A file is opened read-only and immutable (``file:...?mode=ro&immutable=1``: SQLite writes nothing, takes no
lock and ignores any journal), with extension loading off, a size cap, a value-length limit, an authorizer
that allows reads of the mapped tables only, and a deadline on every query. A file that is not SQLite, is
encrypted or corrupt, carries views, triggers or virtual tables, has a WAL or journal beside it, or is too big
is refused with one line (:class:`~npudoctor.prof.tables.TableError`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
import time
import urllib.parse
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from npudoctor.prof.tables import TableError, check_regular_file

SCHEMA = "npudoctor.prof_db/1"
MAX_DB_BYTES = 8 << 30
QUERY_SECONDS = 300.0
MAX_VALUE_BYTES = 1 << 20          # the longest string or blob a query may produce
MAX_EVENT_ROWS = 2_000_000         # raw event rows read for one timeline question (more: counted, not kept)
SQLITE_MAGIC = b"SQLite format 3\x00"
BESIDE = ("-wal", "-journal", "-shm")
NS_PER_US = 1000.0
BYTES_PER_MB = 1024.0 * 1024.0
NULL_INT = -(1 << 63)              # what an empty, text or blob cell of an integer column reads as
INT, DIM, REAL = "int", "dim", "real"  # how :meth:`ProfileDb.columns` returns a value
CHUNK_ROWS = 40_000                # rowids per query of :meth:`ProfileDb.columns`: 21 bytes a value stays < 1 MiB
MAX_ROWID = (1 << 63) - 1
MAX_REAL = 1e21                    # larger REAL cells (+-1e308, inf) are no measurement: read as unknown (NaN)
# CHUNK_ROWS rows that span more than SPREAD_FACTOR times as many rowids are spread out.
SPREAD_FACTOR = 8


class DbTable(NamedTuple):
    name: str                       # the table's own name in the file
    columns: Mapping[str, str]      # canonical -> the file's column name


class DbMap(NamedTuple):
    version: int
    profiler_files: Tuple[Any, ...]  # compiled patterns
    analysis_files: Tuple[Any, ...]
    tables: Mapping[str, Tuple[Tuple[str, ...], Mapping[str, Tuple[str, ...]]]]
    pmu_metrics: Mapping[str, Tuple[str, ...]] = {}  # canonical pipe time -> TASK_PMU_INFO metric names


@functools.lru_cache(maxsize=1)
def db_map() -> DbMap:
    """The shipped map of table and column names (``checks/prof_columns/db.yaml``)."""
    from npudoctor.knowledge import KnowledgeError, load

    data: Any = load("prof_columns/db")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("tables"), dict):
        raise KnowledgeError(f"checks/prof_columns/db.yaml: expected schema {SCHEMA} with a tables mapping")
    files = data.get("files") or {}
    tables = {}
    for canonical, spec in data["tables"].items():
        columns = {str(k): tuple(str(s) for s in v) for k, v in (spec.get("columns") or {}).items()}
        tables[str(canonical)] = (tuple(str(n) for n in spec.get("names", [canonical])), columns)
    return DbMap(version=int(data.get("version", 1)),
                 profiler_files=tuple(re.compile(p) for p in files.get("profiler", [])),
                 analysis_files=tuple(re.compile(p) for p in files.get("analysis", [])), tables=tables,
                 pmu_metrics={str(k): tuple(str(n) for n in v) for k, v in (data.get("pmu_metrics") or {}).items()})


def kind_of(file_name: str) -> Optional[str]:
    """``"profiler"`` or ``"analysis"`` for a .db file name the profilers write, else None."""
    mapping = db_map()
    if any(p.match(file_name) for p in mapping.profiler_files):
        return "profiler"
    if any(p.match(file_name) for p in mapping.analysis_files):
        return "analysis"
    return None


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


class ProfileDb:
    """One .db file opened for reading under the guards above; use as a context manager."""

    def __init__(self, path: str, deadline_s: Optional[float] = None) -> None:
        self.path = path
        self.deadline_s = QUERY_SECONDS if deadline_s is None else deadline_s
        self._deadline = 0.0
        self.tables: Dict[str, DbTable] = {}
        self._readable: frozenset = frozenset()
        self.conn = self._open()

    def __enter__(self) -> ProfileDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()

    def _fail(self, reason: str) -> TableError:
        return TableError(f"{self.path}: {reason}")

    def _open(self) -> sqlite3.Connection:
        size = check_regular_file(self.path)
        if size > MAX_DB_BYTES:
            raise self._fail(f"larger than {MAX_DB_BYTES >> 30} GiB, not read")
        try:
            with open(self.path, "rb") as handle:
                head = handle.read(len(SQLITE_MAGIC))
        except OSError as exc:
            raise self._fail(exc.strerror or str(exc)) from None
        if head != SQLITE_MAGIC:
            raise self._fail("not an SQLite database (encrypted, truncated or another format)")
        for suffix in BESIDE:
            if os.path.lexists(self.path + suffix):
                raise self._fail(f"a {suffix[1:]} file lies beside it (the database is still being written, "
                                 "or was copied without it): not read")
        uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro&immutable=1"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._fail(_one_line(exc)) from None
        conn.text_factory = _text  # a corrupt or GBK string is replaced, never an exception
        try:
            if hasattr(conn, "enable_load_extension"):
                conn.enable_load_extension(False)
            limit = getattr(sqlite3, "SQLITE_LIMIT_LENGTH", None)
            if limit is not None and hasattr(conn, "setlimit"):
                conn.setlimit(limit, MAX_VALUE_BYTES)
            conn.execute("PRAGMA query_only = ON")
            conn.execute("PRAGMA trusted_schema = OFF")
            # Helper threads for the sorter (the ORDER BY of host events) and a 16 MiB page cache (the column
            # reads touch each page once: 64 MiB only held 48 MiB more).
            conn.execute(f"PRAGMA threads = {max(1, min(4, os.cpu_count() or 1))}")
            conn.execute("PRAGMA cache_size = -16384")
            conn.set_progress_handler(self._over_time, 100_000)
            self._deadline = time.monotonic() + self.deadline_s
            objects = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
            self._check_schema(objects)
            self._map_tables(conn, {str(name) for kind, name, _ in objects if kind == "table"})
            self._readable = frozenset(t.name.lower() for t in self.tables.values())
            conn.set_authorizer(self._authorize)
        except sqlite3.Error as exc:
            conn.close()
            raise self._fail(_one_line(exc)) from None
        except UnicodeDecodeError:  # SQLite's message quoted bytes of a corrupt schema
            conn.close()
            raise self._fail("corrupt SQLite database (schema not readable)") from None
        except TableError:
            conn.close()
            raise
        return conn

    def _check_schema(self, objects: Sequence[Tuple[Any, Any, Any]]) -> None:
        for kind, name, sql in objects:
            if kind in ("view", "trigger"):
                raise self._fail(f"holds a {kind} ({str(name)[:60]!r}): a profiler export has none; not read")
            if kind == "table" and re.match(r"\s*create\s+virtual\s", str(sql or ""), re.IGNORECASE):
                raise self._fail(f"holds a virtual table ({str(name)[:60]!r}): not read")
            if kind == "table" and re.search(r"\bwithout\s+rowid\s*$", str(sql or ""), re.IGNORECASE):
                raise self._fail(f"holds a WITHOUT ROWID table ({str(name)[:60]!r}): a profiler export has none; "
                                 "not read")

    def _map_tables(self, conn: sqlite3.Connection, present: set) -> None:
        by_key = {name.lower(): name for name in present}
        for canonical, (names, columns) in db_map().tables.items():
            real = next((by_key[n.lower()] for n in names if n.lower() in by_key), None)
            if real is None:
                continue
            have = {str(row[1]).lower(): str(row[1])
                    for row in conn.execute(f"PRAGMA table_info({_quote(real)})").fetchall()}
            found = {}
            for column, spellings in columns.items():
                match = next((have[s.lower()] for s in spellings if s.lower() in have), None)
                if match is not None:
                    found[column] = match
            self.tables[canonical] = DbTable(real, found)

    def _over_time(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def _authorize(self, action: int, arg1: Any, arg2: Any, db_name: Any, trigger: Any) -> int:
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ and trigger is None and str(arg1).lower() in self._readable:
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY


    def has(self, table: str, *columns: str) -> bool:
        found = self.tables.get(table)
        return found is not None and all(c in found.columns for c in columns)

    def name(self, table: str) -> str:
        return _quote(self.tables[table].name)

    def col(self, table: str, column: str, alias: str = "") -> str:
        real = _quote(self.tables[table].columns[column])
        return f"{alias}.{real}" if alias else real

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """SQLite's errors as one-line TableErrors (the deadline's interrupt named as such)."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "interrupt" in str(exc).lower():
                raise self._fail(f"a query ran past {self.deadline_s:g} s: not read") from None
            raise self._fail(_one_line(exc)) from None
        except sqlite3.Error as exc:
            raise self._fail(_one_line(exc)) from None
        except UnicodeDecodeError:
            raise self._fail("corrupt SQLite database (a message or name not readable)") from None

    def rows(self, sql: str, params: Sequence[Any] = (), limit: int = MAX_EVENT_ROWS, batch: int = 65_536
             ) -> Iterator[Tuple[Any, ...]]:
        """The rows of one query, at most ``limit``, fetched ``batch`` at a time; the query is stopped at the
        deadline (one-line error)."""
        self._deadline = time.monotonic() + self.deadline_s
        with self._reading():
            cursor = self.conn.execute(sql, params)
            taken = 0
            while taken < limit:
                fetched = cursor.fetchmany(min(batch, limit - taken))
                if not fetched:
                    return
                taken += len(fetched)
                yield from fetched

    def columns(self, table: str, values: Sequence[Tuple[str, str]], where: str = "",
                params: Sequence[Any] = (), group_by: str = "") -> Iterator[List[Any]]:
        """numpy arrays of the expressions ``values`` (SQL over ``t``, the table's rows; each INT, DIM or REAL)
        for the rows matching ``where`` (``params`` bind the ?s of values, then of where), one window of
        CHUNK_ROWS rowids at a time, in rowid order. Each column of a window comes back as one comma-joined
        text (group_concat) that numpy parses: no Python object per cell (a tuple per row was 5-10x slower).
        An empty cell reads as NULL_INT (INT, DIM) or NaN (REAL); a text cell as its leading number (INT) or
        empty (DIM, REAL). A window never holds more than CHUNK_ROWS rows (rowids are unique), so no text
        passes the value limit; a window ends CHUNK_ROWS rows on, however far apart their rowids. One deadline
        for the read.
        ``group_by``: the values are aggregates of the window's rows grouped on it (one row per group).
        """
        import warnings

        import numpy as np

        wraps = {INT: f"ifnull(CAST(({{0}}) AS INTEGER), {NULL_INT})",  # text: its leading number, else 0
                 DIM: f"ifnull(CASE WHEN typeof({{0}}) IN ('integer', 'real') THEN CAST({{0}} AS INTEGER) END, "
                      f"{NULL_INT})",  # text reads as empty (twice the time of INT: only where text means unknown)
                 REAL: "ifnull(CASE WHEN typeof({0}) IN ('integer', 'real') THEN CAST({0} AS REAL) END, 'nan')"}
        name = self.name(table)
        rows = f"FROM {name} AS t WHERE ({where or '1'}) AND t.rowid BETWEEN ? AND ?"  # the window binds last
        if group_by:
            chosen = ", ".join(f"({expression}) AS v{i}" for i, (expression, _) in enumerate(values))
            joined = ", ".join(f"group_concat({wraps[kind].format(f'v{i}')})" for i, (_, kind) in enumerate(values))
            window = f"SELECT count(*), {joined} FROM (SELECT {chosen} {rows} GROUP BY {group_by})"
        else:
            joined = ", ".join(f"group_concat({wraps[kind].format(expression)})" for expression, kind in values)
            window = f"SELECT count(*), {joined} {rows}"
        seek = f"SELECT min(rowid) FROM {name} WHERE rowid >= ?"
        # Where rowids lie far apart (rows deleted), a window of CHUNK_ROWS rowids holds a row or two: once a
        # seek skips an empty stretch, a window ends CHUNK_ROWS rows on instead, found by a walk of the rowid
        # b-tree (a window per row took minutes). Dense rowids keep the plain window and its one seek.
        spread_end = f"SELECT max(r) FROM (SELECT rowid AS r FROM {name} WHERE rowid >= ? ORDER BY rowid " \
                     f"LIMIT {CHUNK_ROWS})"
        spread = False
        kinds = [np.float64 if kind == REAL else np.int64 for _, kind in values]
        self._deadline = time.monotonic() + self.deadline_s
        cursor = NULL_INT
        while True:
            with self._reading():
                found = self.conn.execute(spread_end if spread else seek, [cursor]).fetchone()
                if found is None or not isinstance(found[0], int):
                    return
                if spread:
                    first, last = cursor, found[0]
                    spread = last - first >= SPREAD_FACTOR * CHUNK_ROWS  # back to plain windows where dense
                else:
                    first, last = found[0], min(found[0] + CHUNK_ROWS - 1, MAX_ROWID)
                    spread = cursor != NULL_INT and first - cursor >= CHUNK_ROWS
                row = self.conn.execute(window, [*params, first, last]).fetchone()
            if row is not None and row[0]:
                yield self._parsed(table, row, kinds, np, warnings)
            if last == MAX_ROWID:
                return
            cursor = last + 1

    def _parsed(self, table: str, row: Sequence[Any], kinds: Sequence[Any], np: Any, warnings: Any) -> List[Any]:
        count = int(row[0])
        arrays = []
        for text, dtype in zip(row[1:], kinds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    array = np.fromstring(str(text or ""), dtype=dtype, sep=",")
                except ValueError:
                    array = None
            if array is None or len(array) != count:
                raise self._fail(f"{self.tables[table].name}: a column did not read back as numbers")
            if dtype is np.float64 and len(array):
                # No measure of a profile comes near 1e21 (ns since 1970 are 1.7e18): a value beyond is no
                # measurement (+-1e308, inf) and reads as unknown, before any product or sum overflows
                array[~(np.abs(array) <= MAX_REAL)] = np.nan
            arrays.append(array)
        return arrays

    def strings(self) -> str:
        """A join target for string ids: ``LEFT JOIN <strings> AS x ON x.id = ...``."""
        return self.name("string_ids")

    def text(self, table: str, column: str, alias: str, join_alias: str) -> Tuple[str, str]:
        """(select expression, join clause) giving ``table.column`` as text through STRING_IDS when it is an id."""
        if not self.has("string_ids", "id", "value"):
            return f"CAST({self.col(table, column, alias)} AS TEXT)", ""
        join = (f" LEFT JOIN {self.strings()} AS {join_alias} ON {join_alias}.{self.col('string_ids', 'id')} = "
                f"{self.col(table, column, alias)}")
        return f"COALESCE({join_alias}.{self.col('string_ids', 'value')}, '')", join


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    reason = text[0] if text else type(exc).__name__
    if "not a database" in reason or "encrypted" in reason:
        return "not an SQLite database (encrypted or another format)"
    if "malformed" in reason:
        return "corrupt SQLite database (disk image is malformed)"
    return reason[:200]


# --- what the checks read ---------------------------------------------------------------------------------

TASKS_PER_PASS = 2_000_000  # tasks held at once (24 bytes each); a bigger TASK table is read in passes by id
MAX_PASSES = 16
GROUP_BATCH_ROWS = 1 << 16  # joined compute tasks grouped at once


def string_ids(db: ProfileDb, values: Sequence[str]) -> Dict[str, List[int]]:
    """The STRING_IDS ids of ``values`` (matched ignoring case), value -> ids."""
    if not values or not db.has("string_ids", "id", "value"):
        return {}
    wanted = {v.lower(): v for v in values}
    marks = ",".join("?" * len(wanted))
    out: Dict[str, List[int]] = {}
    for sid, value in db.rows(f"SELECT {db.col('string_ids', 'id')}, {db.col('string_ids', 'value')} FROM "
                              f"{db.strings()} WHERE lower({db.col('string_ids', 'value')}) IN ({marks})",
                              list(wanted), limit=100_000):
        out.setdefault(wanted[str(value).lower()], []).append(int(sid))
    return out


def strings_of(db: ProfileDb, ids: Iterable[Any]) -> Dict[Any, str]:
    """id -> text for the ids asked (the few a grouped query returns); non-ids stand for themselves."""
    numbers = sorted({i for i in ids if isinstance(i, int)})
    out: Dict[Any, str] = {}
    if numbers and db.has("string_ids", "id", "value"):
        for first in range(0, len(numbers), 500):
            part = numbers[first:first + 500]
            sql = (f"SELECT {db.col('string_ids', 'id')}, {db.col('string_ids', 'value')} FROM {db.strings()} "
                   f"WHERE {db.col('string_ids', 'id')} IN ({','.join('?' * len(part))})")
            out.update({row[0]: str(row[1] if row[1] is not None else "") for row in db.rows(sql, part)})
    return out


class Steps(NamedTuple):
    """STEP_TIME sorted by start: a task belongs to the step whose span holds its start."""

    starts: Any
    ends: Any
    ids: Any

    def of(self, times: Any) -> Any:
        """The step id of each time (float; -1.0 outside every step or for an empty time)."""
        import numpy as np

        if not len(self.starts):
            return np.full(len(times), -1.0)
        at = np.searchsorted(self.starts, times, side="right") - 1
        inside = (at >= 0) & (times != NULL_INT)
        clipped = np.clip(at, 0, None)
        inside &= times <= self.ends[clipped]
        return np.where(inside, self.ids[clipped], -1.0)

    @property
    def base(self) -> int:
        """A time the reads subtract from start times (shorter numbers to pass and parse): the first step's."""
        return int(self.starts[0]) if len(self.starts) else 0

    def relative(self) -> Steps:
        return Steps(self.starts - self.base, self.ends - self.base, self.ids)


def _steps(db: ProfileDb) -> Steps:
    import numpy as np

    found: List[Tuple[float, int, int]] = []
    if db.has("step_time", "id", "start_ns", "end_ns"):
        sql = (f"SELECT {db.col('step_time', 'id')}, {db.col('step_time', 'start_ns')}, "
               f"{db.col('step_time', 'end_ns')} FROM {db.name('step_time')}")
        found = sorted(((float(i), a, b) for i, a, b in db.rows(sql, limit=100_000)
                        if isinstance(i, (int, float)) and isinstance(a, int) and isinstance(b, int)),
                       key=lambda step: step[1])
    return Steps(starts=np.array([a for _, a, _ in found], dtype=np.int64),
                 ends=np.array([b for _, _, b in found], dtype=np.int64),
                 ids=np.array([i for i, _, _ in found], dtype=np.float64))


class Tasks(NamedTuple):
    """The TASK rows of one pass, sorted by globalTaskId."""

    gid: Any
    dur_us: Any
    step: Any
    device: Any

    def find(self, wanted: Any) -> Tuple[Any, Any]:
        """(index, found) of each wanted globalTaskId among these tasks."""
        import numpy as np

        at = np.clip(np.searchsorted(self.gid, wanted), 0, max(len(self.gid) - 1, 0))
        found = (self.gid[at] == wanted) if len(self.gid) else np.zeros(len(wanted), dtype=bool)
        return at, found & (wanted != NULL_INT)


def _passes(db: ProfileDb) -> List[Tuple[int, int]]:
    """(modulus, remainder) of globalTaskId per pass; one pass (1, 0) unless TASK is bigger than a pass holds."""
    bounds = [next(iter(db.rows(f"SELECT {end}(rowid) FROM {db.name('task')}")), (None,))[0]
              for end in ("min", "max")]  # two queries: each one seek (together they scan the table)
    span = bounds[1] - bounds[0] + 1 if all(isinstance(b, int) for b in bounds) else 0
    if span > TASKS_PER_PASS:  # rowids far apart (rows deleted, or set so) are no rows: count what is there
        counted = next(iter(db.rows(f"SELECT count(*) FROM {db.name('task')}")), (0,))[0]
        span = min(span, counted if isinstance(counted, int) else span)
    count = min(MAX_PASSES, max(1, -(-span // TASKS_PER_PASS)))
    return [(count, remainder) for remainder in range(count)]


def _in_pass(column: str, part: Tuple[int, int]) -> str:
    modulus, remainder = part
    return "" if modulus == 1 else f"(({column} % {modulus}) + {modulus}) % {modulus} = {remainder}"


def _tasks(db: ProfileDb, part: Tuple[int, int], steps: Steps) -> Tasks:
    import numpy as np

    gid, start = db.col("task", "global_task_id", "t"), db.col("task", "start_ns", "t")
    device = db.col("task", "device_id", "t") if db.has("task", "device_id") else "NULL"
    relative = steps.relative()
    chunks = []
    for ids, duration, starts, devices in db.columns(
            "task", [(gid, INT), (f"{db.col('task', 'end_ns', 't')} - {start}", INT),
                     (f"{start} - {steps.base}", INT), (device, INT)], _in_pass(gid, part)):
        # Reduced per window (the start times go at once): the whole pass holds 24 bytes a task.
        chunks.append([ids, np.where(duration == NULL_INT, 0.0, duration / NS_PER_US),
                       relative.of(starts).astype(np.float32),
                       devices.clip(-(1 << 31), (1 << 31) - 1).astype(np.int32)])

    def column(index: int, dtype: Any) -> Any:  # one whole column at a time, the chunks' part of it let go
        whole = np.concatenate([c[index] for c in chunks]) if chunks else np.zeros(0, dtype=dtype)
        for c in chunks:
            c[index] = None
        return whole if order is None else whole[order]

    order = None
    ids = column(0, np.int64)
    if len(ids) > 1 and not bool(np.all(ids[1:] >= ids[:-1])):
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
    dur_us = column(1, np.float64)
    step = column(2, np.float32)  # step ids are small whole numbers (exact in float32)
    return Tasks(gid=ids, dur_us=dur_us, step=step, device=column(3, np.int32))


class PmuPlan(NamedTuple):
    ratio_ids: List[int]
    cube_ids: List[int]
    present: List[str]  # canonical ratio names found


def _pmu_plan(db: ProfileDb, ratio_spellings: Mapping[str, Sequence[str]], cube_names: Sequence[str],
              facts: Dict[str, Any]) -> PmuPlan:
    if not db.has("task_pmu_info", "global_task_id", "name", "value"):
        return PmuPlan([], [], [])
    name_col = db.col("task_pmu_info", "name", "p")
    sampled = [row[0] for row in db.rows(f"SELECT DISTINCT name FROM (SELECT {name_col} AS name FROM "
                                         f"{db.name('task_pmu_info')} p LIMIT 200000)", limit=4096)]
    facts["pmu_names"] = sorted(strings_of(db, sampled).values())
    spelled = [n for spellings in ratio_spellings.values() for n in spellings] + list(cube_names)
    ids = string_ids(db, spelled)
    present = {canonical: [i for n in spellings for i in ids.get(n, [])]
               for canonical, spellings in ratio_spellings.items()}
    present = {canonical: found for canonical, found in present.items() if found}
    claimed = {str(v).lower() for v in spelled}
    facts["extra_columns"] = [n for n in facts["pmu_names"] if n.lower() not in claimed]
    return PmuPlan(ratio_ids=sorted({i for found in present.values() for i in found}),
                   cube_ids=sorted({i for n in cube_names for i in ids.get(n, [])}), present=list(present))


def _one_of(column: str, ids: Sequence[int]) -> str:
    """SQL: ``column`` is one of ``ids``. Ids within 62 of each other are tested as a bit mask (opcodes only:
    20-30% less time per TASK_PMU_INFO row than IN, which probes a b-tree per row)."""
    low, high = min(ids), max(ids)
    if high - low <= 62:
        mask = sum(1 << (i - low) for i in set(ids))
        return f"({column} BETWEEN {low} AND {high} AND ({mask} >> ({column} - {low})) & 1)"
    return f"{column} IN ({','.join(map(str, ids))})"


def _pmu(db: ProfileDb, part: Tuple[int, int], tasks: Tasks, plan: PmuPlan, bound_ratio: float
         ) -> Tuple[Any, Any]:
    """Per task: no-bound (1 no pipe ratio above the bar, 0 one is, -1 no ratio) and cube utilization (NaN: none).

    TASK_PMU_INFO holds one row per task and metric (18-28 per task with PipeUtilization): it is read in one
    pass as ``globalTaskId * 2 + (value > bar)`` per ratio row, never pivoted or grouped in SQL.
    """
    import numpy as np

    count = len(tasks.gid)
    nobound = np.full(count, -1, dtype=np.int8)
    cube = np.full(count, np.nan)
    if not (plan.ratio_ids or plan.cube_ids):
        return nobound, cube
    gid, name = db.col("task_pmu_info", "global_task_id", "t"), db.col("task_pmu_info", "name", "t")
    value = db.col("task_pmu_info", "value", "t")
    in_pass = _in_pass(gid, part)
    and_pass = f" AND {in_pass}" if in_pass else ""
    if plan.ratio_ids:
        has, bound = np.zeros(count, dtype=bool), np.zeros(count, dtype=bool)
        # One code per task and window (its rows grouped: 8-9x fewer numbers to pass than one per row); no
        # function call per row (typeof() doubled the time): a text value reads as 0.0 (data, below the bar),
        # a huge or text id as one no task has.
        code = f"{gid} * 2 + max(CAST({value} AS REAL) > ?)"
        where = f"{_one_of(name, plan.ratio_ids)} AND {value} IS NOT NULL{and_pass}"
        for (codes,) in db.columns("task_pmu_info", [(code, INT)], where, [float(bound_ratio)], group_by=gid):
            codes = codes[codes >= 0]
            at, found = tasks.find(codes >> 1)
            has[at[found]] = True
            bound[at[found & ((codes & 1) == 1)]] = True
        nobound = np.where(has, np.where(bound, 0, 1), -1).astype(np.int8)
    if plan.cube_ids:
        where = f"{_one_of(name, plan.cube_ids)} AND typeof({value}) IN ('integer', 'real')" + and_pass
        for ids, values in db.columns("task_pmu_info", [(gid, INT), (value, REAL)], where):
            at, found = tasks.find(ids)
            np.fmax.at(cube, at[found], values[found])
    return nobound, cube


def kernel_groups(db: ProfileDb, min_task_us: float, bound_ratio: float,
                  ratio_spellings: Mapping[str, Sequence[str]], cube_names: Sequence[str]
                  ) -> Tuple[List[Tuple[Any, ...]], Dict[str, Any]]:
    """The compute and communication tasks grouped like :func:`npudoctor.prof.kernels._group_chunk` does.

    Returns (rows of KEYS + n, dur_sum, dur_max, cube_wsum, cube_dur; facts: which columns were there, the
    PMU metric names seen). Durations are microseconds. The needed columns of TASK, COMPUTE_TASK_INFO and
    TASK_PMU_INFO come back whole (:meth:`ProfileDb.columns`), are joined on globalTaskId by sorting and
    grouped by hashing (pandas) on the string ids; the few ids of the groups are turned into text afterwards.
    SQLite's own JOIN ... GROUP BY sorted every joined row and took twice the CSV's time.
    """
    facts: Dict[str, Any] = {"columns": [], "pmu_names": []}
    if not (db.has("task", "start_ns", "end_ns", "global_task_id")
            and db.has("compute_task_info", "global_task_id", "core_type")):
        return [], facts
    import numpy as np

    from npudoctor.prof.kernels import KEYS

    columns = ["core_type", "duration_us", "op_name", "op_type"]
    columns += [c for c in ("op_state", "input_dtypes", "block_dim", "mix_block_dim")
                if db.has("compute_task_info", c)]
    steps = _steps(db)
    if len(steps.starts):
        columns.append("step_id")
    aicpu = np.array([i for ids in string_ids(db, ["AI_CPU", "KERNEL_AICPU"]).values() for i in ids], dtype=np.int64)
    plan = _pmu_plan(db, ratio_spellings, cube_names, facts)
    columns.extend(plan.present)
    if plan.cube_ids:
        columns.append("cube_utilization_pct")

    def cell(column: str) -> str:
        return db.col("compute_task_info", column, "t") if db.has("compute_task_info", column) else "NULL"

    wanted = [(cell(c), DIM if c.endswith("block_dim") else INT)
              for c in ("global_task_id", "core_type", "op_type", "block_dim", "mix_block_dim", "op_state",
                        "input_dtypes", "name", "input_shapes", "output_shapes")]
    operators = _Operators(db, ratio_spellings, steps) if db.has("compute_task_info", "input_shapes") else None
    partial: List[Dict[str, Any]] = []
    for part in _passes(db):
        tasks = _tasks(db, part, steps)
        nobound, cube = _pmu(db, part, tasks, plan, bound_ratio)
        ratios = operators.pmu(part, tasks) if operators is not None else {}
        batch: List[Dict[str, Any]] = []
        for gid, core, op_type, block, mix, state, dtypes, name, in_shapes, out_shapes in db.columns(
                "compute_task_info", wanted, _in_pass(cell("global_task_id"), part)):
            at, found = tasks.find(gid)
            at = at[found]
            duration, utilization = tasks.dur_us[at], cube[at]
            core = core[found]
            if operators is not None:
                operators.add({"device": tasks.device[at], "core": core, "op_type": op_type[found],
                               "op_name": name[found], "input_shapes": in_shapes[found],
                               "output_shapes": out_shapes[found], "input_dtypes": dtypes[found]},
                              duration, {r: values[at] for r, values in ratios.items()})
            batch.append({
                "device": tasks.device[at], "step": tasks.step[at], "core": core, "op_type": op_type[found],
                "block_dim": _dims(block[found]), "mix_block_dim": _dims(mix[found]), "op_state": state[found],
                "long": duration >= min_task_us, "nobound": nobound[at],
                "dtypes": np.where(np.isin(core, aicpu), dtypes[found], NULL_INT), "n": np.ones(len(at)),
                "dur_sum": duration, "dur_max": duration, "cube_wsum": np.nan_to_num(utilization * duration, nan=0.0),
                "cube_dur": np.where(np.isnan(utilization), 0.0, duration)})
            if sum(len(f["n"]) for f in batch) >= GROUP_BATCH_ROWS:
                partial.append(_grouped(batch, KEYS))
                batch = []
        if batch:
            partial.append(_grouped(batch, KEYS))
    rows: List[Tuple[Any, ...]] = []
    if partial:
        grouped = _grouped(partial, KEYS)
        records = list(zip(*(grouped[name].tolist() for name in [*KEYS, *SUMS, "dur_max"])))
        text = strings_of(db, [int(r[i]) for r in records for i in (2, 3, 6, 9) if r[i] != NULL_INT])
        rows = [(_device(r[0]), float(r[1]), _shown(text, r[2]), _shown(text, r[3]), float(r[4]), float(r[5]),
                 _shown(text, r[6]), bool(r[7]), int(r[8]), _shown(text, r[9]), int(r[10]), _float(r[11]),
                 _float(r[14]), _float(r[12]), _float(r[13])) for r in records]
    rows.extend(_communication_groups(db, min_task_us, steps))
    facts["columns"] = columns
    if operators is not None:
        if partial and operators.seq is not None:
            operators.more = max(0, int(grouped["n"].sum()) - len(operators.seq["gid"]))
        facts["shapes"], facts["sequence"] = operators.shapes(), operators.sequence()
    return rows, facts


class _Operators:
    """The per-shape operator groups and the first tasks in start order (what
    :class:`npudoctor.prof.opstats.OpCollector` makes of a kernel table) from COMPUTE_TASK_INFO, TASK and
    TASK_PMU_INFO. Groups are keyed on string ids (no text per row) and turned into text at the end; the
    sequence is one bounded query in TASK's start order (its TaskIndex), joined to COMPUTE_TASK_INFO by its
    key; the PMU pipe ratios are read per task, the pipe times for the sequence's tasks only."""

    def __init__(self, db: ProfileDb, ratio_spellings: Mapping[str, Sequence[str]], steps: Steps) -> None:
        from npudoctor.prof import opstats
        from npudoctor.prof.columns import column_map

        self.db, self.opstats = db, opstats
        spellings = column_map("kernel_details").spellings
        wanted = {r: tuple(ratio_spellings.get(r) or spellings.get(r, (r,))) for r in opstats.RATIOS}
        wanted.update({t: db_map().pmu_metrics.get(t, ()) for t in opstats.TIMES})
        ids: Dict[str, List[int]] = {}
        if db.has("task_pmu_info", "global_task_id", "name", "value"):
            found = string_ids(db, [n for names in wanted.values() for n in names])
            ids = {c: sorted({i for n in names for i in found.get(n, [])}) for c, names in wanted.items()}
        self.ids = {c: i for c, i in ids.items() if i}
        if not any(t in self.ids for t in opstats.MOVE_TIMES):  # busy time alone says nothing (as for the CSV)
            self.ids = {c: i for c, i in self.ids.items() if c not in opstats.TIMES}
        self.parts: List[Dict[str, Any]] = []
        self.groups: List[Dict[str, Any]] = []
        self.sums = ["n", "dur_sum", *(f"{r}_{s}" for r in opstats.RATIOS for s in ("w", "d"))]
        self.base = steps.base
        self.seq = self._sequence_tasks(steps)
        self.seq_times: Dict[str, Any] = {t: None for t in opstats.TIMES if t in self.ids}
        if self.seq is not None:
            import numpy as np

            self.seq_order = np.argsort(self.seq["gid"], kind="stable")
            self.seq_gid = self.seq["gid"][self.seq_order]
            self.seq_times = {t: np.full(len(self.seq_gid), np.nan) for t in self.seq_times}

    def _sequence_tasks(self, steps: Steps) -> Optional[Dict[str, Any]]:
        import numpy as np

        db, cap = self.db, self.opstats.SEQUENCE_MAX_TASKS
        if not db.has("compute_task_info", "name"):
            return None
        device = db.col("task", "device_id", "t") if db.has("task", "device_id") else "NULL"

        def cell(column: str) -> str:
            return db.col("compute_task_info", column, "c") if db.has("compute_task_info", column) else "NULL"

        start = db.col("task", "start_ns", "t")
        # CROSS JOIN: TASK is walked in start order (TaskIndex), COMPUTE_TASK_INFO looked up by its key; the
        # LIMIT ends the walk after the first tasks.
        values = [f"t.{db.col('task', 'global_task_id')}", start, f"{db.col('task', 'end_ns', 't')} - {start}", device,
                  cell("name"), cell("input_shapes"), cell("output_shapes"), cell("core_type")]
        sql = (f"SELECT {', '.join(f'ifnull(CAST(({v}) AS INTEGER), {NULL_INT})' for v in values)} "
               f"FROM {db.name('task')} AS t CROSS JOIN {db.name('compute_task_info')} AS c ON "
               f"c.{db.col('compute_task_info', 'global_task_id')} = t.{db.col('task', 'global_task_id')} "
               f"WHERE typeof({start}) = 'integer' AND typeof({db.col('task', 'end_ns', 't')}) = 'integer' "
               f"ORDER BY {start} LIMIT {cap}")
        # Whole numbers from SQL (an empty or text cell: NULL_INT), turned into int64 arrays 8,192 rows at a
        # time: 100,000 tuples of Python ints held at once cost ~60 MiB.
        blocks, batch = [], []
        for row in db.rows(sql, limit=cap, batch=8192):
            batch.append(row)
            if len(batch) >= 8192:
                blocks.append(np.array(batch, dtype=np.int64))
                batch = []
        if batch:
            blocks.append(np.array(batch, dtype=np.int64))
        if not blocks:
            return None
        whole = np.concatenate(blocks)
        del blocks
        out = {"gid": whole[:, 0].copy(), "start_us": (whole[:, 1] - steps.base) / NS_PER_US,
               "duration_us": whole[:, 2] / NS_PER_US,
               "span_ns": (int(whole[:, 1].min()), int(whole[:, 1].max()))}
        for index, key in enumerate(("device_id", "op_name", "input_shapes", "output_shapes", "core_type"), 3):
            out[key] = whole[:, index].copy()
        return out

    def pmu(self, part: Tuple[int, int], tasks: Tasks) -> Dict[str, Any]:
        """The pipe ratios of each task of this pass (NaN: not recorded); the pipe times of the sequence's tasks
        are kept on the side."""
        import numpy as np

        if not self.ids:
            return {}
        db = self.db
        gid, name = db.col("task_pmu_info", "global_task_id", "t"), db.col("task_pmu_info", "name", "t")
        value = db.col("task_pmu_info", "value", "t")
        every = sorted({i for ids in self.ids.values() for i in ids})
        in_pass = _in_pass(gid, part)
        where = f"{_one_of(name, every)} AND typeof({value}) IN ('integer', 'real')" + (
            f" AND {in_pass}" if in_pass else "")
        ratios = {r: np.full(len(tasks.gid), np.nan, dtype=np.float32) for r in self.opstats.RATIOS if r in self.ids}
        for ids, names, values in db.columns("task_pmu_info", [(gid, INT), (name, INT), (value, REAL)], where):
            for canonical, metric_ids in self.ids.items():
                mine = np.isin(names, metric_ids)
                if not mine.any():
                    continue
                if canonical in ratios:
                    at, found = tasks.find(ids[mine])
                    ratios[canonical][at[found]] = values[mine][found]
                elif self.seq is not None and len(self.seq_gid):
                    wanted = ids[mine]
                    at = np.clip(np.searchsorted(self.seq_gid, wanted), 0, len(self.seq_gid) - 1)
                    found = self.seq_gid[at] == wanted
                    self.seq_times[canonical][at[found]] = values[mine][found]
        return ratios

    def add(self, keys: Dict[str, Any], duration: Any, ratios: Mapping[str, Any]) -> None:
        import numpy as np

        part: Dict[str, Any] = {**keys, "n": np.ones(len(duration)), "dur_sum": duration, "dur_max": duration}
        for ratio in self.opstats.RATIOS:
            values = ratios.get(ratio)
            if values is None:
                part[f"{ratio}_w"] = part[f"{ratio}_d"] = np.zeros(len(duration))
            else:
                part[f"{ratio}_w"] = np.nan_to_num(values * duration, nan=0.0)
                part[f"{ratio}_d"] = np.where(np.isnan(values), 0.0, duration)
        self.parts.append(part)
        if sum(len(p["n"]) for p in self.parts) >= GROUP_BATCH_ROWS:
            self.groups.append(_grouped(self.parts, self.opstats.SHAPE_KEYS, self.sums))
            self.parts = []
        if len(self.groups) >= 16:
            self.groups = [_grouped(self.groups, self.opstats.SHAPE_KEYS, self.sums)]

    def shapes(self) -> Any:
        import pandas as pd

        if self.parts:
            self.groups.append(_grouped(self.parts, self.opstats.SHAPE_KEYS, self.sums))
            self.parts = []
        if not self.groups:
            return None
        grouped = _grouped(self.groups, self.opstats.SHAPE_KEYS, self.sums)
        texts = ("core", "op_type", "op_name", "input_shapes", "output_shapes", "input_dtypes")
        text = strings_of(self.db, {int(v) for k in texts for v in grouped[k].tolist() if v != NULL_INT})
        frame = pd.DataFrame({k: [_device(v) for v in grouped[k].tolist()] if k == "device" else
                              [_shown(text, v) for v in grouped[k].tolist()] for k in self.opstats.SHAPE_KEYS})
        frame["op_type"] = frame["op_type"].where(frame["op_type"] != "", frame["op_name"])
        for name in ("n", "dur_sum", "dur_max", *self.sums[2:]):
            frame[name] = grouped[name]
        frame["n"] = frame["n"].astype(int)
        collector = self.opstats.OpCollector(True, False)
        collector.shape_parts = [frame]
        return collector.shapes()

    def sequence(self) -> Optional[Dict[str, Any]]:
        import numpy as np
        import pandas as pd

        if self.seq is None:
            return None
        seq = self.seq
        text = strings_of(self.db, {int(v) for k in ("op_name", "input_shapes", "output_shapes", "core_type")
                                    for v in np.unique(seq[k]).tolist() if v != NULL_INT})
        frame = pd.DataFrame({"start_us": seq["start_us"], "duration_us": seq["duration_us"],
                              "device_id": [_device(v) for v in seq["device_id"].tolist()]})
        for key in ("op_name", "input_shapes", "output_shapes", "core_type"):
            codes, uniques = pd.factorize(seq[key])
            frame[key] = np.array([_shown(text, u) for u in uniques.tolist()] + [""], dtype=object)[codes]
        for name, values in self.seq_times.items():
            if values is not None:
                back = np.empty_like(values)
                back[self.seq_order] = values
                frame[name] = back
        frame = pd.concat([frame, self._communication(seq)], ignore_index=True) if len(frame) else frame
        frame = frame.sort_values("start_us", kind="stable").reset_index(drop=True)
        collector = self.opstats.OpCollector(False, True)
        for offset in range(0, len(frame), self.opstats.SEQUENCE_SLICE):
            collector.add_sequence(frame.iloc[offset:offset + self.opstats.SEQUENCE_SLICE])
        out = collector.sequence()
        if out is not None:
            out["not_analysed"] = self.more
        return out

    more = 0  # compute tasks after the sequence's cap (set by kernel_groups' count)

    def _communication(self, seq: Mapping[str, Any]) -> Any:
        """The collectives inside the sequence's span, as HCCL rows: they end a sequence, as in kernel_details."""
        import numpy as np
        import pandas as pd

        db = self.db
        if not db.has("communication_op", "start_ns", "end_ns"):
            return pd.DataFrame()
        start = db.col("communication_op", "start_ns")
        sql = (f"SELECT {start} - ?, {db.col('communication_op', 'end_ns')} - {start} FROM "
               f"{db.name('communication_op')} WHERE {start} BETWEEN ? AND ?")
        found = [(a, d) for a, d in db.rows(sql, [self.base, *seq["span_ns"]], limit=self.opstats.SEQUENCE_MAX_TASKS)
                 if isinstance(a, int) and isinstance(d, int)]
        if not found:
            return pd.DataFrame()
        devices, counts = np.unique(seq["device_id"], return_counts=True)  # this CANN's COMMUNICATION_OP has none
        return pd.DataFrame({"start_us": [a / NS_PER_US for a, _ in found],
                             "duration_us": [d / NS_PER_US for _, d in found], "core_type": "HCCL",
                             "op_name": "hcom", "device_id": _device(devices[int(np.argmax(counts))])})


SUMS = ("n", "dur_sum", "cube_wsum", "cube_dur")


def _grouped(parts: Sequence[Mapping[str, Any]], keys: Sequence[str], sums: Sequence[str] = ()
             ) -> Dict[str, Any]:
    """The rows of ``parts`` (dicts of equal-length arrays) grouped on ``keys``: SUMS summed, dur_max the
    maximum. Each key is factorized (hashing) and folded into one dense group number; the sums are
    bincounts. pandas' groupby on the ten keys took 5x longer."""
    import numpy as np
    import pandas as pd

    whole = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    group = np.zeros(len(whole["n"]), dtype=np.int64)
    for name in keys:
        codes, uniques = pd.factorize(whole[name])
        group, _ = pd.factorize(group * max(len(uniques), 1) + codes)
    count = int(group.max()) + 1 if len(group) else 0
    first = np.full(count, len(group), dtype=np.int64)
    np.minimum.at(first, group, np.arange(len(group)))
    out = {name: whole[name][first] for name in keys}
    for name in (n for n in (sums or SUMS) if n in whole):
        out[name] = np.bincount(group, weights=whole[name], minlength=count)
    highest = np.full(count, -np.inf)
    np.maximum.at(highest, group, whole["dur_max"])
    out["dur_max"] = highest
    return out


def _dims(values: Any) -> Any:
    import numpy as np

    return np.where(values == NULL_INT, -1.0, values.astype(np.float64))


def _device(value: Any) -> str:
    number = int(value)
    return "" if number in (NULL_INT, -(1 << 31)) else str(number)  # empty, as int64 or as a task's int32


def _shown(text: Mapping[Any, str], value: Any) -> str:
    return "" if int(value) == NULL_INT else text.get(int(value), "")


def _communication_groups(db: ProfileDb, min_task_us: float, steps: Steps) -> List[Tuple[Any, ...]]:
    """COMMUNICATION_OP rows as HCCL tasks (kernel_details lists each collective as one HCCL row)."""
    if not db.has("communication_op", "start_ns", "end_ns"):
        return []
    import numpy as np

    start = db.col("communication_op", "start_ns", "t")
    op_type = db.col("communication_op", "op_type", "t") if db.has("communication_op", "op_type") else "NULL"
    device = db.col("communication_op", "device_id", "t") if db.has("communication_op", "device_id") else "NULL"
    parts, relative = [], steps.relative()
    for starts, duration, types, devices in db.columns(
            "communication_op", [(f"{start} - {steps.base}", INT),
                                 (f"{db.col('communication_op', 'end_ns', 't')} - {start}", INT),
                                 (op_type, INT), (device, INT)]):
        dur = np.where(duration == NULL_INT, 0.0, duration / NS_PER_US)
        parts.append({"device": devices, "step": relative.of(starts), "op_type": types, "long": dur >= min_task_us,
                      "n": np.ones(len(dur)), "dur_sum": dur, "dur_max": dur})
    if not parts:
        return []
    grouped = _grouped(parts, ["device", "step", "op_type", "long"])
    records = list(zip(*(grouped[name].tolist() for name in ("device", "step", "op_type", "long", "n", "dur_sum",
                                                               "dur_max"))))
    text = strings_of(db, [int(r[2]) for r in records if r[2] != NULL_INT])
    return [(_device(r[0]), float(r[1]), "HCCL", _shown(text, r[2]), 0.0, -1.0, "", bool(r[3]), -1, "", int(r[4]),
             _float(r[5]), _float(r[6]), 0.0, 0.0) for r in records]


def recorded_environment(db: ProfileDb) -> Any:
    """META_DATA's ENV_VARIABLES (the JSON profiler_metadata.json holds in text exports), decoded; None if absent
    or not readable."""
    from npudoctor.parsers import jsondoc

    if not db.has("meta_data", "name", "value"):
        return None
    sql = (f"SELECT {db.col('meta_data', 'value')} FROM {db.name('meta_data')} "
           f"WHERE {db.col('meta_data', 'name')} = 'ENV_VARIABLES'")
    for (value,) in db.rows(sql, limit=1):
        try:
            return jsondoc.loads(str(value or ""), f"{db.path}: META_DATA ENV_VARIABLES")
        except jsondoc.JsonDocumentError:
            return None
    return None


def step_trace(db: ProfileDb) -> List[Dict[str, Any]]:
    """analysis.db StepTraceTime rows with canonical column names (microseconds, as in step_trace_time.csv)."""
    if not db.has("step_trace_time", "computing_us", "free_us"):
        return []
    columns = dict(db.tables["step_trace_time"].columns)
    names = list(columns)
    sql = f"SELECT {', '.join(db.col('step_trace_time', n) for n in names)} FROM {db.name('step_trace_time')}"
    out = []
    for row in db.rows(sql, limit=100_000):
        record = dict(zip(names, row))
        for name in names:
            if name.endswith("_us"):
                record[name] = _float(record[name])
        if record.get("step") is not None:
            record["step"] = str(record["step"])
        out.append(record)
    return out


def memory_peaks(db: ProfileDb) -> Dict[str, Dict[str, float]]:
    """Peak allocated / reserved MB per component (PTA, GE, APP, ...) from MEMORY_RECORD (bytes)."""
    if not db.has("memory_record", "component"):
        return {}
    component, join = db.text("memory_record", "component", "m", "s_component")
    parts = []
    wanted = []
    for column, name in (("allocated_bytes", "allocated_mb"), ("reserved_bytes", "reserved_mb")):
        if db.has("memory_record", column):
            parts.append(f"MAX(CAST({db.col('memory_record', column, 'm')} AS REAL))")
            wanted.append(name)
    if not parts:
        return {}
    sql = f"SELECT {component}, {', '.join(parts)} FROM {db.name('memory_record')} m{join} GROUP BY 1"
    peaks: Dict[str, Dict[str, float]] = {}
    for row in db.rows(sql, limit=10_000):
        values = {name: _float(value) / BYTES_PER_MB for name, value in zip(wanted, row[1:]) if value is not None}
        peaks[str(row[0] or "")] = values
    return peaks


def largest_allocations(db: ProfileDb, limit: int = 5) -> List[Dict[str, Any]]:
    if not db.has("op_memory", "name", "size_bytes"):
        return []
    name, join = db.text("op_memory", "name", "m", "s_name")
    sql = (f"SELECT {name}, CAST({db.col('op_memory', 'size_bytes', 'm')} AS REAL) AS size FROM "
           f"{db.name('op_memory')} m{join} ORDER BY size DESC LIMIT ?")
    return [{"name": str(row[0]), "size_mb": round(_float(row[1]) / BYTES_PER_MB, 3)}
            for row in db.rows(sql, [int(limit)])]


def links(db: ProfileDb) -> List[Dict[str, Any]]:
    """CommAnalyzerBandwidth rows as the link records communication.json gives."""
    if not db.has("comm_bandwidth", "transport", "size_mb", "bandwidth_gbps"):
        return []
    table = db.tables["comm_bandwidth"].columns
    names = [n for n in ("step", "kind", "group", "op_name", "transport", "size_mb", "bandwidth_gbps", "transit_ms")
             if n in table]
    sql = f"SELECT {', '.join(db.col('comm_bandwidth', n) for n in names)} FROM {db.name('comm_bandwidth')}"
    out = []
    for row in db.rows(sql, limit=1_000_000):
        record = dict(zip(names, row))
        path = [str(record[k]) for k in ("step", "kind", "op_name") if record.get(k) not in (None, "")]
        numbers = [_float(record.get(k)) for k in ("size_mb", "bandwidth_gbps", "transit_ms")]  # empty = 0
        out.append({"path": path, "transport": str(record.get("transport") or ""), "size_mb": numbers[0],
                    "bandwidth_gbps": numbers[1], "transit_ms": numbers[2], "wait_ratio": None, "elapse_ms": None})
    return out


def host_apis(db: ProfileDb, limit: int = 5) -> List[Dict[str, Any]]:
    """The CANN APIs taking the most host time (what api_statistic.csv lists)."""
    if not db.has("cann_api", "start_ns", "end_ns", "name"):
        return []
    name, join = db.text("cann_api", "name", "a", "s_name")
    duration = f"(({db.col('cann_api', 'end_ns', 'a')} - {db.col('cann_api', 'start_ns', 'a')}) / {NS_PER_US})"
    sql = (f"SELECT {name}, SUM({duration}) AS total, COUNT(*) FROM {db.name('cann_api')} a{join} "
           "GROUP BY 1 ORDER BY total DESC LIMIT ?")
    return [{"api": str(row[0]), "level": "", "total_us": round(_float(row[1]), 3), "count": int(row[2])}
            for row in db.rows(sql, [int(limit)])]


API_PREFIXES = {"acl": "AscendCL@", "runtime": "Runtime@", "node": "Node@", "model": "Model@"}


def host_events(db: ProfileDb, like: Sequence[str]) -> Iterator[Tuple[str, float, float]]:
    """(name, start us, duration us) of CANN API calls whose shown name (``AscendCL@...``) starts with one of
    ``like``, in time order; framework APIs (PYTORCH_API) come from :func:`framework_events`."""
    if not db.has("cann_api", "start_ns", "end_ns", "name"):
        return
    name, join = db.text("cann_api", "name", "a", "s_name")
    shown = name
    if db.has("cann_api", "type") and db.has("enum_api_type", "id", "name"):
        cases = " ".join(f"WHEN '{key}' THEN '{prefix}' || {name}" for key, prefix in API_PREFIXES.items())
        shown = f"CASE e.{db.col('enum_api_type', 'name')} {cases} ELSE {name} END"
        join += (f" LEFT JOIN {db.name('enum_api_type')} e ON e.{db.col('enum_api_type', 'id')} = "
                 f"{db.col('cann_api', 'type', 'a')}")
    start = db.col("cann_api", "start_ns", "a")
    where = " OR ".join("shown LIKE ? ESCAPE '\\'" for _ in like)
    sql = (f"SELECT * FROM (SELECT {shown} AS shown, {start} / {NS_PER_US} AS start_us, "
           f"({db.col('cann_api', 'end_ns', 'a')} - {start}) / {NS_PER_US} AS dur FROM {db.name('cann_api')} a{join}) "
           f"WHERE {where} ORDER BY start_us")
    patterns = [prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for prefix in like]
    for row in db.rows(sql, patterns):
        yield str(row[0]), _float(row[1]), _float(row[2])


def framework_events(db: ProfileDb, contains: str) -> Iterator[Tuple[str, float, float]]:
    """(name, start us, duration us) of PYTORCH_API records whose name contains ``contains`` (any case)."""
    if not db.has("pytorch_api", "start_ns", "end_ns", "name"):
        return
    name, join = db.text("pytorch_api", "name", "a", "s_name")
    start = db.col("pytorch_api", "start_ns", "a")
    sql = (f"SELECT {name} AS n, CAST({start} AS REAL) / {NS_PER_US}, (CAST({db.col('pytorch_api', 'end_ns', 'a')} "
           f"AS REAL) - CAST({start} AS REAL)) / {NS_PER_US} FROM {db.name('pytorch_api')} a{join} "
           "WHERE instr(lower(n), ?) > 0")
    for row in db.rows(sql, [contains.lower()]):
        yield str(row[0]), _float(row[1]), _float(row[2])


def torch_ops(db: ProfileDb, prefixes: Sequence[str]) -> Iterator[Tuple[str, str, float, float]]:
    """(name, thread, start us, duration us) of PYTORCH_API records whose name starts with one of
    ``prefixes`` (``aten::``, ``Optimizer.step#``), at most :data:`MAX_EVENT_ROWS`."""
    if not db.has("pytorch_api", "start_ns", "end_ns", "name"):
        return
    name, join = db.text("pytorch_api", "name", "a", "s_name")
    thread = db.col("pytorch_api", "thread", "a") if db.has("pytorch_api", "thread") else "0"
    start = db.col("pytorch_api", "start_ns", "a")
    where = " OR ".join("substr(n, 1, ?) = ?" for _ in prefixes)
    params: List[Any] = [value for prefix in prefixes for value in (len(prefix), prefix)]
    sql = (f"SELECT * FROM (SELECT {name} AS n, {thread} AS t, CAST({start} AS REAL) / {NS_PER_US} AS s, "
           f"(CAST({db.col('pytorch_api', 'end_ns', 'a')} AS REAL) - CAST({start} AS REAL)) / {NS_PER_US} "
           f"FROM {db.name('pytorch_api')} a{join}) WHERE {where}")
    for row in db.rows(sql, params):
        yield str(row[0]), str(row[1]), _float(row[2]), _float(row[3])


def transfer_tasks(db: ProfileDb) -> List[Dict[str, Any]]:
    """The HCCL tasks that move data (COMMUNICATION_TASK_INFO with a size, timed by their TASK row), in the
    shape of a trace's task ``args`` (transport type, link type, size(Byte)) with start and duration us."""
    if not (db.has("communication_task_info", "global_task_id", "size_bytes") and
            db.has("task", "global_task_id", "start_ns", "end_ns")):
        return []

    def enum(column: str, table: str, alias: str) -> Tuple[str, str]:
        if not db.has("communication_task_info", column):
            return "''", ""
        if not db.has(table, "id", "name"):
            return f"CAST({db.col('communication_task_info', column, 'c')} AS TEXT)", ""
        return (f"COALESCE({alias}.{db.col(table, 'name')}, '')", f" LEFT JOIN {db.name(table)} {alias} ON "
                f"{alias}.{db.col(table, 'id')} = {db.col('communication_task_info', column, 'c')}")

    transport, join_t = enum("transport", "enum_hccl_transport_type", "et")
    link, join_l = enum("link", "enum_hccl_link_type", "el")
    start = db.col("task", "start_ns", "t")
    sql = (f"SELECT {transport}, {link}, {db.col('communication_task_info', 'size_bytes', 'c')}, "
           f"CAST({start} AS REAL) / {NS_PER_US}, ({db.col('task', 'end_ns', 't')} - {start}) / {NS_PER_US} "
           f"FROM {db.name('communication_task_info')} c JOIN {db.name('task')} t ON "
           f"{db.col('task', 'global_task_id', 't')} = {db.col('communication_task_info', 'global_task_id', 'c')}"
           f"{join_t}{join_l} WHERE {db.col('communication_task_info', 'size_bytes', 'c')} > 0")
    return [{"transport type": str(a), "link type": str(b), "size(Byte)": size, "start": _float(s), "dur": _float(d)}
            for a, b, size, s, d in db.rows(sql)]


def matmul_tasks(db: ProfileDb) -> List[Tuple[float, float]]:
    """(start us, duration us) of the compute tasks whose operator type or name holds "matmul" (any case)."""
    if not (db.has("compute_task_info", "global_task_id") and db.has("task", "global_task_id", "start_ns", "end_ns")
            and db.has("string_ids", "id", "value")):
        return []
    columns = [c for c in ("op_type", "name") if db.has("compute_task_info", c)]
    ids = [int(row[0]) for row in db.rows(f"SELECT {db.col('string_ids', 'id')} FROM {db.strings()} WHERE "
                                          f"instr(lower({db.col('string_ids', 'value')}), 'matmul') > 0",
                                          limit=100_000)]
    if not ids or not columns:
        return []
    marks = ",".join(str(i) for i in ids)   # integers read from the file: no text reaches the SQL
    where = " OR ".join(f"{db.col('compute_task_info', c, 'ci')} IN ({marks})" for c in columns)
    start = db.col("task", "start_ns", "t")
    sql = (f"SELECT CAST({start} AS REAL) / {NS_PER_US}, ({db.col('task', 'end_ns', 't')} - {start}) / {NS_PER_US} "
           f"FROM {db.name('compute_task_info')} ci JOIN {db.name('task')} t ON "
           f"{db.col('task', 'global_task_id', 't')} = {db.col('compute_task_info', 'global_task_id', 'ci')} "
           f"WHERE {where}")
    return [(_float(a), _float(b)) for a, b in db.rows(sql)]


def gc_durations(db: ProfileDb) -> List[float]:
    if not db.has("gc_record", "start_ns", "end_ns"):
        return []
    sql = (f"SELECT ({db.col('gc_record', 'end_ns')} - {db.col('gc_record', 'start_ns')}) / {NS_PER_US} "
           f"FROM {db.name('gc_record')}")
    return [_float(row[0]) for row in db.rows(sql)]


def aicore_freq(db: ProfileDb) -> List[Tuple[float, float]]:
    """(time us, MHz) of each AI Core frequency change, in time order."""
    if not db.has("aicore_freq", "timestamp_ns", "freq_mhz"):
        return []
    sql = (f"SELECT CAST({db.col('aicore_freq', 'timestamp_ns')} AS REAL) / {NS_PER_US}, "
           f"CAST({db.col('aicore_freq', 'freq_mhz')} AS REAL) FROM {db.name('aicore_freq')} ORDER BY 1")
    return [(_float(a), _float(b)) for a, b in db.rows(sql)]


IDLE_CANDIDATES = 16        # the longest device gaps found exactly (more may be returned)
IDLE_BATCH = 32             # runs of empty buckets measured in one aggregate pass
IDLE_MEASURED_MAX = 256     # runs measured in all (8 passes at most)
HOST_SPAN_QUERIES = 64     # idle spans whose host calls are looked up (the longest ones)


def idle_spans(db: ProfileDb, min_us: float) -> List[Tuple[float, float]]:
    """(start us, duration us) of the gaps of at least ``min_us`` between one device's tasks in TASK, longest
    first (the :data:`IDLE_CANDIDATES` longest exactly): the device idle time a trace shows as ``Free``.

    No sort of the table. Buckets of ``min_us / 2`` holding a task start are listed (a DISTINCT, one pass): a
    gap that long leaves a whole bucket without a start, so only runs of empty buckets can hold one, and a run
    of c buckets holds at most c + 2 buckets of gap (less when a long task covers it). Aggregate passes then
    measure the widest runs, :data:`IDLE_BATCH` a pass (the latest end of the tasks started before the run, the
    first start after it), until the longest gaps found are longer than any the remaining runs could hold."""
    if not db.has("task", "start_ns", "end_ns") or min_us <= 0:
        return []
    start, end = db.col("task", "start_ns"), db.col("task", "end_ns")
    device = db.col("task", "device_id") if db.has("task", "device_id") else "0"
    width = float(min_us) * NS_PER_US / 2
    buckets: Dict[Any, List[int]] = {}
    for dev, bucket in db.rows(f"SELECT DISTINCT {device}, CAST(CAST({start} AS REAL) / ? AS INTEGER) FROM "
                               f"{db.name('task')}", [width]):
        if isinstance(bucket, int):
            buckets.setdefault(dev, []).append(bucket)
    runs: List[Tuple[int, Any, int, int]] = []   # (empty buckets, device, last occupied, next occupied)
    for dev, occupied in buckets.items():
        occupied.sort()
        runs.extend((b - a - 1, dev, a, b) for a, b in zip(occupied, occupied[1:]) if b - a > 1)
    runs.sort(key=lambda run: -run[0])
    spans: List[Tuple[float, float]] = []
    for first in range(0, min(len(runs), IDLE_MEASURED_MAX), IDLE_BATCH):
        spans.extend(_measure_runs(db, runs[first:first + IDLE_BATCH], width, min_us, device, start, end))
        spans.sort(key=lambda span: -span[1])
        rest = runs[first + IDLE_BATCH:first + IDLE_BATCH + 1]
        if not rest or (len(spans) >= IDLE_CANDIDATES and
                        spans[IDLE_CANDIDATES - 1][1] * NS_PER_US >= (rest[0][0] + 2) * width):
            break
    return spans


def _measure_runs(db: ProfileDb, runs: Sequence[Tuple[int, Any, int, int]], width: float, min_us: float,
                  device: str, start: str, end: str) -> List[Tuple[float, float]]:
    parts: List[str] = []
    params: List[Any] = []
    for _, dev, before, after in runs:
        parts.append(f"MAX(CASE WHEN {device} IS ? AND {start} < ? THEN {end} END)")
        parts.append(f"MIN(CASE WHEN {device} IS ? AND {start} >= ? THEN {start} END)")
        params.extend([dev, (before + 1) * width, dev, after * width])
    row = next(db.rows(f"SELECT {', '.join(parts)} FROM {db.name('task')}", params), ())
    spans = []
    for i in range(len(runs)):
        busy_end, next_start = (row[2 * i], row[2 * i + 1]) if len(row) > 2 * i + 1 else (None, None)
        if not isinstance(busy_end, (int, float)) or not isinstance(next_start, (int, float)):
            continue
        gap = _float(next_start - busy_end) / NS_PER_US   # integers of ns: exact before the division
        if gap >= min_us:
            spans.append((_float(busy_end) / NS_PER_US, gap))
    return spans


def host_calls_in(db: ProfileDb, spans: Sequence[Tuple[float, float]]
                  ) -> Tuple[Optional[Tuple[float, float]], List[Tuple[float, float]]]:
    """The time the host's CANN API calls cover (first start, last end, us) and (start us, duration us) of the
    calls that overlap one of ``spans`` (the longest :data:`HOST_SPAN_QUERIES` of them), in one pass each."""
    if not spans or not db.has("cann_api", "start_ns", "end_ns"):
        return None, []
    start, end = db.col("cann_api", "start_ns"), db.col("cann_api", "end_ns")
    bounds = next(db.rows(f"SELECT MIN(CAST({start} AS REAL)), MAX(CAST({end} AS REAL)) FROM "
                          f"{db.name('cann_api')}"), (None, None))
    if bounds[0] is None or bounds[1] is None:
        return None, []
    chosen = sorted(spans, key=lambda span: -span[1])[:HOST_SPAN_QUERIES]
    where = " OR ".join(f"({start} < ? AND {end} > ?)" for _ in chosen)
    params: List[Any] = []
    for span_start, duration in chosen:
        params.extend([(span_start + duration) * NS_PER_US, span_start * NS_PER_US])
    sql = (f"SELECT CAST({start} AS REAL) / {NS_PER_US}, (CAST({end} AS REAL) - CAST({start} AS REAL)) / "
           f"{NS_PER_US} FROM {db.name('cann_api')} WHERE {where}")
    calls = [(_float(a), _float(b)) for a, b in db.rows(sql, params)]
    return (_float(bounds[0]) / NS_PER_US, _float(bounds[1]) / NS_PER_US), calls


def _float(value: Any) -> float:
    """A finite float; NULL, text and out-of-range cells read as 0 (a machine format never holds NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return number if number == number and abs(number) != float("inf") else 0.0
