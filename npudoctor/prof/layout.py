"""Finding profiling data on disk: every layout msprof and the torch_npu profiler write.

* torch_npu: ``<worker>_<ts>_ascend_pt/ASCEND_PROFILER_OUTPUT/{kernel_details,op_statistic,...}.csv`` plus
  ``communication.json``; the CANN data of the same run sits in ``PROF_*/`` beside it (read for ``info.json``
  only, so nothing is counted twice).
* msprof, CANN 8.0.RC1 and later: ``PROF_*/mindstudio_profiler_output/<table>_<timestamp>.csv`` (all devices in
  one file, told apart by ``Device_id``).
* msprof, CANN 7.0 and older: ``PROF_*/device_<N>/summary/<table>_<dev>_<model>_<timestamp>.csv``, and the
  ``timeline/task_time_*.json`` Chrome trace when no summary table is there.
* a single CSV file given by path (its name says which table it is).

Each place found is one :class:`Source`: one rank or device, or one msprof collection holding several devices.
Symbolic links are not followed, named or met while walking (a loop or a link to ``/`` cannot run away with the
walk; the one link rule: :mod:`npudoctor.model.inputs`).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from npudoctor.model.inputs import NAMED_LINK, WALKED_LINK, is_named_link
from npudoctor.parsers import jsondoc
from npudoctor.prof.columns import TABLES, column_map

TORCH_OUTPUT = "ASCEND_PROFILER_OUTPUT"
MSPROF_OUTPUT = "mindstudio_profiler_output"
MAX_DEPTH = 8
#: Profiling sources analysed in one run (each costs ~20 ms and ~0.4 MiB even when tiny: 100,000 rank folders
#: ran past 10 minutes and 1.5 GB); more are said to be left out. Larger clusters: analyse
#: msprof-analyze's cluster_analysis_output, or a narrower folder.
MAX_SOURCES = 512
#: Folders looked at while walking one path (a tree of a million empty folders must not run away).
MAX_FOLDERS = 100_000
MAX_JSON_BYTES = 256 << 20
# <table>[_slice_N][_<dev>][_<model>][_<timestamp>].csv
TABLE_FILE = re.compile(r"^(?P<stem>[A-Za-z_]+?)(?:_slice_\d+)?(?:_\d+)*\.csv$")
PROF_DIR = re.compile(r"^PROF_\d+_\d+_\w+$|^PROF_")
DEVICE_DIR = re.compile(r"^device_(\d+)$")
INFO_JSON = re.compile(r"^info\.json(?:\.\d+)?$")
TIMELINE_TASKS = re.compile(r"^task_time_[\d_]*\.json$")
HCCL_TIMELINE = re.compile(r"^hccl_[\d_]*\.json$")   # legacy msprof: the HCCL tasks (transfers) of a device
# Whole-run Chrome traces: read for the device tasks only when no kernel table or task_time timeline is there.
TRACE_FILE = re.compile(r"^trace_view\.json$|^msprof(?:_\d+)*\.json$")
RANK_IN_NAME = re.compile(r"^profiler_info_(\d+)\.json$")
# The graph GE built (DUMP_GE_GRAPH=2: ge_proto_00000123_graph_1_Build.txt), beside the profile when copied
# there; msprof-analyze's graph-fusion advice reads the last one (PROF026).
GE_GRAPH_DUMP = re.compile(r"^ge_proto_.*_Build\.txt$")


@dataclass
class Source:
    """One place holding profiling tables: a torch_npu rank, an msprof collection, or a legacy device folder."""

    label: str
    root: str
    layout: str  # "torch_npu" | "msprof" | "msprof-legacy" | "file"
    tables: Dict[str, List[str]] = field(default_factory=dict)  # table -> CSV paths (slices in order)
    communication: List[str] = field(default_factory=list)       # communication.json files
    timelines: List[str] = field(default_factory=list)           # legacy task_time_*.json
    traces: List[str] = field(default_factory=list)              # trace_view.json / msprof_*.json
    hccl: List[str] = field(default_factory=list)                # legacy timeline/hccl_*.json
    databases: List[str] = field(default_factory=list)           # profiler .db exports (torch_npu, msprof)
    analysis_dbs: List[str] = field(default_factory=list)        # torch_npu analysis.db
    unused: List[str] = field(default_factory=list)              # files seen that no check reads (listed)
    graphs: List[str] = field(default_factory=list)              # GE graph dumps (ge_proto_*_Build.txt)
    devices: Dict[str, Dict[str, object]] = field(default_factory=dict)  # device id -> info.json facts
    environment: Dict[str, str] = field(default_factory=dict)    # profiler_metadata.json ENV_VARIABLES
    pp_ranks: List[int] = field(default_factory=list)            # ... its pipeline group's ranks, in stage order
    rank: Optional[int] = None
    problems: List[str] = field(default_factory=list)

    def core_count(self, device: Optional[str] = None) -> Tuple[Optional[int], Optional[int]]:
        """(AI Core count, AI Vector core count) from info.json, for ``device`` or the only device known."""
        infos = [self.devices[device]] if device in self.devices else list(self.devices.values())
        if len(infos) != 1 and len({(i.get("ai_core_num"), i.get("aiv_num")) for i in infos}) != 1:
            return None, None
        info = infos[0]
        return _int(info.get("ai_core_num")), _int(info.get("aiv_num"))


def _int(value: object) -> Optional[int]:
    try:
        number = int(str(value))
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


_STEMS: Dict[str, str] = {}


def table_of(file_name: str) -> Optional[str]:
    """Which table a CSV file name holds (``op_summary_20240101123456.csv`` -> ``kernel_details``)."""
    if not _STEMS:
        for table in TABLES:
            for stem in column_map(table).files:
                _STEMS[stem.lower()] = table
    match = TABLE_FILE.match(file_name)
    if not match:
        return None
    return _STEMS.get(match.group("stem").lower())


# A CSV named like no table is known by its header row: it has the columns that make the table what it is
# (PMU ratios alone are `msprof op`'s per-block files too), and more of the table's columns than of another's.
IDENTIFYING_COLUMNS = {
    "kernel_details": ("op_name", "op_type", "duration_us"),
    "op_statistic": ("op_type", "count", "total_us"),
    "step_trace_time": ("step", "computing_us", "communication_us"),
    "memory_record": ("component", "timestamp_us", "allocated_mb"),
    "operator_memory": ("name", "size_kb", "alloc_allocated_mb"),
    "api_statistic": ("api_name", "total_us", "count"),
}
HEADER_BYTES = 64 * 1024


def table_by_header(path: str) -> Optional[str]:
    """The table a CSV file holds, by the columns of its header row, else None (not a regular file, no
    header a table claims)."""
    import csv

    from npudoctor.prof.columns import resolve

    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            head = handle.read(HEADER_BYTES)
    except OSError:
        return None
    first = head.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
    try:
        header = tuple(next(csv.reader([first])))
    except (csv.Error, StopIteration):
        return None
    scores = []
    for table, identifying in IDENTIFYING_COLUMNS.items():
        resolved = resolve(header, column_map(table))
        if resolved.has(*identifying):
            scores.append((len(resolved.found), table))
    scores.sort(reverse=True)
    if not scores or (len(scores) > 1 and scores[0][0] == scores[1][0]):
        return None
    return scores[0][1]


def _listdir(path: str, problems: List[str]) -> List[str]:
    """The names in the folder ``path``, symbolic links left out (and said): a table or folder is never read
    through a link (one to /proc/self/pagemap or to a file outside the profile would be read as a table)."""
    try:
        with os.scandir(path) as entries:
            names = []
            for entry in entries:
                if entry.is_symlink():
                    problems.append(f"{os.path.join(path, entry.name)}: {WALKED_LINK}")
                else:
                    names.append(entry.name)
    except OSError as exc:
        problems.append(f"{path}: {exc.strerror or exc}")
        return []
    return sorted(names)


def _is_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


# Files the profilers write beside the tables that no check reads: listed in the output as seen, not used.
# communication_matrix.json: per link pair, the same transfers communication.json has per operator (PROF010
# reads those); npu_module_mem.csv / static_op_mem.csv: memory per CANN module / static graph operator.
UNUSED_FILES = re.compile(r"^(?:cluster_)?communication_matrix\.json$|^npu_module_mem(?:_\d+)*\.csv$|"
                          r"^static_op_mem(?:_\d+)*\.csv$")


def add_file(source: Source, path: str) -> bool:
    """File one profiling file of a folder (or given by path) into ``source``; False when it is no known one."""
    name = os.path.basename(path)
    table = table_of(name) if name.endswith(".csv") else None
    db_kind = _db_kind(name)
    if table is not None:
        source.tables.setdefault(table, []).append(path)
    elif name in ("communication.json", "cluster_communication.json"):
        source.communication.append(path)
    elif TRACE_FILE.match(name):
        source.traces.append(path)
    elif db_kind == "profiler":
        source.databases.append(path)
    elif db_kind == "analysis":
        source.analysis_dbs.append(path)
    elif UNUSED_FILES.match(name):
        source.unused.append(path)
    elif GE_GRAPH_DUMP.match(name):
        source.graphs.append(path)
    else:
        return False
    return True


def _add_tables(source: Source, folder: str, problems: List[str]) -> None:
    for name in _listdir(folder, problems):
        add_file(source, os.path.join(folder, name))


def _read_json(path: str, problems: List[str]) -> Optional[object]:
    try:
        if not os.path.isfile(path):
            problems.append(f"{path}: not a regular file")
            return None
        if os.path.getsize(path) > MAX_JSON_BYTES:
            problems.append(f"{path}: larger than {MAX_JSON_BYTES >> 20} MiB, not read")
            return None
        with open(path, "rb") as handle:
            return jsondoc.loads(handle.read().decode("utf-8", errors="replace"), path)
    except jsondoc.JsonDocumentError as exc:
        problems.append(f"{path}: not readable JSON ({str(exc)[len(path) + 2:][:120]})")
        return None
    except OSError as exc:
        problems.append(f"{path}: not readable JSON ({str(exc).splitlines()[0][:120]})")
        return None


def _add_device_info(source: Source, prof_dir: str, problems: List[str]) -> None:
    """info.json.N of every device_N under a PROF_* folder: AI Core / vector core counts, rank id."""
    for name in _listdir(prof_dir, problems):
        match = DEVICE_DIR.match(name)
        folder = os.path.join(prof_dir, name)
        if not match or not _is_dir(folder):
            continue
        for entry in _listdir(folder, problems):
            if INFO_JSON.match(entry):
                data = _read_json(os.path.join(folder, entry), problems)
                if isinstance(data, dict):
                    facts: Dict[str, object] = {}
                    device_info = data.get("DeviceInfo")
                    if isinstance(device_info, list) and device_info and isinstance(device_info[0], dict):
                        facts.update(device_info[0])
                    if "rank_id" in data:
                        facts["rank_id"] = data["rank_id"]
                    source.devices[match.group(1)] = facts
                break


def recorded_environment(variables: object) -> Dict[str, str]:
    """The ENV_VARIABLES object the profiler recorded (profiler_metadata.json, or a .db's META_DATA), bounded."""
    if not isinstance(variables, dict):
        return {}
    return {str(k)[:64]: str(v)[:256] for k, v in list(variables.items())[:256] if isinstance(v, (str, int, float))}


def _torch_source(root: str, problems: List[str]) -> Source:
    source = Source(label=os.path.basename(root.rstrip("/")) or root, root=root, layout="torch_npu")
    _add_tables(source, os.path.join(root, TORCH_OUTPUT), problems)
    for name in _listdir(root, problems):
        match = RANK_IN_NAME.match(name)
        if match:
            source.rank = int(match.group(1))
        if GE_GRAPH_DUMP.match(name):
            source.graphs.append(os.path.join(root, name))
        if name == "profiler_metadata.json":
            metadata = _read_json(os.path.join(root, name), problems)
            source.environment = recorded_environment(
                metadata.get("ENV_VARIABLES") if isinstance(metadata, dict) else None)
            source.pp_ranks = _pipeline_group(metadata)
        if PROF_DIR.match(name) and _is_dir(os.path.join(root, name)):
            _add_device_info(source, os.path.join(root, name), problems)
    if source.rank is None:
        ranks = {_int(str(d.get("rank_id"))) for d in source.devices.values()} - {None}
        if len(ranks) == 1:
            source.rank = ranks.pop()
    if source.rank is not None:
        source.label = f"rank {source.rank}"
    return source


MAX_GROUP = 65_536


def _pipeline_group(metadata: object) -> List[int]:
    """The global ranks of the profiled rank's pipeline-parallel group, in stage order (profiler_metadata.json
    ``parallel_group_info``: the group named ``pp`` holding ``distributed_args.rank``); [] when not there."""
    if not isinstance(metadata, dict):
        return []
    args = metadata.get("distributed_args")
    rank = args.get("rank") if isinstance(args, dict) else None
    groups = metadata.get("parallel_group_info")
    if not isinstance(rank, int) or isinstance(rank, bool) or not isinstance(groups, dict):
        return []
    for group in list(groups.values())[:4096]:
        if not isinstance(group, dict) or group.get("group_name") != "pp":
            continue
        members = group.get("global_ranks")
        if isinstance(members, list) and len(members) <= MAX_GROUP:
            ranks = [m for m in members if isinstance(m, int) and not isinstance(m, bool)]
            if rank in ranks and len(ranks) == len(members):
                return ranks
    return []


def _msprof_source(prof_dir: str, problems: List[str]) -> Source:
    source = Source(label=os.path.basename(prof_dir.rstrip("/")), root=prof_dir, layout="msprof")
    if _is_dir(os.path.join(prof_dir, MSPROF_OUTPUT)):
        _add_tables(source, os.path.join(prof_dir, MSPROF_OUTPUT), problems)
    names = _listdir(prof_dir, problems)
    source.databases.extend(os.path.join(prof_dir, n) for n in names if _is_msprof_db(n))
    source.graphs.extend(os.path.join(prof_dir, n) for n in names if GE_GRAPH_DUMP.match(n))
    analyze = os.path.join(prof_dir, "analyze")
    if _is_dir(analyze):
        _add_tables(source, analyze, problems)
    _add_device_info(source, prof_dir, problems)
    return source


def _db_kind(name: str) -> Optional[str]:
    """:func:`npudoctor.prof.database.kind_of` for a ``.db`` name, else None without importing that module (a CSV
    folder never loads the .db reader)."""
    if not name.endswith(".db"):
        return None
    from npudoctor.prof.database import kind_of

    return kind_of(name)


def _is_msprof_db(name: str) -> bool:
    return name.startswith("msprof_") and _db_kind(name) == "profiler"


def _legacy_sources(prof_dir: str, problems: List[str]) -> List[Source]:
    sources = []
    for name in _listdir(prof_dir, problems):
        match = DEVICE_DIR.match(name)
        folder = os.path.join(prof_dir, name)
        if not match or not _is_dir(folder):
            continue
        source = Source(label=f"{os.path.basename(prof_dir.rstrip('/'))}/{name}", root=folder,
                        layout="msprof-legacy")
        if _is_dir(os.path.join(folder, "summary")):
            _add_tables(source, os.path.join(folder, "summary"), problems)
        timeline = os.path.join(folder, "timeline")
        if _is_dir(timeline):
            names = _listdir(timeline, problems)
            source.timelines = [os.path.join(timeline, n) for n in names if TIMELINE_TASKS.match(n)]
            source.traces = [os.path.join(timeline, n) for n in names if TRACE_FILE.match(n)]
            source.hccl = [os.path.join(timeline, n) for n in names if HCCL_TIMELINE.match(n)]
        _add_device_info(source, prof_dir, problems)
        source.devices = {k: v for k, v in source.devices.items() if k == match.group(1)}
        rank = source.devices.get(match.group(1), {}).get("rank_id")
        if _int(str(rank)) is not None or str(rank) == "0":
            source.rank = int(str(rank))
            source.label += f" (rank {source.rank})"
        if source.tables or source.timelines or source.traces:
            sources.append(source)
    return sources


def discover(paths: List[str]) -> Tuple[List[Source], List[str]]:
    """Every profiling source under ``paths`` (files or directories), and the problems met on the way."""
    sources: List[Source] = []
    problems: List[str] = []
    seen = set()
    for path in paths:
        if not os.path.exists(path):
            problems.append(f"{path}: no such file or directory")
            continue
        if is_named_link(path):  # never through a link, a folder's either (the one link rule)
            problems.append(f"{path}: {NAMED_LINK}")
            continue
        if not os.path.isdir(path):
            table = table_of(os.path.basename(path)) or _db_kind(os.path.basename(path))
            source = Source(label=os.path.basename(path), root=os.path.dirname(path) or ".", layout="file")
            by_header = table_by_header(path) if table is None else None
            if by_header is not None:  # a kernel_details.csv saved as mine.csv: known by its header row
                source.tables.setdefault(by_header, []).append(path)
            elif table is None:
                problems.append(f"{path}: neither its name nor its header row is a profiling table's")
                continue
            else:
                add_file(source, path)
            sources.append(source)
            continue
        top = os.path.normpath(path)  # paths are shown as the user gave them (relative stays relative)
        if os.path.basename(os.path.abspath(top)) in (TORCH_OUTPUT, MSPROF_OUTPUT):
            top = os.path.normpath(os.path.join(top, os.pardir))  # the folder the tool made, not its output
        found = _walk(top, problems, MAX_SOURCES + 1 - len(sources))
        for source in found:
            if os.path.abspath(source.root) not in seen:
                seen.add(os.path.abspath(source.root))
                sources.append(source)
        if len(sources) > MAX_SOURCES:
            del sources[MAX_SOURCES:]
            problems.append(f"more than {MAX_SOURCES} profiling sources (ranks, devices, table folders): only the "
                            f"first {MAX_SOURCES} in folder order are analysed; give a narrower folder, or "
                            "msprof-analyze's cluster_analysis_output")
            break
    return sources, problems


def _walk(top: str, problems: List[str], room: int = MAX_SOURCES + 1) -> List[Source]:
    """The sources under ``top`` in folder order, at most ``room`` of them."""
    sources: List[Source] = []
    stack = [(top, 0)]
    visited = 0
    while stack and len(sources) < room:
        folder, depth = stack.pop()
        visited += 1
        if visited > MAX_FOLDERS:
            problems.append(f"{top}: more than {MAX_FOLDERS} folders; the walk stopped there")
            break
        names = _listdir(folder, problems)
        if TORCH_OUTPUT in names and _is_dir(os.path.join(folder, TORCH_OUTPUT)):
            sources.append(_torch_source(folder, problems))
            continue  # its PROF_* holds the same run's raw data
        if PROF_DIR.match(os.path.basename(folder)):
            if (MSPROF_OUTPUT in names and _is_dir(os.path.join(folder, MSPROF_OUTPUT))) or any(
                    _is_msprof_db(n) for n in names):
                sources.append(_msprof_source(folder, problems))
            else:
                sources.extend(_legacy_sources(folder, problems))
            continue
        if any((name.endswith(".csv") and table_of(name)) or _db_kind(name)
               for name in names):
            # Tables copied into a plain folder (or msprof-analyze's cluster_analysis_output).
            source = Source(label=os.path.basename(folder) or folder, root=folder, layout="folder")
            _add_tables(source, folder, problems)
            sources.append(source)
        if depth >= MAX_DEPTH:
            continue
        for name in reversed(names):
            child = os.path.join(folder, name)
            if _is_dir(child):
                stack.append((child, depth + 1))
    sources.sort(key=lambda s: (s.rank if s.rank is not None else 1 << 30, s.root))
    return sources
