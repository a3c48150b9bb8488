"""The per-task kernel table (kernel_details / op_summary / task_time / legacy timeline), reduced to groups.

A kernel table has one row per device task and can hold hundreds of millions of rows. It is read once, in
chunks of the needed columns, and each chunk is grouped by the few things the analyses ask about (device,
step, core type, operator type, block dim, OP State, "long" task, "no bound" task, AI CPU input dtypes);
what is kept is the group counts, time sums and maxima, so memory stays bounded by the number of groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from npudoctor.prof import opstats
from npudoctor.prof.columns import ColumnMap, Resolved, column_map
from npudoctor.prof.tables import CHUNK_ROWS, ReadNotes, TableError, iter_chunks, open_table

if TYPE_CHECKING:
    import pandas as pd

KEYS = ["device", "step", "core", "op_type", "block_dim", "mix_block_dim", "op_state", "long", "nobound", "dtypes"]
AI_CPU = "AI_CPU"
# A legacy timeline names tasks "Default/net/.../DropoutGenMask-op232": the operator type is the last part.
TIMELINE_OP = re.compile(r"(?:.*/)?(?P<type>[^/]+?)(?:-op\d+)?$")


@dataclass
class KernelStats:
    """What one source's kernel table says, grouped (see :data:`KEYS`)."""

    table: str
    files: List[str]
    columns: Sequence[str]               # canonical columns the table had
    extra_columns: Sequence[str]         # columns no map claims (kept in the file, ignored)
    groups: Any                          # pandas DataFrame: KEYS + n, dur_sum, dur_max, cube_wsum, cube_dur
    rows: int = 0
    problems: List[str] = field(default_factory=list)
    timeline: Any = None                 # HostTimeline read with the tasks (Chrome traces only)
    shapes: Any = None                   # per-shape operator groups (npudoctor.prof.opstats), None: no shapes
    sequence: Any = None                 # the first tasks in table order (npudoctor.prof.opstats), None: no start

    def has(self, *names: str) -> bool:
        return all(name in self.columns for name in names)


def _text(frame: pd.DataFrame, name: str, default: str = "") -> Any:
    import pandas as pd

    if name not in frame.columns:
        return pd.Series(default, index=frame.index, dtype=object)
    return frame[name].astype(object).where(frame[name].notna(), default)


def _group_chunk(frame: pd.DataFrame, ratio_columns: Sequence[str], min_task_us: float,
                 bound_ratio: float) -> pd.DataFrame:
    import pandas as pd

    duration = frame["duration_us"].fillna(0.0) if "duration_us" in frame.columns else pd.Series(
        0.0, index=frame.index)
    core = _text(frame, "core_type", "UNKNOWN")
    op_type = _text(frame, "op_type") if "op_type" in frame.columns else _text(frame, "op_name")
    keys = pd.DataFrame({
        "device": _text(frame, "device_id"),
        "step": frame["step_id"].fillna(-1.0) if "step_id" in frame.columns else -1.0,
        "core": core,
        "op_type": op_type,
        "block_dim": frame["block_dim"].fillna(-1.0) if "block_dim" in frame.columns else -1.0,
        "mix_block_dim": frame["mix_block_dim"].fillna(-1.0) if "mix_block_dim" in frame.columns else -1.0,
        "op_state": _text(frame, "op_state"),
        "long": duration >= min_task_us,
        "nobound": -1,
        "dtypes": "",
        "dur": duration,
        "cube_w": 0.0,
        "cube_d": 0.0,
    }, index=frame.index)
    present = [c for c in ratio_columns if c in frame.columns]
    if present:
        ratios = frame[present]
        has_data = ratios.notna().any(axis=1)
        # One value above the bar (mac, vec, scalar or an MTE pipe) makes a task "bound" by that pipe.
        bound = (ratios.fillna(0.0) > bound_ratio).any(axis=1)
        keys["nobound"] = (~bound).astype(int).where(has_data, -1)  # 1 no bound, 0 bound, -1 no PMU data
    if "input_dtypes" in frame.columns:
        keys["dtypes"] = _text(frame, "input_dtypes").where(core == AI_CPU, "")
    if "cube_utilization_pct" in frame.columns:
        cube = frame["cube_utilization_pct"]
        keys["cube_w"] = (cube * duration).fillna(0.0)
        keys["cube_d"] = duration.where(cube.notna(), 0.0)
    return keys.groupby(KEYS, sort=False, dropna=False).agg(
        n=("dur", "size"), dur_sum=("dur", "sum"), dur_max=("dur", "max"),
        cube_wsum=("cube_w", "sum"), cube_dur=("cube_d", "sum")).reset_index()


def _group_batch(batch: Any, ratio_columns: Sequence[str], min_task_us: float, bound_ratio: float) -> pd.DataFrame:
    """:func:`_group_chunk` for a pyarrow Table, computed by Arrow on the dictionary codes of the text columns
    (no per-row Python objects or strings)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    batch = batch.unify_dictionaries()
    rows = batch.num_rows
    names = set(batch.schema.names)
    lookups: Dict[str, Any] = {}  # key -> the texts of its codes (the last: an empty cell's default)

    def text(name: str, default: str, key: str = "") -> Any:
        """The codes of a text column: the group-by hashes integers, the texts are looked up after it."""
        column = batch.column(name) if name in names else None
        if column is None or not column.num_chunks or not pa.types.is_dictionary(column.type):
            if column is None:
                return pa.repeat(pa.scalar(default, pa.string()), rows)
            return pc.fill_null(pc.cast(column, pa.string()), default)
        texts = [str(v) for v in column.chunk(0).dictionary.to_pylist()]
        lookups[key] = np.array([*texts, default], dtype=object)
        return pc.fill_null(pa.chunked_array([chunk.indices for chunk in column.chunks], pa.int32()), len(texts))

    def number(name: str, default: float) -> Any:
        if name not in names:
            return pa.repeat(pa.scalar(default, pa.float64()), rows)
        return pc.fill_null(batch.column(name), default)

    duration = number("duration_us", 0.0)
    core = text("core_type", "UNKNOWN", "core")
    if "core" in lookups:
        ai_cpu = [code for code, value in enumerate(lookups["core"]) if value == AI_CPU]
        is_ai_cpu = pc.is_in(core, pa.array(ai_cpu, pa.int32()))
    else:
        is_ai_cpu = pc.equal(core, AI_CPU)
    columns = {
        "device": text("device_id", "", "device"), "step": number("step_id", -1.0), "core": core,
        "op_type": text("op_type", "", "op_type") if "op_type" in names else text("op_name", "", "op_type"),
        "block_dim": number("block_dim", -1.0), "mix_block_dim": number("mix_block_dim", -1.0),
        "op_state": text("op_state", "", "op_state"), "long": pc.greater_equal(duration, min_task_us),
    }
    present = [batch.column(c) for c in ratio_columns if c in names]
    if present:
        highest = pc.max_element_wise(*present, skip_nulls=True) if len(present) > 1 else present[0]
        bound = pc.fill_null(pc.greater(highest, bound_ratio), False)
        nobound = pc.if_else(pc.is_valid(highest), pc.if_else(bound, 0, 1), -1)
    else:
        nobound = pa.repeat(pa.scalar(-1, pa.int64()), rows)
    columns["nobound"] = nobound
    dtypes = text("input_dtypes", "", "dtypes")
    if "dtypes" in lookups:  # an empty cell and a task that is no AI CPU task both read ""
        dtypes = pc.if_else(is_ai_cpu, dtypes, pa.scalar(len(lookups["dtypes"]) - 1, pa.int32()))
    elif "input_dtypes" in names:
        dtypes = pc.if_else(is_ai_cpu, dtypes, "")
    columns["dtypes"] = dtypes
    columns["dur"] = duration
    if "cube_utilization_pct" in names:
        cube = batch.column("cube_utilization_pct")
        columns["cube_w"] = pc.fill_null(pc.multiply(cube, duration), 0.0)
        columns["cube_d"] = pc.if_else(pc.is_valid(cube), duration, 0.0)
    else:
        columns["cube_w"] = columns["cube_d"] = pa.repeat(pa.scalar(0.0, pa.float64()), rows)
    table = pa.table(columns)
    grouped = table.group_by(KEYS, use_threads=False).aggregate(
        [("dur", "count"), ("dur", "sum"), ("dur", "max"), ("cube_w", "sum"), ("cube_d", "sum")])
    frame = grouped.to_pandas()
    for key, lookup in lookups.items():
        frame[key] = lookup[frame[key].to_numpy(dtype=np.int64)]
    return frame.rename(columns={"dur_count": "n", "dur_sum": "dur_sum", "dur_max": "dur_max",
                                 "cube_w_sum": "cube_wsum", "cube_d_sum": "cube_dur"})[
        [*KEYS, "n", "dur_sum", "dur_max", "cube_wsum", "cube_dur"]]


def _group_arrow(table: Any, ratio_columns: Sequence[str], min_task_us: float,
                 bound_ratio: float, collector: Optional[opstats.OpCollector] = None) -> pd.DataFrame:
    if collector is not None:
        collector.add(table)
    return _group_batch(table, ratio_columns, min_task_us, bound_ratio)


def _combine(parts: List[pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    if not parts:
        return pd.DataFrame(columns=[*KEYS, "n", "dur_sum", "dur_max", "cube_wsum", "cube_dur"])
    frame = pd.concat(parts, ignore_index=True)
    return frame.groupby(KEYS, sort=False, dropna=False).agg(
        n=("n", "sum"), dur_sum=("dur_sum", "sum"), dur_max=("dur_max", "max"),
        cube_wsum=("cube_wsum", "sum"), cube_dur=("cube_dur", "sum")).reset_index()


def wanted_columns(cmap: ColumnMap) -> List[str]:
    return ["device_id", "step_id", "op_name", "op_type", "op_state", "core_type", "duration_us", "block_dim",
            "mix_block_dim", "input_dtypes", "cube_utilization_pct", *cmap.groups.get("pipe_ratios", ()),
            *opstats.TEXT_COLUMNS, *opstats.NUMERIC_COLUMNS]


NUMERIC = ["step_id", "duration_us", "block_dim", "mix_block_dim", "cube_utilization_pct", *opstats.NUMERIC_COLUMNS]


def aggregate_csv(table: str, paths: Sequence[str], min_task_us: float, bound_ratio: float) -> KernelStats:
    """Read ``paths`` (slices of one kernel table) and group them."""
    cmap = column_map(table)
    ratio_columns = list(cmap.groups.get("pipe_ratios", ()))
    parts: List[pd.DataFrame] = []
    rows = 0
    columns: Optional[Resolved] = None
    problems: List[str] = []
    collector: Optional[opstats.OpCollector] = None
    # Small Arrow chunks of consecutive slices are grouped together: a group-by (and the shape groups, and the
    # sequence's codes) cost a fixed ~20 ms a call, which made 2,000 small slices take minutes; grouped in
    # tables.CHUNK_ROWS rows the cost follows the rows, not the files.
    pending: List[Any] = []
    pending_rows = 0

    def flush() -> None:
        nonlocal pending, pending_rows
        if pending:
            import pyarrow as pa

            batch = pending[0] if len(pending) == 1 else pa.concat_tables(pending)
            pending, pending_rows = [], 0
            parts.append(_group_arrow(batch, ratio_columns, min_task_us, bound_ratio, collector))
            if len(parts) >= 16:
                parts[:] = [_combine(parts)]

    for path in paths:
        try:
            resolved = open_table(path, cmap)
            if columns is None:
                columns = resolved
                collector = opstats.OpCollector(resolved.has("input_shapes", "duration_us"),
                                                resolved.has("start_us", "duration_us"))
            notes = ReadNotes()
            wanted = wanted_columns(cmap)
            if not any(resolved.has(name) for name in opstats.MOVE_TIMES):  # busy time alone says nothing
                wanted = [name for name in wanted if name not in opstats.TIMES]
            # Chunks of about tables.CHUNK_ROWS rows, Arrow Tables or pandas DataFrames (a group-by has a fixed cost
            # per call).
            for chunk in iter_chunks(path, resolved, wanted, [*NUMERIC, *ratio_columns], notes=notes):
                if hasattr(chunk, "num_rows"):
                    rows += chunk.num_rows
                    if pending and not chunk.schema.equals(pending[0].schema):
                        flush()
                    pending.append(chunk)
                    pending_rows += chunk.num_rows
                    if pending_rows >= CHUNK_ROWS:
                        flush()
                    continue
                flush()  # the sequence keeps the tasks' order
                rows += len(chunk)
                parts.append(_group_chunk(chunk, ratio_columns, min_task_us, bound_ratio))
                if collector is not None:
                    collector.add(chunk)
                if len(parts) >= 16:
                    parts = [_combine(parts)]
            note = notes.describe(path)
            if note:
                problems.append(note)
        except TableError as exc:
            problems.append(str(exc))
    flush()
    groups = _combine(parts)
    shapes = collector.shapes() if collector is not None else None
    if collector is not None and collector.shapes_dropped["groups"]:
        dropped = collector.shapes_dropped
        problems.append(f"{paths[0]}: {dropped['groups']} operator shape(s) of the least time not kept for "
                        f"PROF022-PROF024 ({dropped['tasks']} task(s), {dropped['time_us'] / 1000:.1f} ms; "
                        f"{opstats.MAX_SHAPE_GROUPS} kept)")
    for name, mapping in cmap.values.items():  # cell spellings of older versions, mapped on the few groups
        key = {"core_type": "core", "op_type": "op_type"}.get(name)
        if key and mapping and len(groups):
            groups[key] = groups[key].astype(object).replace(mapping)
    for name, mapping in cmap.values.items():
        if name == "core_type" and mapping and shapes is not None and len(shapes):
            shapes["core"] = shapes["core"].astype(object).replace(mapping)
    return KernelStats(table=table, files=list(paths), columns=tuple(columns.found) if columns else (),
                       extra_columns=columns.extra if columns else (), groups=groups, rows=rows,
                       problems=problems, shapes=shapes,
                       sequence=collector.sequence() if collector is not None else None)


def aggregate_timeline(paths: Sequence[str], min_task_us: float, bound_ratio: float,
                       table: str = "timeline") -> KernelStats:
    """Chrome traces (legacy msprof ``timeline/task_time_*.json``, torch_npu ``trace_view.json``, msprof
    ``msprof_*.json``): the device tasks, i.e. the complete events with ``args["Task Type"]``, streamed and
    grouped in batches (:func:`npudoctor.prof.timeline.read_events`); the host timeline comes with them."""
    import pandas as pd

    from npudoctor.prof.timeline import read_events

    parts: List[pd.DataFrame] = []

    def group(records: List[Dict[str, Any]]) -> None:
        for record in records:
            match = TIMELINE_OP.match(record["op_name"])
            record["op_type"] = match.group("type") if match else record["op_name"]
        frame = pd.DataFrame.from_records(records, columns=["op_name", "op_type", "core_type", "duration_us"])
        parts.append(_group_chunk(frame, (), min_task_us, bound_ratio))
        if len(parts) >= 16:
            parts[:] = [_combine(parts)]

    timeline, rows, problems = read_events(paths, group)
    stats = KernelStats(table=table, files=list(paths), columns=("op_name", "op_type", "core_type", "duration_us"),
                        extra_columns=(), groups=_combine(parts), rows=rows, problems=problems)
    stats.timeline = timeline
    return stats


def last_steps(groups: pd.DataFrame, steps: int) -> pd.DataFrame:
    """Only the groups of the last ``steps`` steps (a table without ``Step Id`` is returned whole)."""
    known = sorted(set(groups["step"]) - {-1.0})
    if not steps or not known:
        return groups
    return groups[groups["step"].isin(known[-steps:])]
