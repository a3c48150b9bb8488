"""A source whose profile is a ``.db`` export, read into the same Rank figures the CSV readers give."""

from __future__ import annotations

from typing import Any, List, Set

from npudoctor.prof.columns import column_map
from npudoctor.prof.layout import Source, recorded_environment
from npudoctor.prof.model import Rank
from npudoctor.prof.tables import TableError

CUBE_SPELLINGS = ("cube_utilization(%)", "Cube Utilization(%)")


def read_databases(rank: Rank, source: Source, min_task_us: float, bound_ratio: float, steps: int,
                   idle_min_us: float) -> None:
    """Fill ``rank`` from the source's profiler .db files (kernel groups, memory, host APIs, host timeline)
    and analysis.db (step trace, link bandwidth). A file that cannot be read is one problem line."""
    import pandas as pd

    from npudoctor.prof import database, opstats
    from npudoctor.prof.kernels import KEYS, KernelStats, _combine, last_steps
    from npudoctor.prof.timeline import NODE_LAUNCH, SYNC_STREAM, HostTimeline

    cmap = column_map("kernel_details")
    ratio_spellings = {name: cmap.spellings.get(name, (name,)) for name in cmap.groups.get("pipe_ratios", ())}
    parts: List[Any] = []
    columns: List[str] = []
    extra: List[str] = []
    read: List[str] = []
    timeline = HostTimeline()
    op_state_values: Set[str] = set()
    shapes: List[Any] = []
    sequence: Any = None
    for path in source.databases:
        try:
            with database.ProfileDb(path) as db:
                rows, facts = database.kernel_groups(db, min_task_us, bound_ratio, ratio_spellings, CUBE_SPELLINGS)
                if rows:
                    frame = pd.DataFrame.from_records(rows, columns=[*KEYS, "n", "dur_sum", "dur_max", "cube_wsum",
                                                                     "cube_dur"])
                    frame["long"] = frame["long"].astype(bool)
                    parts.append(frame)
                    columns.extend(c for c in facts["columns"] if c not in columns)
                    extra.extend(c for c in facts.get("extra_columns", []) if c not in extra)
                    op_state_values.update(str(v).lower() for v in frame["op_state"].unique())
                if facts.get("shapes") is not None:
                    shapes.append(facts["shapes"])
                sequence = sequence if sequence is not None else facts.get("sequence")
                peaks = database.memory_peaks(db)
                if peaks:
                    rank.memory["peaks"] = peaks
                    rank.memory["largest_allocations"] = database.largest_allocations(db)
                rank.host_apis = database.host_apis(db) or rank.host_apis
                if not source.environment:  # profiler_metadata.json wins when it is beside the .db
                    source.environment = recorded_environment(database.recorded_environment(db))
                _read_timeline(db, timeline, SYNC_STREAM, NODE_LAUNCH, idle_min_us)
                read.append(path)
        except TableError as exc:
            rank.problems.append(str(exc))
    if read:
        rank.tables_read["db"] = read
    if not timeline.empty or timeline.idle_measured:
        timeline.sources = list(read)
        rank.timeline = timeline
    groups = _combine(parts)
    for name, mapping in cmap.values.items():  # cell spellings of older versions, as for the CSV
        key = {"core_type": "core", "op_type": "op_type"}.get(name)
        if key and mapping and len(groups):
            groups[key] = groups[key].astype(object).replace(mapping)
    # An OP State column that says nothing (every value N/A or empty) is no OP State: "unknown", not "static".
    if op_state_values <= {"", "n/a", "none", "nan"}:
        columns = [c for c in columns if c != "op_state"]
    shape_groups = opstats.combine_shapes(shapes)
    for name, mapping in cmap.values.items():
        if name == "core_type" and mapping and shape_groups is not None and len(shape_groups):
            shape_groups["core"] = shape_groups["core"].astype(object).replace(mapping)
    if len(groups):
        rank.kernel = KernelStats(table="db", files=list(read), columns=tuple(columns), extra_columns=tuple(extra),
                                  groups=groups, rows=int(groups["n"].sum()), shapes=shape_groups,
                                  sequence=sequence)
        rank.groups = last_steps(groups, steps)
    _read_analysis(rank, source, steps)


def _read_timeline(db: Any, timeline: Any, sync_stream: str, node_launch: str, idle_min_us: float) -> None:
    from npudoctor.prof import database
    from npudoctor.prof.timeline import OP_COMPILE, TORCH_OP_PREFIXES

    for duration in database.gc_durations(db):
        timeline.add_host("GC", "gc", 0.0, duration)
    for name, start, duration in database.framework_events(db, "dataloader"):
        timeline.add_host(name, "", start, duration)
    for name, start, duration in database.framework_events(db, "syncbatchnorm"):
        if "dataloader" not in name.lower():
            timeline.add_host(name, "", start, duration)
    for name, start, duration in database.host_events(db, (sync_stream, node_launch, OP_COMPILE)):
        timeline.add_host(name, "", start, duration)
    for start, mhz in database.aicore_freq(db):
        timeline.add_freq(start, mhz)
    for name, thread, start, duration in database.torch_ops(db, TORCH_OP_PREFIXES):
        timeline.add_torch_op(name, thread, start, duration)
    _read_idle(db, timeline, idle_min_us)
    transfers = database.transfer_tasks(db)
    for task in transfers:
        timeline.add_transfer(task, task["start"], task["dur"])
    if transfers:   # MatMul times matter only beside transfers (PROF032): the join is paid only then
        for start, duration in database.matmul_tasks(db):
            timeline.add_matmul(start, duration)


def _read_idle(db: Any, timeline: Any, min_us: float) -> None:
    """Device idle spans of at least ``min_us`` (gaps in TASK) and the host's CANN calls inside them, for
    PROF030: only the calls overlapping a long span are read, with the time the host calls cover."""
    from npudoctor.prof import database

    spans = database.idle_spans(db, max(min_us, 1000.0))
    for start, duration in spans:
        timeline.add_free(start, duration)
    if db.has("task", "start_ns", "end_ns"):
        timeline.idle_measured = True
        timeline.free_source = "gaps between the device tasks of the .db"
    bounds, calls = database.host_calls_in(db, spans)
    if bounds is not None:
        del timeline.cann_start[:], timeline.cann_dur[:]
        timeline.host_bounds = bounds
        for start, duration in calls:
            timeline.add_cann(start, duration)


def _read_analysis(rank: Rank, source: Source, steps: int) -> None:
    import pandas as pd

    from npudoctor.prof import database
    from npudoctor.prof.readers import last_steps_of_trace

    records: List[Any] = []
    read: List[str] = []
    for path in source.analysis_dbs:
        try:
            with database.ProfileDb(path) as db:
                records.extend(database.step_trace(db))
                rank.links.extend(database.links(db))
                read.append(path)
        except TableError as exc:
            rank.problems.append(str(exc))
    if records:
        rank.step_trace = last_steps_of_trace(pd.DataFrame.from_records(records), steps)
    if read:
        rank.tables_read["analysis_db"] = read
