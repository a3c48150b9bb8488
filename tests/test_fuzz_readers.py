"""Seeded mutation fuzzing of the readers of untrusted text (issue 19): npu-smi tables, profiler CSV tables and
JSON documents, memlog lines, fleet reports. Each reader raises nothing but its one error class, whatever the
input; what it accepts has the types its callers rely on. Cases start from real samples (tests/data/samples)
and are reproducible (``tests/fuzzing.py``: ``NPUDOCTOR_FUZZ_SEED``, ``NPUDOCTOR_FUZZ_TRIALS``).
"""

from __future__ import annotations

import json
import math

import pytest

from tests import fuzzing
from tests.samples import DATA, sample_data, sample_text

SMI_SAMPLES = sorted(p.name for p in (DATA / "samples").glob("npu-smi-info_*.txt"))


def test_npu_smi_parser_raises_only_its_error():
    from npudoctor.parsers.npu_smi import NpuSmiParseError, parse_npu_smi_info

    texts = [sample_text(name) for name in SMI_SAMPLES]
    accepted = 0
    for rng in fuzzing.cases("npu-smi", 3000):
        text = fuzzing.mutate_text(rng, rng.choice(texts))
        try:
            table = parse_npu_smi_info(text)
        except NpuSmiParseError:
            continue
        accepted += 1
        for chip in table.chips:
            assert isinstance(chip.npu_id, int) and abs(chip.npu_id) <= 1e18, (text, chip)
            for value in (chip.power_w, chip.temp_c, chip.aicore_pct, chip.hbm_used_mib, chip.hbm_total_mib):
                assert value is None or (isinstance(value, (int, float)) and math.isfinite(value)), (text, chip)
        for process in table.processes:
            assert isinstance(process.pid, int) and isinstance(process.npu_id, int), (text, process)
    assert accepted > 1000  # most mutations leave a table to read


def test_nvidia_smi_parser_raises_only_its_error():
    from npudoctor.parsers.nvidia_smi import NvidiaSmiParseError, parse_csv

    header = "index, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], temperature.gpu\n"
    text = header + "0, NVIDIA H200, 45 %, 1024 MiB, 143771 MiB, 35\n1, NVIDIA H200, 0 %, 0 MiB, 143771 MiB, 30\n"
    for rng in fuzzing.cases("nvidia-smi", 2000):
        try:
            rows = parse_csv(fuzzing.mutate_text(rng, text))
        except NvidiaSmiParseError:
            continue
        for row in rows:
            assert all(not isinstance(v, float) or math.isfinite(v) for v in row.values()), row


def test_memlog_lines_are_records_of_checked_types_or_nothing():
    from npudoctor.workload import leak, memlog

    line = json.dumps(memlog.make_record(7, "run1", allocated_bytes=1 << 30, reserved_bytes=2 << 30, loss=1.5,
                                         step_s=0.25, data_wait_s=0.01, device="npu:0", rss_bytes=3 << 30))
    document = json.loads(line)
    accepted = []
    for index, rng in enumerate(fuzzing.cases("memlog", 4000)):
        if index % 2:
            text = fuzzing.mutate_text(rng, line)
        else:
            text = json.dumps(fuzzing.mutate_json(rng, document))
        record = memlog.parse_line(text)
        if record is None:
            continue
        assert set(record) == set(memlog.FIELDS) and type(record["step"]) is int
        for key, value in record.items():
            if key in ("run", "device"):
                assert value is None or type(value) is str, (key, text)
            elif key.endswith("_bytes") or key in ("alloc_retries", "ooms", "step"):
                assert value is None or (type(value) in (int, float) and 0 <= value < 2 ** 63), (key, text)
            elif key == "cpu_fallbacks":  # the optional table: validated entry by entry (issue 22)
                assert value is None or all(type(e["op"]) is str and type(e["first_step"]) is int
                                            and type(e["count"]) is int for e in value), (key, text)
            elif key == "pids":  # the optional list of the job's processes (issue 28)
                assert value is None or all(type(pid) is int and 0 < pid <= memlog.MAX_PID for pid in value), text
            elif key != "schema":  # seconds, loss
                assert value is None or (type(value) in (int, float) and abs(value) <= 2 ** 63), (key, text)
        accepted.append(record)
    assert len(accepted) > 500
    leak.analyze(accepted)  # what the reader accepts, the verdict can judge


def test_fleet_and_derive_read_any_report_shape_or_refuse_it_in_one_line():
    from npudoctor.fleet import derive, reportdoc, view

    document = json.loads(sample_text("../golden/check_warning_unbound.json")) if (
        DATA / "golden" / "check_warning_unbound.json").exists() else None
    assert document is not None
    document.setdefault("inventory", {"hostname": "node-a", "chips": {"count": 8}})
    text = json.dumps(document)
    builder = view._Builder(None)
    derived = 0
    for index, rng in enumerate(fuzzing.cases("fleet", 2000)):
        if index % 4 == 0:
            builder._add_bytes(fuzzing.mutate_text(rng, text).encode("utf-8", "surrogatepass"), f"r{index}")
            continue
        mutated = fuzzing.mutate_json(rng, document)
        builder.add(mutated, f"r{index}")
        try:
            reportdoc.check_report(mutated)
        except reportdoc.ReportShapeError as exc:
            assert "\n" not in str(exc)
            continue
        derive.derive(mutated, "report")
        derived += 1
    assert derived > 200 and builder.view.nodes and builder.view.errors
    view.render_text(builder.view)
    json.loads(view.render_json(builder.view))
    view.render_csv(builder.view)


PROF_JSON = ["prof_msprof_device_info_json_910.json", "prof_profiler_metadata_json.json",
             "prof_msprof_sample_json_collection_config.json", "prof_communication_json_torch_npu.json",
             "prof_msprof_device_start_info.json"]


def test_profiler_json_documents_load_or_raise_the_loaders_error(tmp_path):
    from npudoctor.parsers import jsondoc
    from npudoctor.prof import layout
    from tests.profdirs import msprof_collection

    texts = [sample_data(name).decode("utf-8") for name in PROF_JSON]
    prof = msprof_collection(tmp_path / "run")
    info = prof / "device_0" / "info.json.0"
    device_info = info.read_text()
    loaded = 0
    for index, rng in enumerate(fuzzing.cases("prof-json", 3000)):
        if index % 10 == 0:  # the layout reads info.json.N whole: its facts, or a problem, never an exception
            info.write_text(fuzzing.mutate_text(rng, device_info), encoding="utf-8", errors="surrogatepass")
            sources, problems = layout.discover([str(tmp_path / "run")])
            assert len(sources) == 1 and all("\n" not in p for p in problems)
            cores = sources[0].core_count()
            assert all(c is None or (type(c) is int and c > 0) for c in cores), cores
            continue
        text = fuzzing.mutate_text(rng, rng.choice(texts))
        if rng.random() < 0.1:
            text = "[" * rng.choice([63, 64, 65, 3000]) + text
        try:
            jsondoc.loads(text.encode("utf-8", "surrogatepass") if rng.random() < 0.5 else text, "x.json")
        except jsondoc.JsonDocumentError as exc:
            assert "\n" not in str(exc)
            continue
        loaded += 1
    assert loaded > 300


CSV_TABLES = [("api_statistic", "prof_api_statistic_2026.csv", ["api_name", "level", "total_us", "count", "max_us"],
               ["total_us", "count", "max_us"]),
              ("step_trace_time", "prof_step_trace_time_single_rank.csv", None, None),
              ("memory_record", "prof_memory_record_torch_npu.csv", ["component", "allocated_mb", "reserved_mb"],
               ["allocated_mb", "reserved_mb"])]


@pytest.mark.parametrize("arrow", [True, False], ids=["arrow", "pandas"])
def test_profiler_csv_tables_read_or_raise_the_table_error(tmp_path, monkeypatch, arrow):
    from npudoctor.prof import kernels, tables
    from npudoctor.prof.columns import column_map

    monkeypatch.setattr(tables, "USE_ARROW", arrow)
    samples = []
    for table, name, wanted, numeric in CSV_TABLES:
        cmap = column_map(table)
        wanted = wanted or list(cmap.spellings)
        numeric = numeric or [c for c in wanted if c.endswith("_us")]
        samples.append((cmap, sample_data(name).decode("utf-8"), wanted, numeric))
    kernel_text = sample_data("prof_op_summary_pipeutil_aiv_slice_2026.csv").decode("utf-8")
    path = tmp_path / "table.csv"
    for index, rng in enumerate(fuzzing.cases(f"prof-csv-{arrow}", 200)):
        if index % 5 == 0:  # the kernel table's reader groups what it reads; it reports, never raises
            path.write_text(fuzzing.mutate_text(rng, kernel_text), encoding="utf-8", errors="surrogatepass")
            stats = kernels.aggregate_csv("kernel_details", [str(path)], 20.0, 0.8)
            assert all(isinstance(p, str) and "\n" not in p for p in stats.problems)
            continue
        cmap, text, wanted, numeric = rng.choice(samples)
        path.write_text(fuzzing.mutate_text(rng, text), encoding="utf-8", errors="surrogatepass")
        problems = []
        try:
            _resolved, frame = tables.read_small(str(path), cmap, wanted, numeric, problems)
        except tables.TableError as exc:
            assert "\n" not in str(exc)
            continue
        for name in numeric:
            if name in frame.columns:
                column = frame[name].dropna()
                assert (column.abs() <= tables.MAX_CELL_VALUE).all(), (name, column.tolist())


def test_npu_smi_sub_command_parsers_raise_only_their_error():
    """Issue 30: `npu-smi info -t ...` reports and `npu-smi info -m`, mutated from the real samples."""
    from npudoctor.parsers.npu_smi import NpuSmiParseError, parse_npu_smi_detail, parse_npu_smi_mapping

    names = sorted(p.name for p in (DATA / "samples").glob("npu-smi-info*t-*.txt"))
    names += sorted(p.name for p in (DATA / "samples").glob("npu-smi-info-m_*.txt"))
    texts = [sample_text(name) for name in names]
    accepted = 0
    for rng in fuzzing.cases("npu-smi-detail", 1500):
        text = fuzzing.mutate_text(rng, rng.choice(texts))
        for parse in (parse_npu_smi_detail, parse_npu_smi_mapping):
            try:
                found = parse(text)
            except NpuSmiParseError:
                continue
            accepted += 1
            for item in found:
                assert item.npu_id is None or (isinstance(item.npu_id, int) and abs(item.npu_id) <= 1e18), text
                assert item.chip_id is None or isinstance(item.chip_id, int), text
    assert accepted > 500
