"""Profiling .db exports built from the real CSV/JSON samples of one run, in the real schema (CONSTRUCTED).

Real exports exist (tests/data/samples/prof_db, from Ascend/msinsight) but not of the same run as a text export,
so the tests also build them: the rows are the real samples' rows (tests/data/samples/logs), the tables and
columns are the ones torch_npu and msprof write (torch_npu profiler/analysis/prof_common_func/_constant.py
TableColumnsManager @ d41eb70909f51a60c72ff637de687aabb5546609; msprof docs profile_data_file_references_db.md
@ 4bb660cb054cc6a13b0beccf2e16f5a979385f45; the real msinsight exports' CREATE TABLEs): strings in STRING_IDS,
times in ns, memory in bytes, COMPUTE_TASK_INFO keyed by globalTaskId, every task (collectives too) in TASK
with its device task type and TaskIndex, collectives joined by connectionId, PMU metrics one row per task and
metric in TASK_PMU_INFO under their real names, analysis.db in the CSV units. Newer spellings than the real
sample's (blockNum, opState) so both are covered. The same run laid out as text is
:func:`tests.profdirs.torch_npu_rank`, so the two can be held to the same findings.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from tests import profdirs
from tests.samples import sample_data

PMU_PREFIXES = ("aic_", "aiv_", "cube_utilization", "aicore_time", "aiv_time", "mac_ratio", "vec_ratio",
                "scalar_ratio", "mte1_ratio", "mte2_ratio", "mte3_ratio")

# TASK_PMU_INFO names are the op_summary columns without the unit: aic_mac_time, not aic_mac_time(us); the
# total times are aic_total_time / aiv_total_time (aicore_time(us) / aiv_time(us) in kernel_details). Real
# exports (tests/data/samples/prof_db) hold no cube_utilization(%) there: kernel_details derives it. It is
# kept here (a deviation, marked) so that PROF003 is compared between CSV and .db of one run.
PMU_NAMES = {"aicore_time(us)": "aic_total_time", "aiv_time(us)": "aiv_total_time"}
# TASK.taskType: the device's task type (STRING_IDS), as the real exports spell it.
DEVICE_TASK_TYPES = {"AI_CORE": "KERNEL_AICORE", "AI_VECTOR_CORE": "KERNEL_AIVEC", "AI_CPU": "KERNEL_AICPU",
                     "HCCL": "Notify Wait"}


def pmu_name(column: str) -> str:
    return PMU_NAMES.get(column, column if column.startswith("cube_utilization") else
                         column.replace("(us)", "").replace("(GB/s)", ""))


PROFILER_TABLES = {
    "STRING_IDS": "id INTEGER PRIMARY KEY, value TEXT",
    "ENUM_API_TYPE": "id INTEGER PRIMARY KEY, name TEXT",
    "META_DATA": "name TEXT, value TEXT",
    "TASK": "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
            "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, "
            "modelId INTEGER",
    "COMPUTE_TASK_INFO": "name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockNum INTEGER, mixBlockNum INTEGER, "
                         "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, "
                         "inputShapes INTEGER, outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, "
                         "attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER",
    "TASK_PMU_INFO": "globalTaskId INTEGER, name INTEGER, value NUMERIC",
    "COMMUNICATION_OP": "opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, groupName INTEGER, "
                        "opId INTEGER PRIMARY KEY, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER, "
                        "count NUMERIC, opType INTEGER, deviceId INTEGER",
    "STEP_TIME": "id INTEGER, startNs INTEGER, endNs INTEGER",
    "MEMORY_RECORD": "component INTEGER, timestamp INTEGER, totalAllocated INTEGER, totalReserved INTEGER, "
                     "totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER",
    "OP_MEMORY": "name INTEGER, size INTEGER, allocationTime INTEGER, releaseTime INTEGER, activeReleaseTime INTEGER, "
                 "duration INTEGER, activeDuration INTEGER, allocationTotalAllocated INTEGER, "
                 "allocationTotalReserved INTEGER, allocationTotalActive INTEGER, releaseTotalAllocated INTEGER, "
                 "releaseTotalReserved INTEGER, releaseTotalActive INTEGER, streamPtr INTEGER, deviceId INTEGER",
    "CANN_API": "startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER, connectionId INTEGER PRIMARY KEY, "
                "name INTEGER",
    "PYTORCH_API": "startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER, "
                   "sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, "
                   "callchainId INTEGER, type INTEGER",
    "GC_RECORD": "startNs INTEGER, endNs INTEGER, globalTid INTEGER",
    "AICORE_FREQ": "deviceId INTEGER, timestampNs NUMERIC, freq INTEGER",
}
ANALYSIS_TABLES = {
    "StepTraceTime": "deviceId INTEGER, step TEXT, computing NUMERIC, communication_not_overlapped NUMERIC, "
                     "overlapped NUMERIC, communication NUMERIC, free NUMERIC, stage NUMERIC, bubble NUMERIC, "
                     "communication_not_overlapped_and_exclude_receive NUMERIC, preparing NUMERIC",
    "CommAnalyzerBandwidth": "hccl_op_name TEXT, group_name TEXT, transport_type TEXT, transit_size NUMERIC, "
                             "transit_time NUMERIC, bandwidth NUMERIC, large_packet_ratio NUMERIC, "
                             "package_size NUMERIC, count NUMERIC, total_duration NUMERIC, step TEXT, type TEXT",
}
API_TYPES = {"acl": 20000, "model": 15000, "node": 10000, "communication": 5500, "runtime": 5000, "op": 50001}


class Strings:
    def __init__(self) -> None:
        self.ids: Dict[str, int] = {}

    def __call__(self, value: Optional[str]) -> Optional[int]:
        if value is None:
            return None
        return self.ids.setdefault(value, len(self.ids) + 1)


def rows_of(sample: str) -> Tuple[List[str], List[List[str]]]:
    """Header and the rows with a full set of cells (what the CSV readers read) of a real CSV sample."""
    records = list(csv.reader(io.StringIO(sample_data(sample).decode("utf-8"))))
    return records[0], [r for r in records[1:] if len(r) == len(records[0])]


def _number(text: str) -> Optional[float]:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None


def create(path: Path, tables: Dict[str, str]) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    for name, columns in tables.items():
        conn.execute(f"CREATE TABLE {name} ({columns})")
    return conn


def write_profiler_db(path: Path, kernel: str = "prof_kernel_details_memory_metrics.csv",
                      extras: bool = True, host: Optional[Dict[str, Any]] = None, rows_to: int = 0) -> Path:
    """ascend_pytorch_profiler_N.db holding the kernel table (and memory, host events) of the samples;
    ``rows_to``: the sample's rows repeated to that many tasks (the benchmark's table of the same size)."""
    conn = create(path, PROFILER_TABLES)
    sid = Strings()
    header, rows = rows_of(kernel)
    at = {name: index for index, name in enumerate(header)}
    pmu = [name for name in header if name.lower().startswith(PMU_PREFIXES)]
    steps: Dict[int, List[int]] = {}
    tasks: List[Tuple[Any, ...]] = []
    infos: List[Tuple[Any, ...]] = []
    pmus: List[List[Tuple[int, float]]] = []
    comms: Dict[int, Tuple[Any, ...]] = {}   # sample row -> its COMMUNICATION_OP values
    for number, row in enumerate(rows):
        cell = dict(zip(header, row))
        start = round(float(cell["Start Time(us)"]) * 1000)
        end = start + round(float(cell["Duration(us)"]) * 1000)
        step = _number(cell.get("Step Id", ""))
        if step is not None:
            steps.setdefault(int(step), []).extend([start, end])
        if cell["Accelerator Core"] == "HCCL":
            comms[number] = (sid(cell["Name"]), start, end, sid("group0"), sid(cell["Type"]))
            tasks.append((start, end, _number(cell.get("Stream ID", "")), sid(DEVICE_TASK_TYPES["HCCL"])))
            infos.append(())
            pmus.append([])
            continue
        block = _number(cell.get("Block Dim", ""))
        mix = _number(cell.get("Mix Block Dim", ""))
        state = cell["OP State"] if "OP State" in at else "N/A"
        core = cell["Accelerator Core"]
        tasks.append((start, end, _number(cell.get("Stream ID", "")), sid(DEVICE_TASK_TYPES.get(core, core))))
        infos.append((sid(cell["Name"]), None if block is None else int(block), None if mix is None else int(mix),
                      sid(cell["Accelerator Core"]), sid(cell["Type"]), sid(cell.get("Input Data Types", "")),
                      sid(state), sid(cell.get("Input Shapes", "")), sid(cell.get("Output Shapes", ""))))
        pmus.append([(sid(pmu_name(name)), value) for name in pmu for value in [_number(cell[name])]
                     if value is not None])
    total = rows_to or len(rows)

    def repeated() -> Iterator[int]:
        return (number % len(rows) for number in range(total))

    # Every task in TASK (the collectives' too, joined to COMMUNICATION_OP by connectionId, as the real exports
    # and msprof-analyze's advisor do); compute tasks have a COMPUTE_TASK_INFO row by globalTaskId.
    conn.executemany("INSERT INTO TASK (startNs, endNs, deviceId, connectionId, globalTaskId, globalPid, taskType, "
                     "contextId, streamId, taskId, modelId) VALUES (?, ?, 0, ?, ?, 1, ?, 4294967295, ?, ?, "
                     "4294967295)",
                     ((*tasks[i][:2], gid, gid, tasks[i][3], tasks[i][2], gid % 65536)
                      for gid, i in enumerate(repeated(), 1)))
    conn.executemany("INSERT INTO COMPUTE_TASK_INFO (name, globalTaskId, blockNum, mixBlockNum, taskType, opType, "
                     "inputDataTypes, opState, inputShapes, outputShapes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     ((infos[i][0], gid, *infos[i][1:]) for gid, i in enumerate(repeated(), 1) if infos[i]))
    conn.executemany("INSERT INTO TASK_PMU_INFO VALUES (?, ?, ?)",
                     ((gid, name, value) for gid, i in enumerate(repeated(), 1) for name, value in pmus[i]))
    conn.executemany("INSERT INTO COMMUNICATION_OP (opName, startNs, endNs, connectionId, groupName, opId, opType, "
                     "deviceId) VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
                     ((*comms[i][:3], gid, comms[i][3], gid, comms[i][4])
                      for gid, i in enumerate(repeated(), 1) if i in comms))
    for step, times in steps.items():
        conn.execute("INSERT INTO STEP_TIME VALUES (?, ?, ?)", (step, min(times), max(times)))
    if extras:
        _memory(conn, sid)
        _trace_host_events(conn, sid)
    for name, value in (host or {}).items():
        _host(conn, sid, name, value)
    conn.executemany("INSERT INTO ENUM_API_TYPE VALUES (?, ?)", [(v, k) for k, v in API_TYPES.items()])
    conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(i, v) for v, i in sid.ids.items()])
    conn.execute("INSERT INTO META_DATA VALUES ('SCHEMA_VERSION', '1.0.2')")
    conn.execute("CREATE INDEX TaskIndex ON TASK (startNs, globalTaskId)")
    conn.commit()
    conn.close()
    return path


def _memory(conn: sqlite3.Connection, sid: Strings) -> None:
    header, rows = rows_of("prof_memory_record_torch_npu.csv")
    for row in rows:
        cell = dict(zip(header, row))
        allocated = _number(cell["Total Allocated(MB)"])
        conn.execute("INSERT INTO MEMORY_RECORD (component, timestamp, totalAllocated, totalReserved, deviceId) "
                     "VALUES (?, ?, ?, ?, 0)", (sid(cell["Component"]), round(float(cell["Timestamp(us)"]) * 1000),
                                                None if allocated is None else round(allocated * 1048576),
                                                round(float(cell["Total Reserved(MB)"]) * 1048576)))
    header, rows = rows_of("prof_operator_memory_torch_npu.csv")
    for row in rows:
        cell = dict(zip(header, row))
        conn.execute("INSERT INTO OP_MEMORY (name, size, deviceId) VALUES (?, ?, 0)",
                     (sid(cell["Name"]), round(float(cell["Size(KB)"]) * 1024)))


def _trace_host_events(conn: sqlite3.Connection, sid: Strings) -> None:
    """The host events of the run's trace_view.json (the text layout's) as CANN_API / PYTORCH_API / GC_RECORD /
    AICORE_FREQ rows: ``AscendCL@x`` is an acl API named x, ``Node@x`` a node API, the rest framework calls."""
    prefixes = {"AscendCL@": "acl", "Runtime@": "runtime", "Node@": "node", "Model@": "model"}
    for event in json.loads(sample_data("prof_trace_view_excerpt.json")):
        args = event.get("args") or {}
        start = round(float(event.get("ts", 0)) * 1000)
        if event.get("ph") == "C" and event.get("name") == "AI Core Freq":
            conn.execute("INSERT INTO AICORE_FREQ VALUES (0, ?, ?)", (start, args.get("MHz")))
        if event.get("ph") != "X" or "Task Type" in args:
            continue
        end = start + round(float(event.get("dur", 0)) * 1000)
        name = str(event.get("name", ""))
        if str(event.get("cat", "")).lower() == "gc":
            conn.execute("INSERT INTO GC_RECORD VALUES (?, ?, 1)", (start, end))
            continue
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        if prefix is not None:
            conn.execute("INSERT INTO CANN_API (startNs, endNs, type, name) VALUES (?, ?, ?, ?)",
                         (start, end, API_TYPES[prefixes[prefix]], sid(name[len(prefix):])))
        else:
            conn.execute("INSERT INTO PYTORCH_API (startNs, endNs, name, type) VALUES (?, ?, ?, 50001)",
                         (str(start), str(end), sid(name)))


def _host(conn: sqlite3.Connection, sid: Strings, kind: str, value: Any) -> None:
    """Host events a test asks for: gc (durations us), dataloader ((name, us) pairs), syncbn (count),
    launch_sync (list of "L"/"S" in time order), freq ((time us, MHz) pairs)."""
    start = 1_695_115_379_000_000_000
    if kind == "gc":
        for duration in value:
            conn.execute("INSERT INTO GC_RECORD VALUES (?, ?, 1)", (start, start + round(duration * 1000)))
            start += round(duration * 1000) + 1000
    elif kind in ("dataloader", "syncbn"):
        items = value if kind == "dataloader" else [("SyncBatchNorm", 50.0)] * int(value)
        for name, duration in items:
            conn.execute("INSERT INTO PYTORCH_API (startNs, endNs, name, type) VALUES (?, ?, ?, 50001)",
                         (str(start), str(start + round(duration * 1000)), sid(name)))
            start += round(duration * 1000) + 1000
    elif kind == "launch_sync":
        for letter in value:
            name, api = ("launch", API_TYPES["node"]) if letter == "L" else ("aclrtSynchronizeStream", API_TYPES["acl"])
            conn.execute("INSERT INTO CANN_API (startNs, endNs, type, name) VALUES (?, ?, ?, ?)",
                         (start, start + 5000, api, sid(name)))
            start += 10_000
    elif kind == "freq":
        for time_us, mhz in value:
            conn.execute("INSERT INTO AICORE_FREQ VALUES (0, ?, ?)", (round(time_us * 1000), mhz))


def write_analysis_db(path: Path) -> Path:
    """analysis.db: step_trace_time.csv as StepTraceTime, communication.json as CommAnalyzerBandwidth."""
    conn = create(path, ANALYSIS_TABLES)
    header, rows = rows_of("prof_step_trace_time_single_rank.csv")
    for row in rows:
        cell = dict(zip(header, row))
        conn.execute("INSERT INTO StepTraceTime (deviceId, step, computing, communication_not_overlapped, "
                     "overlapped, communication, free, stage, bubble) VALUES (0, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (cell["Step"], *(float(cell[c]) for c in ("Computing", "Communication(Not Overlapped)",
                                                               "Overlapped", "Communication", "Free", "Stage",
                                                               "Bubble"))))
    data = json.loads(sample_data("prof_communication_json_torch_npu.json"))
    for step, op, transport, values in _bandwidth(data):
        kind, name = op
        conn.execute("INSERT INTO CommAnalyzerBandwidth (hccl_op_name, group_name, transport_type, transit_size, "
                     "transit_time, bandwidth, step, type) VALUES (?, '', ?, ?, ?, ?, ?, ?)",
                     (name, transport, values.get("Transit Size(MB)", 0), values.get("Transit Time(ms)", 0),
                      values.get("Bandwidth(GB/s)", 0), step, kind))
    conn.commit()
    conn.close()
    return path


def _bandwidth(data: Dict[str, Any]) -> Iterator[Tuple[str, Tuple[str, str], str, Dict[str, Any]]]:
    for step, kinds in data.items():
        for kind, ops in kinds.items():
            for name, op in ops.items():
                for transport, values in (op.get("Communication Bandwidth Info") or {}).items():
                    yield step, (kind, name), transport, values


def torch_npu_db_rank(root: Path, rank: Optional[int], kernel: str = "prof_kernel_details_memory_metrics.csv",
                      extras: bool = True, host: Optional[Dict[str, Any]] = None) -> Path:
    """The run of :func:`tests.profdirs.torch_npu_rank` exported with ``export_type=db``."""
    pt = root / f"localhost_{1000 + (rank or 0)}_20230628101435_ascend_pt"
    out = pt / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    write_profiler_db(out / (f"ascend_pytorch_profiler_{rank}.db" if rank is not None else
                             "ascend_pytorch_profiler.db"), kernel, extras, host)
    if extras:
        write_analysis_db(out / "analysis.db")
        profdirs.put(pt, {"profiler_metadata.json": "prof_profiler_metadata_json.json"})  # written in both modes
    profdirs.put(pt / profdirs.PROF / "device_0", {"info.json.0": "prof_msprof_device_info_json_910.json",
                                                   "start_info.0": "prof_msprof_device_start_info.json"})
    (pt / (f"profiler_info_{rank}.json" if rank is not None else "profiler_info.json")).write_text("{}")
    return pt
