"""LOG001: the newest plogs under `npudoctor check --logs DIR`, read through the runner."""

from __future__ import annotations

from npudoctor import api
from npudoctor.checks.logs import LOGS_DIRS_OPTION
from npudoctor.model.finding import Status
from npudoctor.model.inputs import WALKED_LINK
from npudoctor.model.profile import NodeProfile
from tests.samples import sample_data


def text_of(name: str) -> str:
    return sample_data(name).decode("utf-8", "replace")


def log001(node, dirs=("/root/ascend/log",), profile=None):
    options = {LOGS_DIRS_OPTION: list(dirs)} if dirs else {}
    report = api.run_checks(node.runner(), profile, only=["LOG001"], options=options)
    return report.findings


def test_skip_without_log_directory(node) -> None:
    (finding,) = log001(node, dirs=())
    assert finding.status is Status.SKIP and "--logs" in finding.detail


def test_newest_plogs_fail_on_errors_and_warn_on_fallbacks(node) -> None:
    node.file("/root/ascend/log/run/plog/plog-10043_20210331185941176.log",
              text_of("plog_2021_model_execute_aicore_error.log"))
    node.file("/root/ascend/log/debug/plog/plog-4242_20250601100000000.log",
              text_of("plog_debug_engine_placement_constructed.log"))
    findings = log001(node)
    by_subject = {f.subject: f for f in findings}
    aicore = by_subject["aicore_exception"]
    assert aicore.status is Status.FAIL and "-1_0_1_trans_TransData_170" in aicore.detail
    codes = by_subject["error_code"]
    assert codes.status is Status.FAIL and "507011" in codes.detail
    assert "507011" in {s["subject"] for s in codes.evidence["subjects"]}
    placed = by_subject["aicpu_placed"]
    assert placed.status is Status.WARN and "DropOutGenMask x2" in placed.detail
    scan = findings[0].evidence["scan"]
    assert len(scan["files_scanned"]) == 2 and scan["files_cut_at_max_bytes"] == []


def test_findings_merge_per_cause_with_counts(node) -> None:
    """check --logs gives one finding per kind of problem (like logs scan's merged causes), not one per
    subject: three error records of three modules are one line with counts."""
    lines = "".join(f"[ERROR] {module}(1,python):2025-01-01-00:00:0{i}.000.000 [a.cc:1]1 failed\n"
                    for i, module in enumerate(["RUNTIME", "GE", "HCCL", "RUNTIME"]))
    node.file("/logs/plog/plog-1_20250101000000000.log", lines)
    (finding,) = log001(node, dirs=("/logs",))
    assert finding.subject == "error_record" and finding.status is Status.FAIL
    assert "RUNTIME x2, GE x1, HCCL x1" in finding.detail and "4 line(s)" in finding.detail


def test_only_the_newest_files_and_at_most_max_bytes_are_read(node) -> None:
    old = text_of("plog_runtime_ffts_vector_core_exception_3lines.log")
    clean = text_of("plog_run_info_ge_tdt_2024.log")
    node.file("/logs/plog/plog-1_20200101000000000.log", old)  # oldest: not read with newest_files=1
    node.file("/logs/plog/plog-2_20250101000000000.log", clean)
    profile = NodeProfile("test", {"logs": {"newest_files": 1, "max_bytes_per_file": 4096}})
    (finding,) = log001(node, dirs=("/logs",), profile=profile)
    assert finding.status is Status.PASS
    assert finding.evidence["files_scanned"] == ["/logs/plog/plog-2_20250101000000000.log"]
    assert finding.evidence["files_cut_at_max_bytes"] == ["/logs/plog/plog-2_20250101000000000.log"]
    assert finding.evidence["max_bytes_per_file"] == 4096


def test_a_cut_plog_keeps_its_end_where_the_job_died(node) -> None:
    clean = text_of("plog_run_info_ge_tdt_2024.log")
    dying = text_of("plog_runtime_ffts_vector_core_exception_3lines.log")
    node.file("/logs/plog/plog-3_20250101000000000.log", clean * 20 + dying)
    profile = NodeProfile("test", {"logs": {"newest_files": 1, "max_bytes_per_file": len(dying) + 2048}})
    findings = log001(node, dirs=("/logs",), profile=profile)
    assert findings[0].status is Status.FAIL
    assert findings[0].evidence["scan"]["files_cut_at_max_bytes"] == ["/logs/plog/plog-3_20250101000000000.log"]


def test_missing_directory_is_an_error_not_a_pass(node) -> None:
    (finding,) = log001(node, dirs=("/nowhere",))
    assert finding.status is Status.ERROR and "not-found" in finding.detail


def test_directory_without_plogs_is_skipped(node) -> None:
    node.file("/logs/readme.txt", "nothing here\n")
    (finding,) = log001(node, dirs=("/logs",))
    assert finding.status is Status.SKIP and "no plog" in finding.detail


def test_the_diagnosis_comes_first(node) -> None:
    """Issue 27: LOG001 says what `logs scan` says: the root cause first, the incidents in its evidence."""
    node.file("/root/ascend/log/debug/plog/plog-155320_20250508095600000.log",
              text_of("plog_debug_aicore_error_2025.log"))
    findings = log001(node)
    first = findings[0]
    assert first.subject == "diagnosis" and first.status is Status.FAIL
    assert first.detail.startswith("Root cause: NPU 0 AI Vector core exception in GatherV3_")
    assert [i["role"] for i in first.evidence["incidents"]] == ["root"] and first.fix


def test_a_job_tree_walk_opens_no_link_and_no_fifo(node) -> None:
    """A job tree under --logs is walked through the runner: a FIFO and a link named like logs, met in it, are
    skipped with their reason (never opened: a FIFO would block), a linked folder is not walked into."""
    import os

    node.file("/job/node-a/device-0/plog-1_20250101000000000.log",
              text_of("plog_runtime_ffts_vector_core_exception_3lines.log"))
    os.mkfifo(node.mkdir("/job/node-b/device-0") / "plog-2_20250101000000000.log")
    node.symlink("/job/node-b/device-1/plog-3_20250101000000000.log", "/dev/zero")
    node.symlink("/job/node-c/elsewhere", str(node.mkdir("/elsewhere")))
    node.file("/elsewhere/plog-4_20250101000000000.log", text_of("plog_runtime_ffts_vector_core_exception_3lines.log"))
    findings = log001(node, dirs=("/job",))
    scan = findings[0].evidence["scan"]
    assert scan["files_scanned"] == ["/job/node-a/device-0/plog-1_20250101000000000.log"]
    assert sorted(scan["skipped"]) == [
        "/job/node-b/device-0/plog-2_20250101000000000.log: not a regular file (other)",
        "/job/node-b/device-1/plog-3_20250101000000000.log: " + WALKED_LINK]
    assert findings[0].status is Status.FAIL and findings[0].detail.startswith("Root cause: node-a NPU 0")
