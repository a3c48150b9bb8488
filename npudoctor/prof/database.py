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


class DbTable(NamedTuple):
    name: str                       # the table's own name in the file
    columns: Mapping[str, str]      # canonical -> the file's column name


class DbMap(NamedTuple):
    version: int
    profiler_files: Tuple[Any, ...]  # compiled patterns
    analysis_files: Tuple[Any, ...]
    tables: Mapping[str, Tuple[Tuple[str, ...], Mapping[str, Tuple[str, ...]]]]


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
                 analysis_files=tuple(re.compile(p) for p in files.get("analysis", [])), tables=tables)


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
            # The grouping queries are sorts: helper threads for the sorter and a 64 MiB page cache made the
            # 1M-task grouping ~2x faster here (measured 4.4 s -> 1.7-2.0 s).
            conn.execute(f"PRAGMA threads = {max(1, min(4, os.cpu_count() or 1))}")
            conn.execute("PRAGMA cache_size = -65536")
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

    def rows(self, sql: str, params: Sequence[Any] = (), limit: int = MAX_EVENT_ROWS) -> Iterator[Tuple[Any, ...]]:
        """The rows of one query, at most ``limit``; the query is stopped at the deadline (one-line error)."""
        self._deadline = time.monotonic() + self.deadline_s
        try:
            cursor = self.conn.execute(sql, params)
            taken = 0
            while taken < limit:
                batch = cursor.fetchmany(min(65_536, limit - taken))
                if not batch:
                    return
                taken += len(batch)
                yield from batch
        except sqlite3.OperationalError as exc:
            if "interrupt" in str(exc).lower():
                raise self._fail(f"a query ran past {self.deadline_s:g} s: not read") from None
            raise self._fail(_one_line(exc)) from None
        except sqlite3.Error as exc:
            raise self._fail(_one_line(exc)) from None
        except UnicodeDecodeError:
            raise self._fail("corrupt SQLite database (a message or name not readable)") from None

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

MAX_STEP_CASES = 512  # steps written into the query as one CASE; more: a sub-select per task


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


def _step_expression(db: ProfileDb, start: str) -> str:
    """The STEP_TIME id of the step a start time falls in (-1.0 outside every step)."""
    if not db.has("step_time", "id", "start_ns", "end_ns"):
        return "-1.0"
    steps = list(db.rows(f"SELECT {db.col('step_time', 'id')}, {db.col('step_time', 'start_ns')}, "
                         f"{db.col('step_time', 'end_ns')} FROM {db.name('step_time')}", limit=MAX_STEP_CASES + 1))
    usable = [(float(i), int(a), int(b)) for i, a, b in steps
              if isinstance(i, (int, float)) and isinstance(a, int) and isinstance(b, int)]
    if len(steps) <= MAX_STEP_CASES and len(usable) == len(steps):
        if not usable:
            return "-1.0"
        cases = " ".join(f"WHEN {start} BETWEEN {a} AND {b} THEN {i!r}" for i, a, b in usable)
        return f"(CASE {cases} ELSE -1.0 END)"
    return (f"COALESCE((SELECT CAST(st.{db.col('step_time', 'id')} AS REAL) FROM {db.name('step_time')} st "
            f"WHERE {start} >= st.{db.col('step_time', 'start_ns')} AND {start} <= st.{db.col('step_time', 'end_ns')}"
            " LIMIT 1), -1.0)")


def kernel_groups(db: ProfileDb, min_task_us: float, bound_ratio: float,
                  ratio_spellings: Mapping[str, Sequence[str]], cube_names: Sequence[str]
                  ) -> Tuple[List[Tuple[Any, ...]], Dict[str, Any]]:
    """The compute and communication tasks grouped like :func:`npudoctor.prof.kernels._group_chunk` does.

    Returns (rows of KEYS + n, dur_sum, dur_max, cube_wsum, cube_dur; facts: which columns were there, the
    PMU metric names seen). Durations are microseconds. The grouping runs on the string ids (no join per
    task); the few ids of the groups are turned into text afterwards.
    """
    facts: Dict[str, Any] = {"columns": [], "pmu_names": []}
    if not (db.has("task", "start_ns", "end_ns", "global_task_id")
            and db.has("compute_task_info", "global_task_id", "core_type")):
        return [], facts
    columns = ["core_type", "duration_us", "op_name", "op_type"]

    def raw(column: str) -> str:
        if not db.has("compute_task_info", column):
            return "NULL"
        if column != "core_type":
            columns.append(column)
        return db.col("compute_task_info", column, "c")

    def number_or(column: str, default: str) -> str:  # raw here, a float (or -1.0) per group afterwards
        if not db.has("compute_task_info", column):
            return default
        columns.append(column)
        return db.col("compute_task_info", column, "c")

    core, op_type, op_state, dtypes = raw("core_type"), raw("op_type"), raw("op_state"), raw("input_dtypes")
    block_dim = number_or("block_dim", "-1.0")
    mix_block_dim = number_or("mix_block_dim", "-1.0")
    start = db.col("task", "start_ns", "t")
    duration = f"({db.col('task', 'end_ns', 't')} - {start})"  # ns, integer arithmetic; us per group afterwards
    device = f"CAST({db.col('task', 'device_id', 't')} AS TEXT)" if db.has("task", "device_id") else "''"
    step = _step_expression(db, start)
    if step != "-1.0":
        columns.append("step_id")
    aicpu_ids = [i for ids in string_ids(db, ["AI_CPU", "KERNEL_AICPU"]).values() for i in ids]
    ai_cpu_dtypes = (f"CASE WHEN {core} IN ({','.join(map(str, aicpu_ids))}) THEN {dtypes} END"
                     if aicpu_ids and dtypes != "NULL" else "NULL")
    params: List[Any] = [float(min_task_us) * NS_PER_US]
    pmu_join, nobound, cube_w, cube_d = "", "-1", "0.0", "0.0"
    if db.has("task_pmu_info", "global_task_id", "name", "value"):
        pmu = db.name("task_pmu_info")
        name_col, value_col = db.col("task_pmu_info", "name", "p"), db.col("task_pmu_info", "value", "p")
        sampled = [row[0] for row in db.rows(f"SELECT DISTINCT name FROM (SELECT {name_col} AS name FROM {pmu} p "
                                             "LIMIT 200000)", limit=4096)]
        facts["pmu_names"] = sorted(strings_of(db, sampled).values())
        spelled = [n for spellings in ratio_spellings.values() for n in spellings] + list(cube_names)
        ids = string_ids(db, spelled)
        present = {canonical: [i for n in spellings for i in ids.get(n, [])]
                   for canonical, spellings in ratio_spellings.items()}
        present = {canonical: found for canonical, found in present.items() if found}
        ratio_ids = sorted({i for found in present.values() for i in found})
        cube_ids = sorted({i for n in cube_names for i in ids.get(n, [])})
        if ratio_ids or cube_ids:
            parts = [f"MAX(CASE WHEN {name_col} IN ({','.join(map(str, ratio_ids))}) THEN CAST({value_col} AS REAL) "
                     "END) AS highest" if ratio_ids else "NULL AS highest",
                     f"MAX(CASE WHEN {name_col} IN ({','.join(map(str, cube_ids))}) THEN CAST({value_col} AS REAL) "
                     "END) AS cube" if cube_ids else "NULL AS cube"]
            every = ",".join(map(str, ratio_ids + cube_ids))
            gid = db.col("task_pmu_info", "global_task_id", "p")
            pmu_join = (f" LEFT JOIN (SELECT {gid} AS gid, {', '.join(parts)}"
                        f" FROM {pmu} p WHERE {name_col} IN ({every}) GROUP BY 1) pmu ON pmu.gid = "
                        f"{db.col('compute_task_info', 'global_task_id', 'c')}")
            if ratio_ids:
                nobound = "CASE WHEN pmu.highest IS NULL THEN -1 WHEN pmu.highest > ? THEN 0 ELSE 1 END"
                params.append(float(bound_ratio))
                columns.extend(present)
            if cube_ids:
                columns.append("cube_utilization_pct")
                cube_w = f"COALESCE(pmu.cube * {duration}, 0.0)"
                cube_d = f"CASE WHEN pmu.cube IS NULL THEN 0.0 ELSE {duration} END"
        claimed = {str(v).lower() for v in spelled}
        facts["extra_columns"] = [n for n in facts["pmu_names"] if n.lower() not in claimed]
    sql = (f"SELECT {device}, {step}, {core}, {op_type}, {block_dim}, {mix_block_dim}, {op_state}, "
           f"{duration} >= ?, {nobound}, {ai_cpu_dtypes}, COUNT(*), SUM({duration}), MAX({duration}), "
           f"SUM({cube_w}), SUM({cube_d}) "
           f"FROM {db.name('compute_task_info')} c JOIN {db.name('task')} t ON "
           f"{db.col('task', 'global_task_id', 't')} = {db.col('compute_task_info', 'global_task_id', 'c')}"
           f"{pmu_join} GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10")
    grouped = list(db.rows(sql, params, limit=MAX_EVENT_ROWS))
    text = strings_of(db, [value for row in grouped for value in (row[2], row[3], row[6], row[9])])

    def shown(value: Any) -> str:
        return text.get(value, "") if isinstance(value, int) else ("" if value is None else str(value))

    def dim(value: Any) -> float:
        return -1.0 if value is None or isinstance(value, (str, bytes)) else _float(value)

    rows = [(r[0], r[1], shown(r[2]), shown(r[3]), dim(r[4]), dim(r[5]), shown(r[6]), r[7], r[8], shown(r[9]), r[10],
             _float(r[11]) / NS_PER_US, _float(r[12]) / NS_PER_US, _float(r[13]) / NS_PER_US, _float(r[14]) / NS_PER_US)
            for r in grouped]
    rows.extend(_communication_groups(db, min_task_us))
    facts["columns"] = columns
    return rows, facts


def _communication_groups(db: ProfileDb, min_task_us: float) -> List[Tuple[Any, ...]]:
    """COMMUNICATION_OP rows as HCCL tasks (kernel_details lists each collective as one HCCL row)."""
    if not db.has("communication_op", "start_ns", "end_ns"):
        return []
    duration = (f"(({db.col('communication_op', 'end_ns', 'o')} - {db.col('communication_op', 'start_ns', 'o')})"
                f" / {NS_PER_US})")
    op_type = db.col("communication_op", "op_type", "o") if db.has("communication_op", "op_type") else "''"
    device = (f"CAST({db.col('communication_op', 'device_id', 'o')} AS TEXT)"
              if db.has("communication_op", "device_id") else "''")
    step = _step_expression(db, db.col("communication_op", "start_ns", "o"))
    sql = (f"SELECT {device}, {step}, 'HCCL', {op_type}, 0.0, -1.0, '', {duration} >= ?, -1, '', COUNT(*), "
           f"SUM({duration}), MAX({duration}), 0.0, 0.0 FROM {db.name('communication_op')} o "
           "GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10")
    grouped = list(db.rows(sql, [float(min_task_us)]))
    text = strings_of(db, [row[3] for row in grouped])
    return [(*row[:3], text.get(row[3], "") if isinstance(row[3], int) else str(row[3] or ""), *row[4:])
            for row in grouped]


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
