"""Read one :class:`~npudoctor.prof.layout.Source` into :class:`~npudoctor.prof.model.Rank` objects."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping

from npudoctor.prof.columns import column_map
from npudoctor.prof.layout import Source
from npudoctor.prof.model import Rank
from npudoctor.prof.tables import ReadNotes, TableError, check_regular_file, iter_frames, open_table, read_small


def read_source(source: Source, min_task_us: float, bound_ratio: float, steps: int,
                idle_min_us: float) -> List[Rank]:
    """``min_task_us``, ``bound_ratio`` and ``idle_min_us``: the profile's ``prof.min_task_us``,
    ``prof.bound_ratio`` and ``prof.quiet_idle_min_us`` (the device gaps a .db is searched for)."""
    from npudoctor.prof import kernels

    base = Rank(label=source.label, source=source, problems=list(source.problems),
                unused=[*source.unused, *source.graphs])  # GE graph dumps: seen, not read (PROF026)
    stats = None
    text_kernels = bool({"kernel_details", "task_time", "op_statistic"} & set(source.tables) or source.timelines)
    if source.databases and not text_kernels:
        from npudoctor.prof.dbreader import read_databases

        read_databases(base, source, min_task_us, bound_ratio, steps, idle_min_us)
        return _split_devices(base) if base.kernel is not None else [base]
    base.unused.extend(source.databases + source.analysis_dbs)  # the text tables of the same run are read
    if "kernel_details" in source.tables:
        stats = kernels.aggregate_csv("kernel_details", source.tables["kernel_details"], min_task_us, bound_ratio)
    elif "task_time" in source.tables:
        stats = kernels.aggregate_csv("task_time", source.tables["task_time"], min_task_us, bound_ratio)
    elif source.timelines:
        stats = kernels.aggregate_timeline(source.timelines, min_task_us, bound_ratio)
    elif source.traces:
        stats = kernels.aggregate_timeline(source.traces, min_task_us, bound_ratio, table="trace_view")
    elif "op_statistic" in source.tables:
        stats = _op_statistic_stats(source.tables["op_statistic"], min_task_us, base.problems)
    if stats is not None:
        base.problems.extend(stats.problems)
        if stats.rows or (stats.table == "op_statistic" and len(stats.groups)):
            base.kernel = stats
            base.tables_read[stats.table] = list(stats.files)
            base.groups = kernels.last_steps(stats.groups, steps)
    if stats is not None and stats.timeline is not None:
        base.timeline = stats.timeline
    elif source.traces:  # the host side of the run (DataLoader, GC, synchronisation, AI Core frequency)
        from npudoctor.prof.timeline import read_events

        base.timeline, _, trace_problems = read_events(source.traces)
        base.problems.extend(trace_problems)
    if base.timeline is not None and base.timeline.sources:
        base.tables_read.setdefault("trace_view", list(base.timeline.sources))
    if source.hccl:  # legacy msprof: the HCCL transfer tasks are in their own timeline file
        from npudoctor.prof.timeline import HostTimeline, read_events

        hccl, _, hccl_problems = read_events(source.hccl)
        base.problems.extend(hccl_problems)
        if hccl.transfers:
            base.timeline = base.timeline if base.timeline is not None else HostTimeline()
            base.timeline.transfers.extend(hccl.transfers)
            base.tables_read["hccl"] = list(hccl.sources)
    _read_step_trace(base, source, steps)
    _read_memory(base, source)
    _read_communication(base, source)
    _read_utilization(base, source)
    _read_api_statistic(base, source)
    for table in ("op_statistic",):  # listed as read when it is a readable table (the kernel table rules)
        if table in source.tables and table not in base.tables_read:
            readable = []
            for path in source.tables[table]:
                try:
                    open_table(path, column_map(table))
                    readable.append(path)
                except TableError as exc:
                    base.problems.append(str(exc))
            if readable:
                base.tables_read[table] = readable
    return _split_cluster(base) if base.kernel is None else _split_devices(base)


def _split_cluster(base: Rank) -> List[Rank]:
    """msprof-analyze's cluster output (one step_trace row per rank, ``Index``) becomes one rank per row."""
    table = base.step_trace
    if table is None or "row_index" not in table.columns or table["row_index"].nunique() <= 1:
        return [base]
    ranks = []
    for index, part in table.groupby(table["row_index"].astype(str), sort=False):
        rank = Rank(label=f"rank {index}", source=base.source, tables_read=dict(base.tables_read),
                    step_trace=part, problems=list(base.problems), unused=list(base.unused),
                    pp_stages=base.pp_stages)
        rank.links = [link for link in base.links if link["path"] and link["path"][-1] == index]
        ranks.append(rank)
    return sorted(ranks, key=lambda r: (len(r.label), r.label))


def _split_devices(base: Rank) -> List[Rank]:
    """An msprof collection of several devices (``Device_id`` column) becomes one rank per device."""
    if base.groups is None or "device" not in base.groups.columns:
        return [base]
    devices = sorted(d for d in set(base.groups["device"]) if d not in ("", "host"))
    if len(devices) <= 1:
        base.device = devices[0] if devices else ""
        return [base]
    ranks = []
    for device in devices:
        info = base.source.devices.get(str(device), {})
        rank_id = info.get("rank_id")
        label = f"{base.label} device {device}" + (f" (rank {rank_id})" if rank_id not in (None, -1, "-1") else "")
        rank = Rank(label=label, source=base.source, device=str(device), kernel=base.kernel,
                    groups=base.groups[base.groups["device"] == device], tables_read=dict(base.tables_read),
                    problems=list(base.problems), unused=list(base.unused), timeline=base.timeline)
        if base.step_trace is not None and "device_id" in base.step_trace.columns:
            rank.step_trace = base.step_trace[base.step_trace["device_id"].astype(str) == str(device)]
        ranks.append(rank)
    return ranks


def _op_statistic_stats(paths: List[str], min_task_us: float, problems: List[str]) -> Any:
    """op_statistic rows (per operator type) as kernel groups, when no per-task table is there."""
    import pandas as pd

    from npudoctor.prof.kernels import KEYS, KernelStats, _combine

    cmap = column_map("op_statistic")
    frames = []
    columns: Any = ()
    for path in paths:
        try:
            resolved, frame = read_small(path, cmap, list(cmap.spellings), ["count", "total_us", "max_us"],
                                         problems)
        except TableError as exc:
            problems.append(str(exc))
            continue
        if not resolved.has("core_type", "op_type", "count", "total_us"):
            missing = resolved.missing(["core_type", "op_type", "count", "total_us"])
            problems.append(f"{path}: op_statistic without {', '.join(missing)}")
            continue
        columns = tuple(resolved.found)
        maximum = frame["max_us"] if "max_us" in frame.columns else frame["total_us"] / frame["count"]
        groups = pd.DataFrame({
            "device": frame["device_id"].astype(object).fillna("") if "device_id" in frame.columns else "",
            "step": -1.0, "core": frame["core_type"].astype(object).fillna("UNKNOWN"),
            "op_type": frame["op_type"].astype(object).fillna(""), "block_dim": -1.0, "mix_block_dim": -1.0,
            "op_state": "", "long": maximum >= min_task_us, "nobound": -1, "dtypes": "",
            "n": frame["count"].fillna(0), "dur_sum": frame["total_us"].fillna(0.0), "dur_max": maximum.fillna(0.0),
            "cube_wsum": 0.0, "cube_dur": 0.0})
        frames.append(groups[[*KEYS, "n", "dur_sum", "dur_max", "cube_wsum", "cube_dur"]])
    combined = _combine(frames)
    return KernelStats(table="op_statistic", files=list(paths), columns=columns, extra_columns=(),
                       groups=combined, rows=int(combined["n"].sum()) if len(combined) else 0)


def _read_step_trace(rank: Rank, source: Source, steps: int) -> None:
    paths = source.tables.get("step_trace_time")
    if not paths:
        return
    cmap = column_map("step_trace_time")
    numeric = [c for c in cmap.spellings if c.endswith("_us")]
    frames = []
    stages = []
    for path in paths:
        try:
            _resolved, frame = read_small(path, cmap, list(cmap.spellings), numeric, rank.problems)
        except TableError as exc:
            rank.problems.append(str(exc))
            continue
        if "row_type" in frame.columns:  # msprof-analyze cluster_step_trace_time: one row per rank or stage
            kind = frame["row_type"].astype(str).str.lower()
            stages.append(frame[kind == "stage"])
            frame = frame[kind == "rank"]
        frames.append(frame)
    if not frames:
        return
    import pandas as pd

    if any(len(part) for part in stages):
        rank.pp_stages = last_steps_of_trace(pd.concat(stages, ignore_index=True), steps)

    rank.step_trace = last_steps_of_trace(pd.concat(frames, ignore_index=True), steps)
    rank.tables_read["step_trace_time"] = list(paths)


def last_steps_of_trace(table: Any, steps: int) -> Any:
    """Only the rows of the last ``steps`` steps of a step trace (all of it when 0 or no step is a number)."""
    import pandas as pd

    if steps and "step" in table.columns:
        numbers = pd.to_numeric(table["step"], errors="coerce")
        known = sorted(set(numbers.dropna()))
        if known:
            table = table[numbers.isin(known[-steps:])]
    return table


def _read_api_statistic(rank: Rank, source: Source) -> None:
    """The host APIs (AscendCL, runtime, ...) taking the most time: where a host-bound step spends it."""
    paths = source.tables.get("api_statistic", [])
    if not paths:
        return
    cmap = column_map("api_statistic")
    top: List[Dict[str, Any]] = []
    for path in paths:
        try:
            resolved, frame = read_small(path, cmap, ["level", "api_name", "total_us", "count", "max_us"],
                                         ["total_us", "count", "max_us"], rank.problems)
        except TableError as exc:
            rank.problems.append(str(exc))
            continue
        if resolved.has("api_name", "total_us"):
            for record in frame.nlargest(5, "total_us").to_dict("records"):
                count = record.get("count")  # no Count column, or an empty cell: not known
                top.append({"api": str(record.get("api_name")), "level": str(record.get("level", "")),
                            "total_us": round(float(record["total_us"]), 3),
                            "count": int(count) if isinstance(count, float) and count == count else None})
        rank.tables_read.setdefault("api_statistic", []).append(path)
    rank.host_apis = sorted(top, key=lambda r: -r["total_us"])[:5]


def _read_utilization(rank: Rank, source: Source) -> None:
    """Sample-based per-core PMU summaries: the pipe ratios of every core row and of the Average row."""
    paths = source.tables.get("ai_core_utilization", [])
    if not paths:
        return
    cmap = column_map("ai_core_utilization")
    ratios = list(cmap.groups.get("pipe_ratios", ()))
    rows: List[Dict[str, Any]] = []
    columns: List[str] = []
    for path in paths:
        try:
            resolved, frame = read_small(path, cmap, ["device_id", "core_id", *ratios], ratios, rank.problems)
        except TableError as exc:
            rank.problems.append(str(exc))
            continue
        columns.extend(c for c in resolved.extra if c not in columns)
        kind = "AI_VECTOR_CORE" if os.path.basename(path).startswith("ai_vector") else "AI_CORE"
        for record in frame.to_dict("records"):
            values = {r: float(record[r]) for r in ratios if r in record and record[r] == record[r]}
            rows.append({"kind": kind, "core": str(record.get("core_id", "")), "ratios": values})
    rank.tables_read["ai_core_utilization"] = list(paths)
    rank.utilization = {"rows": rows, "other_columns": columns[:12]}


def _read_memory(rank: Rank, source: Source) -> None:
    memory: Dict[str, Any] = {}
    paths = source.tables.get("memory_record", [])
    if paths:
        cmap = column_map("memory_record")
        peaks: Dict[str, Dict[str, float]] = {}
        for path in paths:
            try:
                resolved = open_table(path, cmap)
                notes = ReadNotes()
                for frame in iter_frames(path, cmap, resolved, ["component", "allocated_mb", "reserved_mb"],
                                         ["allocated_mb", "reserved_mb"], notes=notes):
                    if "component" not in frame.columns:
                        frame = frame.assign(component="")
                    top = frame.groupby(frame["component"].astype(object).fillna(""), sort=False).max(
                        numeric_only=True)
                    for component, row in top.iterrows():
                        peak = peaks.setdefault(str(component), {})
                        for column in ("allocated_mb", "reserved_mb"):
                            if column in row and row[column] == row[column]:  # not NaN
                                peak[column] = max(peak.get(column, 0.0), float(row[column]))
                if notes.describe(path):
                    rank.problems.append(str(notes.describe(path)))
            except TableError as exc:
                rank.problems.append(str(exc))
        if peaks:
            memory["peaks"] = peaks
            rank.tables_read["memory_record"] = list(paths)
    paths = source.tables.get("operator_memory", [])
    if paths:
        cmap = column_map("operator_memory")
        largest: List[Dict[str, Any]] = []
        for path in paths:
            try:
                resolved = open_table(path, cmap)
                for frame in iter_frames(path, cmap, resolved, ["name", "size_kb", "alloc_reserved_mb"],
                                         ["size_kb", "alloc_reserved_mb"]):
                    if "size_kb" in frame.columns:
                        largest.extend(frame.nlargest(5, "size_kb").to_dict("records"))
                        largest = sorted(largest, key=lambda r: -(r.get("size_kb") or 0))[:5]
            except TableError as exc:
                rank.problems.append(str(exc))
        memory["largest_allocations"] = [
            {"name": str(r.get("name", "")), "size_mb": round(float(r.get("size_kb") or 0) / 1024, 3)}
            for r in largest]
        rank.tables_read["operator_memory"] = list(paths)
    rank.memory = memory


WANTED_COMMUNICATION = ("Communication Bandwidth Info", "Communication Time Info")


def _read_communication(rank: Rank, source: Source) -> None:
    """Every operator's ``Communication Bandwidth Info`` per transport, with the keys leading to it (step,
    group, op, rank), streamed: a file of any size holds only the link records in memory."""
    from npudoctor.prof.jsonstream import JsonStreamError, iter_members

    for path in source.communication:
        before = len(rank.links)
        notes: List[str] = []
        try:
            check_regular_file(path)
            with open(path, "rb") as handle:
                for trail, members in iter_members(handle, WANTED_COMMUNICATION, notes=notes):
                    _add_links(list(trail), members, rank.links)
        except TableError as exc:
            rank.problems.append(str(exc))
        except OSError as exc:
            rank.problems.append(f"{path}: {exc.strerror or exc}")
        except JsonStreamError as exc:
            rank.problems.append(f"{path}: {exc} (read up to there)")
        rank.problems.extend(f"{path}: {note}" for note in notes)
        if len(rank.links) > before:
            rank.tables_read.setdefault("communication", []).append(path)


def _add_links(trail: List[str], members: Mapping[str, Any], out: List[Dict[str, Any]]) -> None:
    bandwidth = members.get("Communication Bandwidth Info")
    if not isinstance(bandwidth, dict):
        return
    timing_info = members.get("Communication Time Info")
    timing: Dict[str, Any] = timing_info if isinstance(timing_info, dict) else {}
    for transport, values in bandwidth.items():
        if not isinstance(values, dict):
            continue
        size, speed, time_ms = (_finite(values.get(key)) for key in
                                ("Transit Size(MB)", "Bandwidth(GB/s)", "Transit Time(ms)"))
        if size is None or speed is None or time_ms is None:
            continue
        out.append({"path": trail, "transport": str(transport)[:32], "size_mb": size, "bandwidth_gbps": speed,
                    "transit_ms": time_ms, "wait_ratio": _finite(timing.get("Wait Time Ratio")),
                    "elapse_ms": _finite(timing.get("Elapse Time(ms)"))})


def _finite(value: Any) -> Any:
    """A finite float (None, "" and missing read as 0 as the writers mean them; anything else unreadable)."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number == number and abs(number) != float("inf") else None
