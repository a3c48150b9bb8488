"""Profiler output folders laid out the way msprof and the torch_npu profiler lay them out, from real samples.

Each builder copies the verbatim body of samples in tests/data/samples/logs (headers stripped) to the file
names and folders the tool writes (INDEX.md sections E and H, layout_*_tree.txt).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

from tests.samples import sample_data

TS = "20260323031749"
PROF = "PROF_000001_20260323031749197_00815596RKPKAHRB"


def put(folder: Path, files: Dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, sample in files.items():
        (folder / name).write_bytes(sample_data(sample))
    return folder


def torch_npu_rank(root: Path, rank: Optional[int], kernel: str = "prof_kernel_details_memory_metrics.csv",
                   extras: bool = True) -> Path:
    """``<host>_<pid>_<ts>_ascend_pt/{profiler_info_N.json, ASCEND_PROFILER_OUTPUT/..., PROF_*/device_0/}``."""
    pt = root / f"localhost_{1000 + (rank or 0)}_20230628101435_ascend_pt"
    files = {"kernel_details.csv": kernel}
    if extras:
        files.update({"step_trace_time.csv": "prof_step_trace_time_single_rank.csv",
                      "memory_record.csv": "prof_memory_record_torch_npu.csv",
                      "operator_memory.csv": "prof_operator_memory_torch_npu.csv",
                      "communication.json": "prof_communication_json_torch_npu.json",
                      "api_statistic.csv": "prof_api_statistic_2026.csv",
                      "npu_module_mem.csv": "prof_npu_module_mem.csv",
                      "trace_view.json": "prof_trace_view_excerpt.json",
                      # Written by torch_npu too, not analysed: must be passed over quietly.
                      "communication_matrix.json": "prof_communication_matrix_json.json",
                      "static_op_mem.csv": "prof_static_op_mem.csv"})
    put(pt / "ASCEND_PROFILER_OUTPUT", files)
    put(pt / PROF / "device_0", {"info.json.0": "prof_msprof_device_info_json_910.json",
                                 "start_info.0": "prof_msprof_device_start_info.json"})
    (pt / (f"profiler_info_{rank}.json" if rank is not None else "profiler_info.json")).write_text("{}")
    put(pt, {"profiler_metadata.json": "prof_profiler_metadata_json.json"})
    return pt


def msprof_collection(root: Path, op_summary: str = "prof_op_summary_pipeutil_aiv_slice_2026.csv") -> Path:
    """CANN 8.x ``PROF_*/{device_0/info.json.0, mindstudio_profiler_output/<table>_<ts>.csv}``."""
    prof = root / PROF
    put(prof / "mindstudio_profiler_output", {
        f"op_summary_{TS}.csv": op_summary,
        f"task_time_{TS}.csv": "prof_task_time_csv_2026.csv",
        f"api_statistic_{TS}.csv": "prof_api_statistic_2026.csv"})
    put(prof / "device_0", {"info.json.0": "prof_msprof_device_info_json_910.json",
                            "sample.json": "prof_msprof_sample_json_collection_config.json"})
    (prof / "host" / "data").mkdir(parents=True)
    return prof


def msprof_legacy(root: Path) -> Path:
    """CANN 6.x/7.0 ``PROF_*/device_0/{info.json.0, timeline/task_time_0_2_1.json, ...}`` (no summary CSV)."""
    prof = root / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
    put(prof / "device_0", {"info.json.0": "prof_msprof_device_info_json_910.json",
                            "start_info.0": "prof_msprof_device_start_info.json"})
    put(prof / "device_0" / "timeline", {"task_time_0_2_1.json": "prof_msprof_task_time_timeline_910.json",
                                         "step_trace_0_2_1.json": "prof_msprof_step_trace_timeline_910.json",
                                         "hccl_0_2_1.json": "prof_msprof_hccl_timeline_910.json"})
    return prof


def cluster_output(root: Path) -> Path:
    """msprof-analyze ``cluster_analysis_output/{cluster_step_trace_time.csv, cluster_communication.json}``."""
    return put(root / "cluster_analysis_output", {
        "cluster_step_trace_time.csv": "prof_cluster_step_trace_time.csv",
        "cluster_communication.json": "prof_cluster_communication.json"})
