"""Per-operator figures of the kernel table that the grouped figures lose: shapes and the task order.

Two things are collected while :mod:`npudoctor.prof.kernels` streams the table, chunk by chunk:

* **shape groups**: one row per (device, core, operator type, operator name, input shapes, input formats,
  output shapes, input dtypes) with the task count, the time, and for each PMU pipe ratio of
  :data:`RATIOS` its duration-weighted sum and the duration it was recorded for (so the mean is weighted by
  time, not by task). Only tables with shapes have them. PROF022-PROF024 judge cube, flash-attention and
  vector operators from them.
* **the task sequence**: the first :data:`SEQUENCE_MAX_TASKS` tasks in table order as arrays (one integer per
  distinct operator name + shapes, start, duration, moved-data time, core busy time, device), for PROF025's
  search for repeated operator sequences. The cap bounds memory and time on a table of any size: a training
  step repeats its sequences, so the first 100,000 tasks hold them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence

if TYPE_CHECKING:
    import pandas as pd

SHAPE_KEYS = ["device", "core", "op_type", "op_name", "input_shapes", "output_shapes", "input_dtypes"]
RATIOS = ("aic_mac_ratio", "aic_mte2_ratio", "aic_fixpipe_ratio", "aiv_vec_ratio", "aiv_mte2_ratio",
          "aiv_mte3_ratio")
TIMES = ("aicore_time_us", "aiv_time_us", "aic_mte2_time_us", "aiv_mte2_time_us", "aic_fixpipe_time_us",
         "aiv_mte3_time_us")
MOVE_TIMES = ("aic_mte2_time_us", "aiv_mte2_time_us", "aic_fixpipe_time_us", "aiv_mte3_time_us")
TEXT_COLUMNS = ("input_shapes", "output_shapes")
NUMERIC_COLUMNS = ("start_us", "aic_fixpipe_ratio", *TIMES)
SEQUENCE_MAX_TASKS = 100_000
SEQUENCE_SLICE = 32_768
# Distinct operator shapes kept (the ones taking the most time): a dynamic-shape job can give every task its own
# shape, and a check judges only shapes taking a share of the time (prof.op_min_share), at most a few hundred.
MAX_SHAPE_GROUPS = 20_000
# Keys of one task in the sequence: its name and shapes (msprof-analyze's fusible-ops key, too).
SEQUENCE_KEY = ("op_name", "input_shapes", "output_shapes")


def _shape_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One chunk's shape groups (``frame`` has canonical columns; text ones may be missing)."""
    import pandas as pd

    duration = frame["duration_us"].fillna(0.0).astype(float)
    keys: Dict[str, Any] = {}
    for key in SHAPE_KEYS:
        source = {"device": "device_id", "core": "core_type"}.get(key, key)
        if source in frame.columns:
            column = frame[source]
            keys[key] = column.astype(object).where(column.notna(), "").astype(str)
        else:
            keys[key] = pd.Series("", index=frame.index, dtype=object)
    if "op_type" not in frame.columns and "op_name" in frame.columns:
        keys["op_type"] = keys["op_name"]
    data = pd.DataFrame(keys, index=frame.index)
    data["dur"] = duration
    for ratio in RATIOS:
        if ratio in frame.columns:
            values = frame[ratio].astype(float)
            data[f"{ratio}_w"] = (values * duration).fillna(0.0)
            data[f"{ratio}_d"] = duration.where(values.notna(), 0.0)
        else:
            data[f"{ratio}_w"] = 0.0
            data[f"{ratio}_d"] = 0.0
    sums = {f"{r}_{s}": (f"{r}_{s}", "sum") for r in RATIOS for s in ("w", "d")}
    return data.groupby(SHAPE_KEYS, sort=False).agg(n=("dur", "size"), dur_sum=("dur", "sum"),
                                                    dur_max=("dur", "max"), **sums).reset_index()


def _shape_arrow(table: Any) -> pd.DataFrame:
    """:func:`_shape_frame` of an Arrow table, computed by Arrow on the dictionary indices: the group-by hashes
    integers, and the few distinct texts are looked up afterwards (no string per row)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    sources = {"device_id", "core_type", *SHAPE_KEYS, "duration_us", *RATIOS}
    table = table.select([name for name in table.schema.names if name in sources]).unify_dictionaries()
    names = set(table.schema.names)
    columns: Dict[str, Any] = {}
    texts: Dict[str, List[str]] = {}
    for key in SHAPE_KEYS:
        source = {"device": "device_id", "core": "core_type"}.get(key, key)
        if key == "op_type" and source not in names:
            source = "op_name"
        column = table.column(source) if source in names else None
        if column is None or not column.num_chunks or not pa.types.is_dictionary(column.type):
            columns[key] = pa.repeat(pa.scalar(-1, pa.int32()), table.num_rows)
            texts[key] = []
            continue
        texts[key] = [str(v) for v in column.chunk(0).dictionary.to_pylist()]
        columns[key] = pc.fill_null(pa.chunked_array([chunk.indices for chunk in column.chunks], pa.int32()), -1)
    duration = pc.fill_null(table.column("duration_us"), 0.0)
    columns["dur"] = duration
    present = [ratio for ratio in RATIOS if ratio in names]
    for ratio in present:
        values = table.column(ratio)
        columns[f"{ratio}_w"] = pc.fill_null(pc.multiply(values, duration), 0.0)
        columns[f"{ratio}_d"] = pc.if_else(pc.is_valid(values), duration, 0.0)
    sums = [(f"{r}_{s}", "sum") for r in present for s in ("w", "d")]
    grouped = pa.table(columns).group_by(SHAPE_KEYS, use_threads=False).aggregate(
        [("dur", "count"), ("dur", "sum"), ("dur", "max"), *sums]).to_pandas()
    grouped = grouped.rename(columns={"dur_count": "n", **{f"{c}_sum": c for c, _ in sums}})
    for key in SHAPE_KEYS:  # the texts of this chunk's codes (-1: an empty cell)
        lookup = np.array([*texts[key], ""], dtype=object)
        grouped[key] = lookup[grouped[key].to_numpy(dtype=np.int64)]
    for ratio in RATIOS:
        if ratio not in present:
            grouped[f"{ratio}_w"] = 0.0
            grouped[f"{ratio}_d"] = 0.0
    return grouped[[*SHAPE_KEYS, "n", "dur_sum", "dur_max", *(f"{r}_{s}" for r in RATIOS for s in ("w", "d"))]]


def combine_shapes(parts: Sequence[pd.DataFrame]) -> Optional[pd.DataFrame]:
    import pandas as pd

    if not parts:
        return None
    frame = pd.concat(parts, ignore_index=True)
    sums = {c: (c, "sum") for c in frame.columns if c.endswith(("_w", "_d"))}
    return frame.groupby(SHAPE_KEYS, sort=False).agg(n=("n", "sum"), dur_sum=("dur_sum", "sum"),
                                                     dur_max=("dur_max", "max"), **sums).reset_index()


class OpCollector:
    """Fed every chunk of one kernel table (an Arrow table or a pandas DataFrame with canonical columns)."""

    def __init__(self, has_shapes: bool, has_start: bool) -> None:
        self.has_shapes = has_shapes
        self.has_start = has_start
        self.shape_parts: List[pd.DataFrame] = []
        self.shapes_dropped = {"groups": 0, "tasks": 0, "time_us": 0.0}  # shapes past MAX_SHAPE_GROUPS
        self.names: Dict[Any, int] = {}          # combined column codes of a sequence key -> its code
        self.devices: Dict[Any, int] = {}
        self.texts: Dict[str, Dict[str, int]] = {}  # column -> its text -> code
        self.columns: Dict[str, List[Any]] = {"code": [], "device": [], "start": [], "dur": [], "moved": [],
                                              "busy": [], "brk": []}
        self.rows = 0                            # tasks in the sequence so far
        self.more = 0                            # tasks after the cap (not in the sequence)
        self.has_times = False

    def add(self, chunk: Any) -> None:
        if not (self.has_shapes or self.has_start):
            return
        arrow = hasattr(chunk, "num_rows")
        if self.has_shapes:
            part = _shape_arrow(chunk) if arrow else _shape_frame(chunk)
            self.shape_parts.append(self._bounded(part))
            if len(self.shape_parts) >= 16 or sum(len(p) for p in self.shape_parts) > MAX_SHAPE_GROUPS:
                combined = combine_shapes(self.shape_parts)
                self.shape_parts = [self._bounded(combined)] if combined is not None else []
        if not self.has_start:
            return
        room = SEQUENCE_MAX_TASKS - self.rows
        rows = chunk.num_rows if arrow else len(chunk)
        if room <= 0 or not rows:
            self.more += rows
            return
        if rows > room:
            self.more += rows - room
            chunk = chunk.slice(0, room) if arrow else chunk.iloc[:room]
        if arrow:  # in slices: the temporaries of a slice stay small (one whole chunk cost ~30 MiB)
            chunk = chunk.select([n for n in chunk.schema.names if n in _SEQUENCE_COLUMNS])
            for offset in range(0, chunk.num_rows, SEQUENCE_SLICE):
                self._add_sequence(chunk.slice(offset, SEQUENCE_SLICE).to_pandas())
        else:
            self._add_sequence(chunk)

    def _codes(self, frame: pd.DataFrame, names: Sequence[str], table: Dict[Any, int]) -> Any:
        """One integer per row for the text of ``names`` (the same text gets the same code in every chunk):
        each column is factorized on its own and the codes combined, never a string per row."""
        import numpy as np
        import pandas as pd

        combined = np.zeros(len(frame), dtype=np.int64)
        for name in names:
            values = self.texts.setdefault(name, {})
            if name in frame.columns:
                codes, uniques = pd.factorize(frame[name], sort=False)
                mapping = np.array([values.setdefault("" if u is None else str(u), len(values)) for u in uniques]
                                   + [values.setdefault("", len(values))], dtype=np.int64)
                column = mapping[codes]  # code -1 (empty cell) takes the last entry: ""
            else:
                column = np.full(len(frame), values.setdefault("", len(values)), dtype=np.int64)
            combined = combined * (SEQUENCE_MAX_TASKS + 1) + column  # < 2**55 for three columns
        codes, uniques = pd.factorize(combined, sort=False)
        mapping = np.array([table.setdefault(int(u), len(table)) for u in uniques], dtype=np.int64)
        return mapping[codes] if len(mapping) else np.zeros(len(frame), dtype=np.int64)

    def add_sequence(self, frame: pd.DataFrame) -> None:
        """Tasks in start order (canonical columns) added to the sequence as they are, no cap applied."""
        self._add_sequence(frame)

    def _add_sequence(self, frame: pd.DataFrame) -> None:
        import numpy as np

        duration = frame["duration_us"].fillna(0.0).to_numpy(dtype=float)
        start = frame["start_us"].to_numpy(dtype=float)
        # Communication and AI CPU tasks end a sequence: nothing of the AI Core fuses across them.
        brk = np.isnan(start)
        if "core_type" in frame.columns:
            brk |= _where(frame["core_type"], lambda text: text in STOP_CORES)
        if "op_name" in frame.columns:
            brk |= _where(frame["op_name"], lambda text: text.lower().startswith(STOP_NAMES))

        def time(column: str) -> Any:
            return frame[column].fillna(0.0).to_numpy(dtype=float) if column in frame.columns else \
                np.zeros(len(frame))

        if any(c in frame.columns for c in TIMES):
            self.has_times = True
        moved = np.maximum(time("aic_mte2_time_us"), time("aiv_mte2_time_us")) + np.maximum(
            time("aic_fixpipe_time_us"), time("aiv_mte3_time_us"))
        busy = time("aicore_time_us") + time("aiv_time_us")
        columns = self.columns  # compact types: 100,000 tasks hold ~3 MiB
        columns["code"].append(self._codes(frame, SEQUENCE_KEY, self.names).astype(np.int32))
        columns["device"].append(self._codes(frame, ("device_id",), self.devices).astype(np.int32))
        columns["start"].append(np.nan_to_num(start))
        columns["dur"].append(duration.astype(np.float32))
        columns["moved"].append(moved.astype(np.float32))
        columns["busy"].append(busy.astype(np.float32))
        columns["brk"].append(brk)
        self.rows += len(frame)

    def _texts(self, table: Dict[Any, int], names: Sequence[str]) -> List[tuple]:
        """The texts of each code of ``table`` (a combined code undone column by column)."""
        columns = [list(self.texts.get(name, {"": 0})) for name in names]
        out = []
        for combined in table:
            parts = []
            for column in reversed(columns):
                combined, code = divmod(combined, SEQUENCE_MAX_TASKS + 1)
                parts.append(column[code] if code < len(column) else "")
            out.append(tuple(reversed(parts)))
        return out

    def _bounded(self, groups: pd.DataFrame) -> pd.DataFrame:
        """``groups`` without the shapes past :data:`MAX_SHAPE_GROUPS` that took the least time (counted)."""
        if len(groups) <= MAX_SHAPE_GROUPS:
            return groups
        ordered = groups.sort_values("dur_sum", ascending=False, kind="stable")
        dropped = ordered.iloc[MAX_SHAPE_GROUPS:]
        self.shapes_dropped["groups"] += len(dropped)
        self.shapes_dropped["tasks"] += int(dropped["n"].sum())
        self.shapes_dropped["time_us"] += float(dropped["dur_sum"].sum())
        return ordered.iloc[:MAX_SHAPE_GROUPS]

    def shapes(self) -> Optional[pd.DataFrame]:
        combined = combine_shapes(self.shape_parts)
        return self._bounded(combined) if combined is not None else None

    def sequence(self) -> Optional[Dict[str, Any]]:
        import numpy as np

        if not self.rows:
            return None
        out: Dict[str, Any] = {key: np.concatenate(parts) for key, parts in self.columns.items()}
        out["names"] = self._texts(self.names, SEQUENCE_KEY)  # code -> (name, input shapes, output shapes)
        out["device_names"] = [text for text, in self._texts(self.devices, ("device_id",))]
        out["not_analysed"] = self.more
        out["has_times"] = self.has_times
        return out


STOP_CORES = ("HCCL", "COMMUNICATION", "AI_CPU", "KERNEL_AICPU")
STOP_NAMES = ("hcom", "lccl", "lcoc")


def _where(column: Any, predicate: Callable[[str], bool]) -> Any:
    """``predicate`` of each cell of a text column as a bool array, decided once per distinct text."""
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(column, sort=False)
    decided = np.array([predicate(str(u)) for u in uniques] + [False], dtype=bool)
    return decided[codes]


_SEQUENCE_COLUMNS = {"device_id", "core_type", "duration_us", "start_us", *SEQUENCE_KEY, *TIMES}
