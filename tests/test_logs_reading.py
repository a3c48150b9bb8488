"""Issue 31: every real failure read. The operator of an ATC / graph-build / TBE failure, the device and the
runtime code next to a CANN code, failures printed without any code, text as people paste it, and MindSpore's
own records, each on the real samples (tests/data/samples/logs, source headers) that show them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List

import pytest

from npudoctor.logs import codes
from npudoctor.logs.model import LogFinding
from npudoctor.logs.scanner import Scanner
from tests.samples import CONSTRUCTED, SAMPLES, SHARED_SAMPLES, sample_bytes, sample_data

# An error line as a person reading the log sees one, written apart from the scanner's own grammar: an
# error-level record, a Python exception line, a level word opening the line, a failure in words.
ORACLE = re.compile(r"\[(?:ERROR|CRITICAL|EXCEPTION)\]|^\s*[A-Z]\w*(?:Error|Exception):|^\s*ERROR\b"
                    r"|(?<![\w-])(?:failed|Failed|FAILED)(?![\w-])")
# ... unless the line is a record or logger line of a lower level.
LOWER_LEVEL = re.compile(r"^\s*\[(?:INFO|DEBUG|EVENT|TRACE|WARNING|W|I)[\] ]")


def _findings(name: str) -> List[LogFinding]:
    scanner = Scanner()
    scanner.scan_bytes(name, sample_data(name))
    return scanner.result().findings


def _one(name: str, kind: str) -> LogFinding:
    (found,) = [f for f in _findings(name) if f.kind == kind]
    return found


def _real_log_samples() -> Dict[str, Path]:
    """Every real log and error-text sample: the copies in tests/data/samples, and the shared collection
    beside the checkout when it is there."""
    found: Dict[str, Path] = {}
    for root in (SAMPLES, SHARED_SAMPLES):
        for folder in (root / "logs", root / "system"):
            if folder.is_dir():
                for path in sorted(folder.iterdir()):
                    if path.suffix in (".log", ".txt") and not path.name.startswith(("prof_", "layout_")):
                        found.setdefault(path.name, path)
    return found


def test_no_log_holding_an_error_line_reads_nothing_found() -> None:
    """Every real sample that holds an error line gives at least one finding (issue 31 point 4)."""
    checked, silent = 0, []
    for name, path in sorted(_real_log_samples().items()):
        body = sample_bytes(path)
        if not any(ORACLE.search(line) and not LOWER_LEVEL.match(line)
                   for line in body.decode("utf-8", "replace").splitlines()):
            continue
        checked += 1
        scanner = Scanner()
        scanner.scan_bytes(name, body)
        if not scanner.result().findings:
            silent.append(name)
    assert checked >= 60 and silent == []


def test_an_error_line_no_rule_knows_is_quoted_with_its_reading_and_counted() -> None:
    name = "torch_npu_to-int-device_Torch-not-compiled-with-CUDA_Ascend-pytorch-16.txt"
    scanner = Scanner()
    summary = scanner.scan_bytes(name, sample_data(name))
    (finding,) = scanner.result().findings
    assert (finding.kind, finding.subject, finding.severity) == ("error_line", "error line", "error")
    assert finding.title == "first error line: AssertionError: Torch not compiled with CUDA enabled"
    assert finding.first.line == 11 and finding.fix
    assert summary.unexplained_error_lines == 1 and summary.to_dict()["unexplained_error_lines"] == 1
    assert summary.causes == {("error_line", "error line"): 1}


def test_error_lines_are_only_counted_where_the_file_has_an_error_finding() -> None:
    """npu-smi's `dcmi model initialized failed, because the device is used. ret is -8020`: the device is
    held (and -8020 a DCMI code); the `DrvMngGetConsoleLogLevel failed` line before it is counted, not quoted."""
    name = "npu-smi_fail_dcmi-8020_device-used_cann-container-image-46.txt"
    scanner = Scanner()
    summary = scanner.scan_bytes(name, sample_data(name))
    kinds = {(f.kind, f.subject) for f in scanner.result().findings}
    assert kinds == {("device_busy", "device held by another process"), ("error_code", "-8020")}
    assert summary.unexplained_error_lines == 1


def test_prose_failures_get_their_best_reading_with_the_device() -> None:
    held = _one("mindspore_device_held_free_memory_less_than_half_mindspore-docs.txt", "device_busy")
    assert held.details == {"device": {"0"}} and held.severity == "error"
    lite = _one("mindspore_lite_benchmark_acl_open_device_failed_IERROR_mindocr-faq.txt", "device_open_failed")
    assert lite.details == {"device": {"0"}} and lite.first.line == 21


@pytest.mark.parametrize("name, device, runtime_code", [
    ("mindspore_EE1001_rtSetDevice_ret107001_mindspore-docs.txt", "8", "107001"),
    ("ais_bench_acl_open_device_0_failed_EL003_507033_faq.txt", "0", "507033"),
    ("mindspore_E39999_open_device_507033_typed_slips_mindocr-faq.txt", "0", "507033"),
])
def test_open_device_failures_carry_the_device_and_the_runtime_code(name: str, device: str,
                                                                    runtime_code: str) -> None:
    found = _one(name, "device_open_failed")
    assert found.details["device"] == {device} and found.details["runtime_code"] == {runtime_code}


@pytest.mark.parametrize("name, kind, op, op_type", [
    # ATC / GE shape inference, old and new wordings
    ("torchair_E89999_InferShape_Transpose_graph-compile-doc.txt", "infershape_failed", "Transpose", "Transpose"),
    ("torch_npu_EZ9999_InferShape_BatchMatMul_glued_progress_Ascend-pytorch-42.txt", "infershape_failed",
     "BatchMatMul", "BatchMatMul"),
    ("stdout_http500_json_escaped_EZ9999_constructed.txt", "infershape_failed", "BatchMatMul", "BatchMatMul"),
    # operator compile failures
    ("atc_E20001_StridedSliceD_failed_to_compile_op_qwen-ascend-llm-11.txt", "op_compile_failed",
     "/model/layers.4/self_attn/Slice_ascend_mbatch_batch_5", "StridedSliceD"),
    ("torch_npu_E60108_Conv3DTranspose_compile_op_failed_Ascend-pytorch-52.txt", "op_compile_failed",
     "Conv3DTranspose1", "Conv3DTranspose"),
    ("torch_npu_E90003_TransData_bf16_compile_op_failed_wrapped_Ascend-pytorch-148.txt", "op_compile_failed",
     "trans_TransData_17", "TransData"),
    ("mindspore_EB0000_Transpose_TVMError_mindspore-docs.txt", "op_compile_failed",
     "Default/encode_image-EncodeImage/visual-ViT/body-Transformer/layers-SequentialCell/0-SequentialCell/"
     "0-ResidualCell/cell-SequentialCell/1-AttentionWithMask/Transpose-op662", "Transpose"),
])
def test_failures_name_the_operator(name: str, kind: str, op: str, op_type: str) -> None:
    (found,) = [f for f in _findings(name) if f.kind == kind and f.subject == op_type]
    assert found.details["op"] == {op} and found.details["op_type"] == {op_type}
    assert found.to_dict()["evidence"]["op"] == [op]


@pytest.mark.parametrize("line, op, op_type", [
    # the wording issue 31 quotes from ATC, the words after the node or before it
    ("E89999: op[Concat_243], type[ConcatD], InferShape failed.[FUNC:InferShapeAndType][FILE:x.cc][LINE:1]",
     "Concat_243", "ConcatD"),
    ("E89999: InferShape failed, op[Concat_243], type[ConcatD]", "Concat_243", "ConcatD"),
    # GE's log twin of `Call InferShapeAndType for node:...` (infershape_pass.cc GELOGE)
    ("[Call][InferShapeAndType] for node:Reshape_12(Reshape) failed", "Reshape_12", "Reshape"),
    # MindSpore Lite's scheduler (`MS_LOG(ERROR) << "InferShape failed, name: " << ... << ", type: " << ...`)
    ("ERROR [mindspore/lite/src/scheduler.cc:345] InferSubGraphShape] InferShape failed, name: Conv_1, "
     "type: Conv2DFusion", "Conv_1", "Conv2DFusion"),
])
def test_every_infershape_wording_names_node_and_type(line: str, op: str, op_type: str) -> None:
    scanner = Scanner()
    (hit,) = [h for h in scanner.analyze_line(line) if h.kind == "infershape_failed"]
    assert hit.subject == op_type and dict(hit.details) == {"op": op, "op_type": op_type}


def test_torch_npu_names_the_operator_it_was_running() -> None:
    found = _one("torch_npu_E60108_Conv3DTranspose_compile_op_failed_Ascend-pytorch-52.txt", "failing_operator")
    assert found.subject == "Conv3DTranspose" and found.details == {"op_type": {"Conv3DTranspose"}}


def test_mindspore_names_the_failed_task_its_device_and_its_node() -> None:
    name = "mindspore_EZ9999_aicore_Add-op8_dump_node_mindspore-docs.txt"
    task = _one(name, "device_task_failed")
    assert task.details == {"device": {"0"}, "runtime_code": {"507011"}, "stream": {"14"}, "task": {"13"}}
    assert _one(name, "failing_operator").details == {"op": {"Default/Add-op8"}}
    assert _one(name, "aicore_exception").details == {"device": {"0"}}


def test_tbe_check_failures_name_the_operator_and_its_type() -> None:
    """The TBE error manager and MindSpore name the implementation (`strided_slice_grad_d`, its kernel
    `strided_slice_grad_d_1157509189447431479_0`): one finding of the type it stands for, both names as `op`."""
    found = _one("mindspore_E80000_StridedSliceGradD_tbe_compile_mindspore-docs.txt", "op_compile_failed")
    assert found.subject == "StridedSliceGradD" and found.count == 2
    assert found.details == {"op": {"strided_slice_grad_d", "strided_slice_grad_d_1157509189447431479_0"},
                             "op_type": {"StridedSliceGradD"}}


@pytest.mark.parametrize("name, op_type", [
    ("strided_slice_grad_d", "StridedSliceGradD"), ("transpose_d_4779120815397556904_6", "TransposeD"),
    ("conv3d_backprop_input", "Conv3DBackpropInput"), ("reduce_sum_d", "ReduceSumD"), ("assign", "Assign"),
    ("Transpose", ""), ("add_13570952190744021808_0__kernel0", ""),
])
def test_tbe_implementation_names_give_their_operator_type(name: str, op_type: str) -> None:
    from npudoctor.logs.reading import tbe_op_type

    assert tbe_op_type(name) == op_type


@pytest.mark.parametrize("line, found", [
    ("RuntimeError: Device 8 call rtSetDevice failed, ret[107001]. The details refer to 'Ascend Error Message'.",
     ["107001"]),
    ("[driver interface] halMemAlloc failed: device_id=6, size=32212254720, type=2, env_type=3, drvRetCode=6!"
     "[FUNC:ReportError][FILE:npu_driver.cc][LINE:568]", ["DRV 6"]),
    ("Malloc device memory failed, size[32212254720], ret[207001], Device 6 may be other processes", ["207001"]),
    ("ATC run failed, Please check the detail log, Try 'atc --help' for more informationE10001: Value [-1]",
     ["E10001"]),
    ("E39999[PID: 52728] 2026-07-06-10:33:04.048.187 (E39999):  No TsdCloseEx symbol found", ["E39999"]),
    ("New device failed, retcode=0x70 10006[FUNC:SetDevice]", []),  # a code a paste split is no code
    ("dcmi model initialized failed, because the device is used. ret is -8020", ["-8020"]),
    # codes by their vendor names (constructed lines: a check macro printing the enum name)
    ("aclrtMalloc failed: ACL_ERROR_RT_MEMORY_ALLOCATION", ["207001"]),
    ("halMemAlloc returned DRV_ERROR_OUT_OF_MEMORY", ["DRV 6"]),
])
def test_runtime_and_driver_codes_in_the_company_of_cann_codes(line: str, found: List[str]) -> None:
    assert codes.find_codes(line) == found


def test_driver_codes_are_explained_from_the_drivers_own_table() -> None:
    info = codes.explain("DRV 6")
    assert info is not None and info.title == "DRV_ERROR_OUT_OF_MEMORY" and info.family == "driver"
    assert info.exact and info.fix and codes.canonical("DRV_ERROR_OUT_OF_MEMORY") == "DRV 6"
    found = _one("mindspore_EE9999_halMemAlloc_drvRetCode_ret207001_mindspore-docs.txt", "device_busy")
    assert found.details == {"device": {"6"}}


def test_pastes_read_like_the_text_they_were_typed_from() -> None:
    """`undefined symbol:` without its space; a JSON-escaped error body; `IERROR] ME (` from a screenshot."""
    symbol = _one("mindspore_undefined_symbol_no_space_mindocr-faq.txt", "undefined_symbol")
    assert symbol.subject.startswith("_ZN9mindspore5tracel15GetDebugInfostr") and "`" not in symbol.subject
    body = {f.subject for f in _findings("stdout_http500_json_escaped_EZ9999_constructed.txt")}
    assert {"EZ9999", "500002", "BatchMatMul"} <= body
    scanner = Scanner()  # `1ib` for `lib`, as typed from a screenshot
    scanner.scan_bytes("t.txt", b"OSError: 1ibascend_hal.so: cannot open shared object file: No such file\n")
    assert [(f.kind, f.subject) for f in scanner.result().findings] == [("missing_library", "libascend_hal.so")]


def test_mindspore_records_are_records() -> None:
    """`[LEVEL] MODULE(pid,tid,process)` and `(pid:tid,process)` records are counted by level and module like
    plog's, CRITICAL and EXCEPTION are error levels, and a file of them reads as MindSpore."""
    scanner = Scanner()
    interleaved = sample_data("mindspore_EE9999_task_failed_plog_interleaved_mindspore-docs.txt")
    summary = scanner.scan_bytes("ms.log", interleaved)
    assert summary.format == "mindspore"
    assert scanner.levels == {"ERROR": 14, "CRITICAL": 2}
    assert scanner.modules == {"RUNTIME": 13, "GE": 1, "DEVICE": 2}
    scanner = Scanner()
    pid_tid = sample_data("mindspore_device_address_type_wrong_pid_tid_mindocr-faq.txt")
    summary = scanner.scan_bytes("ms.log", pid_tid)
    assert (summary.format, summary.records, dict(scanner.modules)) == ("mindspore", 3, {"ME": 3})
    (quoted,) = [f for f in scanner.result().findings if f.kind == "error_line"]
    assert quoted.sample.startswith("RuntimeError: The device address type is wrong")


def test_byte_ranges_put_together_keep_the_error_lines() -> None:
    """A file scanned in parts (the parallel scan) counts and quotes its error lines as one pass does."""
    data = sample_data("torch_npu_to-int-device_Torch-not-compiled-with-CUDA_Ascend-pytorch-16.txt") * 3
    whole = Scanner()
    whole_summary = whole.scan_bytes("f.txt", data)
    cut = data.index(b"\n", len(data) // 2) + 1
    parts = []
    for piece in (data[:cut], data[cut:]):
        worker = Scanner()
        worker.scan_bytes("f.txt", piece)
        parts.append(worker.export_part())
    joined = Scanner()
    joined_summary = joined.add_parts(parts)
    assert joined_summary.unexplained_error_lines == whole_summary.unexplained_error_lines == 3

    def digest(scanner: Scanner):
        return [(f.kind, f.subject, f.count, str(f.first), str(f.last)) for f in scanner.result().findings]

    assert digest(joined) == digest(whole) == [("error_line", "error line", 3, "f.txt:11", "f.txt:41")]


def test_constructed_samples_say_so() -> None:
    header = (CONSTRUCTED / "stdout_http500_json_escaped_EZ9999_constructed.txt").read_text(encoding="utf-8")
    assert header.startswith("# source: CONSTRUCTED") and "# note: CONSTRUCTED" in header


def test_a_mindspore_job_folder_is_read_per_rank(tmp_path) -> None:
    """MindSpore writes each rank's logs to rank_N/logs/ (mindspore.log.<stamp>, mindspore.ERROR): the walk
    takes them, and every finding says which ranks showed it."""
    from npudoctor.logs.engine import scan_paths

    for rank, name, sample in (
            ("0", "mindspore.log.20240101-120000", "mindspore_EE1001_rtSetDevice_ret107001_mindspore-docs.txt"),
            ("1", "mindspore.ERROR", "mindspore_lite_benchmark_acl_open_device_failed_IERROR_mindocr-faq.txt")):
        folder = tmp_path / f"rank_{rank}" / "logs"
        folder.mkdir(parents=True)
        (folder / name).write_bytes(sample_data(sample))
    (tmp_path / "rank_0" / "notes.md").write_text("not a log\n", encoding="utf-8")
    result = scan_paths([str(tmp_path)], cwd=str(tmp_path))
    assert [f.path for f in result.files] == ["rank_0/logs/mindspore.log.20240101-120000",
                                              "rank_1/logs/mindspore.ERROR"]
    opened = next(f for f in result.findings if f.kind == "device_open_failed")
    assert opened.details["rank"] == {"0", "1"} and opened.details["device"] == {"0", "8"}
    assert result.skipped == [("rank_0/notes.md", "not logs")]
    assert [f.to_dict().get("rank") for f in result.files] == ["0", "1"]


def test_codes_carry_the_device_their_line_names() -> None:
    """torch_npu's `(PID:2731301, Device:0, RankID:-1) ERR00100` and the runtime's `device_id=0 ... retCode=0x91`:
    the code findings say which device (and, where torch_npu knows it, which rank)."""
    err = [f for f in _findings("torch_npu_E60108_Conv3DTranspose_compile_op_failed_Ascend-pytorch-52.txt")
           if f.subject == "ERR00100"]
    assert [f.details for f in err] == [{"device": {"0"}}]
    ts = [f for f in _findings("mindspore_EE9999_task_failed_plog_interleaved_mindspore-docs.txt")
          if f.subject == "0x91"]
    assert [f.details for f in ts] == [{"device": {"0"}}]
    scanner = Scanner()  # a vllm-ascend line (issue store), its Device:0 and RankID:-1 edited to a ranked job's
    (hit,) = scanner.analyze_line("[ERROR] 2025-09-23-19:53:07 (PID:1782807, Device:3, RankID:3) ERR00100 PTA "
                                  "call acl api failed.")
    assert dict(hit.details) == {"device": "3", "rank": "3"}


def test_the_file_list_says_how_many_error_lines_no_rule_explains(tmp_path) -> None:
    from npudoctor.cli import main
    from tests.clirunner import cli_runner

    log = tmp_path / "benchmark.txt"
    log.write_bytes(sample_data("mindspore_lite_benchmark_acl_open_device_failed_IERROR_mindocr-faq.txt"))
    result = cli_runner().invoke(main, ["logs", "scan", str(log), "-v"], env={"COLUMNS": "1000"})
    assert result.exit_code == 1
    assert "mindspore, 1 records, 30 lines, 9 error lines no rule explains" in result.stdout


@pytest.mark.parametrize("chunk", [7, 4096])
def test_chunking_never_changes_what_is_read(chunk: int) -> None:
    """The readings of this issue (error lines, pastes, MindSpore records) do not depend on where chunks end."""
    data = b"".join(sample_data(name) for name in (
        "mindspore_lite_benchmark_acl_open_device_failed_IERROR_mindocr-faq.txt",
        "stdout_http500_json_escaped_EZ9999_constructed.txt",
        "torch_npu_to-int-device_Torch-not-compiled-with-CUDA_Ascend-pytorch-16.txt",
        "mindspore_EE9999_task_failed_plog_interleaved_mindspore-docs.txt"))

    def read(chunks):
        scanner = Scanner()
        summary = scanner.scan_stream("f.txt", chunks)
        found = [(f.kind, f.subject, f.count, str(f.first), str(f.last), sorted(f.details.items()))
                 for f in scanner.result().findings]
        return found, summary.unexplained_error_lines, summary.first_error_line, dict(scanner.levels)

    whole = read(iter((data,)))
    assert read(data[i:i + chunk] for i in range(0, len(data), chunk)) == whole
    assert whole[1] > 0 and whole[2] is not None


def test_an_exception_between_plog_records_is_read() -> None:
    """A chunk of records (read as plog) with a Python traceback in it: the exception line is an error line
    (built in the test from real lines: INFO records of a CANN plog, then MindOCR's export failure)."""
    info = [line for line in sample_data("plog_run_info_ge_tdt_2024.log").splitlines(keepends=True)
            if line.startswith(b"[INFO]")]
    failure = sample_data("mindspore_device_address_type_wrong_pid_tid_mindocr-faq.txt")
    data = b"".join(info * (400 // len(info) + 1)) + failure
    scanner = Scanner()
    summary = scanner.scan_bytes("train.log", data)
    assert summary.format == "mindspore" and summary.records >= 0.9 * summary.lines  # read as records
    (quoted,) = [f for f in scanner.result().findings if f.kind == "error_line"]
    assert quoted.sample.startswith("RuntimeError: The device address type is wrong")
    assert quoted.first.line == data.count(b"\n") - 5  # the C++ Call Stack box follows it
