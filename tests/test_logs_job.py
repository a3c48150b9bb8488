"""Job diagnosis (issue 27): one incident per failure, the rank that broke first across a whole job.

The job cases are built at test time from real single-rank texts (``tests/data/samples``) laid into the
layouts users keep; what is edited (timestamps, pids, ranks) is said per case and in
``tests/data/constructed/logs_jobs.md``. Real multi-rank pastes are read as they are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List

import pytest
from click.testing import CliRunner

from npudoctor.cli import main
from npudoctor.logs.incidents import Incident, Unit, diagnose
from npudoctor.logs.job import JobScan, place_of, scan_job
from npudoctor.report import logs_json

SAMPLES = Path(__file__).parent / "data" / "samples"
FD = SAMPLES / "jobs" / "ascend-fd"  # real multi-node fixtures of ascend-fd (see jobs/README.md)


def body(relative: str) -> str:
    """A sample's text without its source header (the lines up to ``# ---``)."""
    text = (SAMPLES / relative).read_text(encoding="utf-8")
    return text.split("# ---\n", 1)[1] if "# ---\n" in text else text


def retimed(text: str, old: str, new: str) -> str:
    """Edited: every timestamp starting with ``old`` (``2025-10-24-11:18``) starts with ``new``."""
    return text.replace(old, new)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


AICORE = "logs/plog_debug_aicore_error_2025.log"  # 2025-05-08-09:56:18, pid 155320, chipId 0
HCCL_TIMEOUT = "system/hccl_TaskExecStage_TaskRunFailed_Timeout_hccl-doc.txt"  # 2025-10-24-11:18:29
NOTIFY_TIMEOUT = "system/hccl_EI0002_notify-wait-timeout_507048_torch_npu-doc.txt"  # 2024-11-28-11:59:30
HEALTHY = "logs/plog_hccl_run_info_setupagent.log"  # INFO only, 2025-01-24-11:10:27
CQE = "logs/plog_hccl_topo_exchange_timeout_collection.log"  # cqe error status[12], 2024-03-28-10:25
OOM = "logs/stdout_hccl_EI0011_device_memory.txt"  # EI0011, 2025-11-03-20:18:46
IMPORT = "system/torch_npu_import_torch_npu._C_ModuleNotFound_torch_npu-faq.txt"
WATCHDOG_PASTE = "logs/torch_npu_hccl_watchdog_timeout_vllm-ascend-382.txt"  # real [rank0]:/[rank1]: console


def timeout_plog(day_time: str) -> str:
    """The HCCL execution timeout plog of one waiting rank, its time moved to ``day_time``."""
    return retimed(body(HCCL_TIMEOUT), "2025-10-24-11:18", day_time)


def exception_job(root: Path) -> Path:
    """Two nodes x 4 NPUs; node-a NPU 0 hits the AI Vector core exception at 09:56:18, the seven others
    time out in HCCL 30 minutes later (edited: the timeout plog's date and time)."""
    job = root / "job"
    write(job / "node-a" / "device-0" / "plog-155320_20250508095600.log", body(AICORE))
    for node in ("node-a", "node-b"):
        for device in range(4):
            if (node, device) != ("node-a", 0):
                write(job / node / f"device-{device}" / f"plog-{2111667 + device}_20250508.log",
                      timeout_plog(f"2025-05-08-10:26:{10 + device}"))
    return job


def _scan(*paths: Path, node: str = "") -> JobScan:
    return scan_job([str(p) for p in paths], jobs=1, node=node)


def _roles(scan: JobScan) -> Dict[str, List[Incident]]:
    out: Dict[str, List[Incident]] = {}
    for incident in scan.incidents:
        out.setdefault(incident.role, []).append(incident)
    return out


def test_seven_finding_plog_reads_as_one_incident() -> None:
    scan = _scan(SAMPLES / AICORE)
    assert len(scan.result.findings) >= 7  # the findings stay, as before
    (incident,) = scan.incidents
    assert incident.role == "root" and incident.kind == "aicore_exception"
    assert incident.title.startswith("AI Vector core exception in GatherV3_") and incident.device == 0
    assert incident.pid == 155320 and incident.first_time.startswith("2025-05-08T09:56:18")
    assert {"507035", "EZ9999", "EE8888"} <= set(incident.codes)
    assert scan.diagnosis.root_cause == incident.id and scan.diagnosis.confidence == "high"


def test_exception_on_one_rank_and_the_others_timeouts(tmp_path: Path) -> None:
    scan = _scan(exception_job(tmp_path))
    roles = _roles(scan)
    (root,) = roles["root"]
    assert (root.kind, root.node, root.device) == ("aicore_exception", "node-a", 0)
    assert len(roles["consequence"]) == 7 and all(i.caused_by == root.id for i in roles["consequence"])
    assert {i.node for i in roles["consequence"]} == {"node-a", "node-b"}
    verdict = scan.diagnosis.verdict
    assert verdict.startswith("Root cause: node-a NPU 0 AI Vector core exception")
    assert "7 ranks then timed out in HCCL waiting for it" in verdict
    assert scan.diagnosis.failed == ["node-a NPU 0"] and len(scan.diagnosis.waiting) == 7


def test_cli_text_is_verdict_first_and_folds_consequences(tmp_path: Path) -> None:
    job = exception_job(tmp_path)
    out = CliRunner().invoke(main, ["logs", "scan", str(job)], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert out.exit_code == 1, out.output
    lines = out.output.splitlines()
    assert lines[0] == "diagnosis" and lines[1].startswith("  Root cause: node-a NPU 0")
    folded = [line for line in lines if "node-a NPU 1-3, node-b NPU 0-3" in line]
    assert folded and "HCCL timeout" in folded[0]
    assert out.output.rstrip().splitlines()[-1].startswith("  ") or "exit 1" in out.output.splitlines()[-1]


def _documents(job: Path, where: Path) -> List[Path]:
    """Each node folder of ``job`` scanned as its node would (``--node NAME --format json``)."""
    documents = []
    for node in sorted(p for p in job.iterdir() if p.is_dir()):
        scan = _scan(node, node=node.name)
        path = where / f"{node.name}.json"
        path.write_text(json.dumps(logs_json.to_dict(scan.result, job=scan)), encoding="utf-8")
        documents.append(path)
    return documents


def _assert_same_verdict(merged: JobScan, raw: JobScan) -> None:
    assert [i.to_dict() for i in merged.incidents] == [i.to_dict() for i in raw.incidents]
    assert merged.diagnosis.to_dict() == raw.diagnosis.to_dict()
    assert {f.kind + f.subject: f.count for f in merged.result.findings} == {
        f.kind + f.subject: f.count for f in raw.result.findings}


def test_per_node_documents_merge_into_the_raw_verdict(tmp_path: Path) -> None:
    job = exception_job(tmp_path)
    raw = _scan(job)
    documents = _documents(job, tmp_path)
    _assert_same_verdict(_scan(*documents), raw)
    # the command line: the documents in, the same JSON verdict out
    out = CliRunner().invoke(main, ["logs", "scan", *map(str, documents), "--format", "json"])
    assert out.exit_code == 1 and json.loads(out.output)["diagnosis"] == raw.diagnosis.to_dict()


@pytest.mark.parametrize("case", ["cqe", "healthy", "fd:st_aicpu_notify_testcase", "fd:st_event_timeout_testcase",
                                  "fd:st_transport_timeout_testcase"])
def test_every_node_folder_job_merges_from_its_documents(tmp_path: Path, case: str) -> None:
    """The proof on every job case kept as a folder per node (the ascend-fd fixtures copied as they are)."""
    if case.startswith("fd:"):
        job = tmp_path / "job"
        import shutil

        shutil.copytree(FD / case[3:], job)
    elif case == "cqe":
        job = tmp_path / "job"
        write(job / "node-a" / "device-6" / "plog-148_20240328.log", body(CQE))
        write(job / "node-b" / "device-0" / "plog-2111667_20240328.log", timeout_plog("2024-03-28-10:55"))
    else:
        job = tmp_path / "job"
        for node in ("node-a", "node-b"):
            write(job / node / "device-0" / "plog-59420_2025.log", body(HEALTHY))
    (tmp_path / "docs").mkdir()
    _assert_same_verdict(_scan(*_documents(job, tmp_path / "docs")), _scan(job))


def test_a_document_that_is_not_one_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "node.json"
    bad.write_text('{"schema": "npudoctor.logs/1", "findings": []}', encoding="utf-8")
    out = CliRunner().invoke(main, ["logs", "scan", str(bad)])
    assert out.exit_code == 2 and "without units and incidents" in out.output


def test_device_oom_in_torchrun_log_dir(tmp_path: Path) -> None:
    """torchrun --log-dir: attempt_0/<local_rank>/stderr.log; rank 2 runs out of device memory (EI0011, real
    HCCL doc text), ranks 0, 1, 3 print the real watchdog timeout of vllm-ascend#382 (their own lines only,
    `[rankN]:` prefixes dropped as torchrun's per-rank files have none)."""
    watchdog = [line.split("]:", 1)[1] for line in body(WATCHDOG_PASTE).splitlines() if line.startswith("[rank1]:")]
    for rank in (0, 1, 3):
        write(tmp_path / "logs" / "attempt_0" / str(rank) / "stderr.log", "\n".join(watchdog) + "\n")
    write(tmp_path / "logs" / "attempt_0" / "2" / "stderr.log", body(OOM))
    scan = _scan(tmp_path / "logs")
    root = next(i for i in scan.incidents if i.role == "root")
    assert (root.kind, root.rank) == ("device_oom", 2)
    assert sorted({i.rank for i in scan.incidents if i.role == "consequence"}) == [0, 1, 3]


def _silent_job(root: Path, named: str) -> Path:
    """Four ranks (torchrun layout); ranks 0, 1, 3 print the real EI0002 notify wait timeout at 11:59:30
    (``remote rank [named]`` edited), rank 2's log is INFO lines that stop at 11:20:27 (edited date)."""
    for rank in (0, 1, 3):
        text = body(NOTIFY_TIMEOUT).replace("remote rank [unknown]", f"remote rank [{named}]")
        write(root / "attempt_0" / str(rank) / "stderr.log", text)
    write(root / "attempt_0" / "2" / "stderr.log", retimed(body(HEALTHY), "2025-01-24-11:10", "2024-11-28-11:20"))
    return root


def test_silent_killed_rank_is_named(tmp_path: Path) -> None:
    scan = _scan(_silent_job(tmp_path / "logs", "unknown"))
    root = next(i for i in scan.incidents if i.role == "root")
    assert root.kind == "silent_rank" and root.rank == 2
    assert "stopped logging at 2024-11-28 11:20:27" in root.title and "3 rank(s)" in root.title
    assert scan.diagnosis.silent == ["rank 2"] and scan.diagnosis.confidence == "medium"


def test_rank_the_waiting_ranks_name_and_that_went_silent(tmp_path: Path) -> None:
    scan = _scan(_silent_job(tmp_path / "logs", "2"))
    root = next(i for i in scan.incidents if i.role == "root")
    assert (root.kind, root.rank) == ("named_rank", 2) and scan.diagnosis.confidence == "high"


def test_link_cqe_error_is_the_root_of_the_timeouts(tmp_path: Path) -> None:
    job = tmp_path / "job"
    write(job / "node-a" / "device-6" / "plog-148_20240328.log", body(CQE))
    write(job / "node-b" / "device-0" / "plog-2111667_20240328.log", timeout_plog("2024-03-28-10:55"))
    scan = _scan(job)
    root = next(i for i in scan.incidents if i.role == "root")
    assert root.kind == "hccl_link" and root.node == "node-a"
    # the CQE plog holds its own socket timeout too (the sample is HCCL's topo exchange timeout collection)
    consequences = [i for i in scan.incidents if i.role == "consequence"]
    assert "node-b" in {i.node for i in consequences} and all(i.caused_by == root.id for i in consequences)


def test_healthy_job_exits_0(tmp_path: Path) -> None:
    for node in ("node-a", "node-b"):
        write(tmp_path / "job" / node / "device-0" / "plog-59420_2025.log", body(HEALTHY))
    out = CliRunner().invoke(main, ["logs", "scan", str(tmp_path / "job"), "--format", "json"])
    assert out.exit_code == 0, out.output
    document = json.loads(out.output)
    assert document["schema"] == "npudoctor.logs/2" and document["incidents"] == []
    assert document["diagnosis"]["root_cause"] is None and document["diagnosis"]["verdict"].startswith("No failure")


@pytest.mark.parametrize("prefix", ["[rank{}]:", "[default{}]:"])
def test_every_rank_failing_alike_is_a_common_cause(tmp_path: Path, prefix: str) -> None:
    """One console of four ranks (`[rankN]:` prefixes as torch.distributed writes them, `[defaultN]:` as
    torchrun's --tee does), each printing the real ModuleNotFoundError traceback of the torch_npu FAQ."""
    lines = [prefix.format(rank) + line for rank in range(4) for line in body(IMPORT).splitlines()]
    write(tmp_path / "console.log", "\n".join(lines) + "\n")
    scan = _scan(tmp_path / "console.log")
    assert scan.diagnosis.common and scan.diagnosis.verdict.startswith("Common cause: 4 ranks failed alike")
    assert sorted(i.rank for i in scan.incidents) == [0, 1, 2, 3]
    # the evidence points at the console's own lines
    assert all(source.startswith(str(tmp_path / "console.log") + ":") for i in scan.incidents for source in i.sources)


def test_real_two_rank_watchdog_paste_has_no_root_but_says_so() -> None:
    scan = _scan(SAMPLES / WATCHDOG_PASTE)
    assert scan.diagnosis.root_cause is None and scan.diagnosis.confidence == "low"
    assert sorted({i.rank for i in scan.incidents}) == [0, 1]
    assert scan.diagnosis.verdict.startswith("No root cause logged")


def test_ray_prefixes_split_per_worker(tmp_path: Path) -> None:
    """Ray's `(RayWorkerWrapper pid=.., ip=..)` prefixes (edited onto the real EI0002 and AI Core texts)."""
    worker_a = [f"(RayWorkerWrapper pid=101, ip=10.0.0.1) {line}" for line in body(AICORE).splitlines()]
    worker_b = [f"(RayWorkerWrapper pid=202, ip=10.0.0.2) {line}"
                for line in retimed(body(NOTIFY_TIMEOUT), "2024-11-28-11:59", "2025-05-08-10:26").splitlines()]
    write(tmp_path / "ray.log", "\n".join(worker_a + worker_b) + "\n")
    scan = _scan(tmp_path / "ray.log")
    root = next(i for i in scan.incidents if i.role == "root")
    assert root.node == "10.0.0.1" and root.kind == "aicore_exception"
    assert {i.node for i in scan.incidents if i.role == "consequence"} == {"10.0.0.2"}


@pytest.mark.parametrize("relative, node, rank, device", [
    ("job/node-a/device-3/plog-1_2.log", "node-a", None, 3),
    ("job/node-a/attempt_0/5/stderr.log", "node-a", 5, None),
    ("job/node-b/rank_7/log.txt", "node-b", 7, None),
    ("job/worker-0/process_log/run/plog/plog-59420_2025.log", "worker-0", None, None),
])
def test_layout_places_each_log(relative: str, node: str, rank: object, device: object) -> None:
    place = place_of(relative, "job", node_folders=True)
    assert (place.node, place.rank, place.device) == (node, rank, device)


def test_diagnosis_does_not_depend_on_input_order() -> None:
    def incident(rank: int, kind: str, cls: str, time: str) -> Incident:
        return Incident(kind=kind, cls=cls, title=kind, label=kind, fix="", severity="error", rank=rank,
                        first_time=time, unit=f"r{rank}.log", sources=[f"r{rank}.log:1"])

    def make() -> List[Incident]:
        return [incident(1, "hccl_timeout", "consequence", "2025-01-01T10:30:00"),
                incident(3, "device_oom", "cause", "2025-01-01T10:00:00"),
                incident(2, "hccl_timeout", "consequence", "2025-01-01T10:30:01")]

    units = [Unit(f"r{r}.log", rank=r) for r in (1, 2, 3)]
    a = diagnose(make(), units)
    b = diagnose(list(reversed(make())), list(reversed(units)))
    assert [i.to_dict() for i in a[0]] == [i.to_dict() for i in b[0]] and a[1] == b[1]
    assert re.match(r"Root cause: rank 3 device_oom at 2025-01-01 10:00:00.000; 2 ranks then", a[1].verdict)


def _paste(tmp_path: Path, relative: str) -> Path:
    """A real paste as the user has it (the sample's source header left out)."""
    path = tmp_path / "console.txt"
    write(path, body(relative))
    return path


def test_real_paste_naming_the_remote_rank(tmp_path: Path) -> None:
    """vllm-ascend#3413: rank 101 waited for `remote rank: [24]`; rank 24's logs are not among the inputs."""
    scan = _scan(_paste(tmp_path, "logs/stdout_vllm_ascend_EI0002_remote_rank_24_RankID101_vllm-ascend-3413.txt"))
    waiting = next(i for i in scan.incidents if i.role == "consequence")
    assert (waiting.rank, waiting.remote_ranks, waiting.kind) == (101, [24], "hccl_timeout")
    root = next(i for i in scan.incidents if i.role == "root")
    assert root.kind == "named_rank" and root.rank == 24 and "left no log among the inputs" in root.title
    assert waiting.caused_by == root.id


def test_real_ray_actor_paste(tmp_path: Path) -> None:
    """vllm-ascend#1443: `(train pid=8464)` lines; the rank comes from torch_npu's own `RankID:8`."""
    scan = _scan(_paste(tmp_path, "logs/stdout_ray_train_pid_EI0002_507048_vllm-ascend-1443.txt"))
    (incident,) = scan.incidents
    assert (incident.rank, incident.kind, incident.role) == (8, "hccl_timeout", "consequence")
    assert set(incident.codes) >= {"EI0002", "507048"} and incident.pid == 8464
    assert scan.diagnosis.root_cause is None and scan.diagnosis.verdict.startswith("No root cause logged")


def test_hostile_documents_are_one_line_errors(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": "npudoctor.logs/2", "x": ' + "[" * 100000 + "]" * 100000 + "}", encoding="utf-8")
    bad_types = tmp_path / "types.json"
    bad_types.write_text('{"schema": "npudoctor.logs/2", "units": [1], "incidents": []}', encoding="utf-8")
    odd = tmp_path / "odd.json"  # every field of the wrong type: read as nothing, never a traceback
    odd.write_text('{"schema": "npudoctor.logs/2", "units": [{"source": "a", "rank": "x", "last_time": 5}], '
                   '"incidents": [{"kind": "device_oom", "first_time": 7, "rank": [1], "node": 3}]}',
                   encoding="utf-8")
    out = CliRunner().invoke(main, ["logs", "scan", str(odd)])
    assert isinstance(out.exception, SystemExit) and out.exit_code == 2, out.output  # no files: nothing readable
    assert "nothing readable" in out.output
    for path, words in ((deep, "nested too deeply"), (bad_types, "malformed")):
        out = CliRunner().invoke(main, ["logs", "scan", str(path)])
        assert out.exit_code == 2 and words in out.output and "Traceback" not in out.output


def test_untrusted_node_names_reach_no_terminal(tmp_path: Path) -> None:
    job = tmp_path / "job"
    write(job / "evil\x1b[2Jnode" / "device-0" / "plog-155320_2025.log", body(AICORE))
    write(job / "node-b" / "device-0" / "plog-1_2025.log", timeout_plog("2025-05-08-10:26:10"))
    out = CliRunner().invoke(main, ["logs", "scan", str(job)])
    assert out.exit_code == 1 and "\x1b" not in out.output and "Root cause: evil" in out.output


def test_an_order_only_a_clock_offset_explains_is_said(tmp_path: Path) -> None:
    """node-b's timeouts are stamped 6 minutes before node-a's exception (edited times): the exception is
    still the root (the only failure of its own), the diagnosis says the clocks must differ."""
    job = tmp_path / "job"
    write(job / "node-a" / "device-0" / "plog-155320_2025.log", body(AICORE))
    write(job / "node-b" / "device-0" / "plog-1_2025.log", timeout_plog("2025-05-08-09:50:10"))
    scan = _scan(job)
    root = next(i for i in scan.incidents if i.role == "root")
    assert root.node == "node-a" and scan.diagnosis.confidence == "medium"
    assert any("clock offset" in why for why in scan.diagnosis.why)


def test_junit_and_github_give_one_case_and_annotation_per_incident(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    job = exception_job(tmp_path)
    junit = CliRunner().invoke(main, ["logs", "scan", str(job), "--format", "junit"])
    names = [c.get("name") for c in ET.fromstring(junit.output).iter("testcase")
             if str(c.get("classname")).startswith("npudoctor.logs.incident.")]
    assert len(names) == len(set(names)) == 8 and "root aicore_exception" in names
    github = CliRunner().invoke(main, ["logs", "scan", str(job), "--format", "github"])
    incidents = [line for line in github.output.splitlines() if "title=I" in line]
    assert len(incidents) == 8 and sum("root%3A" in line for line in incidents) == 1



def test_ascend_fd_sdma_exceptions_on_two_nodes_half_an_hour_apart() -> None:
    """Alike but 30 minutes apart: the first is the root, the second independent (not a common cause)."""
    scan = _scan(FD / "st_aicpu_notify_testcase")
    roles = _roles(scan)
    (root,) = roles["root"]
    assert (root.kind, root.node, root.device) == ("hccl_task_exception", "worker-0", 11)
    assert [(i.node, i.device) for i in roles["independent"]] == [("worker-1", 3)] and not scan.diagnosis.common


def test_ascend_fd_error_cqe_on_both_ends_of_a_link() -> None:
    """ModelArts' per-rank layout (process_log/rank_N/): both ends of one link see the error CQE at once."""
    scan = _scan(FD / "st_cqe_testcase")
    assert sorted((i.kind, i.rank) for i in scan.incidents) == [("hccl_link", 76), ("hccl_link", 77)]
    root = next(i for i in scan.incidents if i.role == "root")
    assert root.rank == 77 and scan.diagnosis.common  # 22:15:59.592 before 22:15:59.773, 2 of 2 ranks alike


def test_ascend_fd_transport_timeout_names_the_peer_of_the_link_table() -> None:
    """The LINK_ERROR_INFO rows name rank 8 (`192.168.2.199(8) ... time out`); rank 8's plog reports no
    error and goes on logging: it hung or fell behind."""
    scan = _scan(FD / "st_transport_timeout_testcase")
    root = next(i for i in scan.incidents if i.role == "root")
    assert (root.kind, root.rank, root.node) == ("named_rank", 8, "worker-1") and "hung" in root.title
    assert sorted(i.rank for i in scan.incidents if i.role == "consequence") == [2, 10, 11]


def test_ascend_fd_event_timeout_has_no_root_and_says_why() -> None:
    """Ranks 1 and 2 wait for rank 0, rank 0 (its rank from its run plog, same pid) waits for rank 1: a
    circle of timeouts, no failure of its own in these logs."""
    scan = _scan(FD / "st_event_timeout_testcase")
    assert scan.diagnosis.root_cause is None and scan.diagnosis.confidence == "low"
    assert sorted(i.rank for i in scan.incidents) == [0, 1, 2]
    assert any("rank 0 itself only timed out" in why for why in scan.diagnosis.why)


def test_node_folders_named_side_by_side_are_nodes(tmp_path: Path) -> None:
    job = exception_job(tmp_path)
    side_by_side = _scan(job / "node-a", job / "node-b")
    assert [i.to_dict() for i in side_by_side.incidents] == [i.to_dict() for i in _scan(job).incidents]
    layout = _scan(job / "node-a" / "device-0", job / "node-a" / "device-1")  # log folders, not nodes
    assert {i.node for i in layout.incidents} == {""}


def test_bench_runs_small() -> None:
    """bench/bench_logs_job.py end to end on a tiny job (it checks its own verdict: node-0000 NPU 0 the
    root, every other rank its consequence)."""
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[1] / "bench" / "bench_logs_job.py"
    done = subprocess.run([sys.executable, str(bench), "--ranks", "32", "--rank-kib", "4", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "merge 32 ranks (4 documents" in done.stdout and "Root cause: rank 0 (node-0000, NPU 0)" in done.stdout


def test_real_ray_taskrunner_paste_names_the_hccp_failure(tmp_path: Path) -> None:
    """verl#332: `(TaskRunner pid=..)` lines; EJ0001 says why HCCL could not start, the wrapper codes
    (ERR02200, the HcclResult 7) only explain it."""
    scan = _scan(_paste(tmp_path, "logs/stdout_ray_taskrunner_EJ0001_hccp_init_ERR02200_verl-332.txt"))
    (root,) = scan.incidents
    assert (root.role, root.rank, root.codes[0]) == ("root", 2, "EJ0001")
    # the device is torch_npu's `(PID:468348, Device:0, RankID:2)`, which the code findings carry (issue 31)
    assert root.title == "HCCP_Process_Initialization_Failure on device 0"


def test_one_event_in_the_host_and_device_logs_of_one_process_is_one_incident(tmp_path: Path) -> None:
    """CANN writes a process's host plog (plog/plog-PID_*.log) and its device log (device-N/device-PID_*.log);
    the same AI Core exception seen in both (edited: the one real text laid in both places) is one
    incident, on NPU 0 from the device log's folder."""
    log = tmp_path / "log" / "debug"
    write(log / "plog" / "plog-155320_20250508095600.log", body(AICORE))
    write(log / "device-0" / "device-155320_20250508095600.log", body(AICORE))
    scan = _scan(tmp_path / "log")
    (incident,) = scan.incidents
    assert (incident.kind, incident.pid, incident.device) == ("aicore_exception", 155320, 0)
    assert {source.rsplit(":", 1)[0].rsplit("/", 2)[-2] for source in incident.sources} == {"plog", "device-0"}


# -- LOG001 (`check --logs DIR`) gives logs scan's diagnosis over the same paths ----------------------------
def _log001_diagnosis(runner: object, *dirs: str) -> Dict[str, object]:
    """LOG001's first finding over ``dirs`` read through ``runner`` (its diagnosis and incidents)."""
    from npudoctor import api
    from npudoctor.checks.logs import LOGS_DIRS_OPTION

    report = api.run_checks(runner, only=["LOG001"], options={LOGS_DIRS_OPTION: list(dirs)})  # type: ignore[arg-type]
    first = report.findings[0]
    assert first.subject == "diagnosis", first.detail
    return {"verdict": first.detail, **first.evidence}


def _assert_log001_says_what_logs_scan_says(log001: Dict[str, object], scan: JobScan) -> None:
    assert log001["verdict"] == scan.diagnosis.verdict
    assert log001["diagnosis"] == scan.diagnosis.to_dict()  # root, ranks seen / failed / waiting / silent, why
    assert log001["incidents"] == [i.to_dict() for i in scan.incidents]  # every incident, its node, rank, NPU
    roles = [i["role"] for i in log001["incidents"]]  # type: ignore[union-attr,index]
    assert {role: roles.count(role) for role in roles} == {
        role: len(found) for role, found in _roles(scan).items()}


@pytest.mark.parametrize("case", sorted(p.name for p in FD.iterdir() if p.is_dir()))
def test_log001_diagnoses_each_job_case_as_logs_scan_does(tmp_path: Path, case: str) -> None:
    """Every job case kept as a folder (ascend-fd's fixtures): `check --logs JOB` reads it with the job layer
    through the runner and says the verdict `logs scan JOB` says, with the same incidents."""
    import shutil

    from npudoctor.probes.runner import LiveRunner

    job = tmp_path / case  # outside the current folder: both name the logs by the same absolute path
    shutil.copytree(FD / case, job)
    _assert_log001_says_what_logs_scan_says(_log001_diagnosis(LiveRunner(), str(job)), _scan(job))


def test_log001_names_node_rank_and_npu_of_node_folders_given_one_by_one(tmp_path: Path) -> None:
    """`check --logs node-a --logs node-b` (repeated --logs, the command line) is `logs scan node-a node-b`:
    8 ranks on 2 nodes, the root named by its node and NPU, never "NPU 0" of "4 ranks"."""
    job = exception_job(tmp_path)
    nodes = [str(job / "node-a"), str(job / "node-b")]
    scan = _scan(*map(Path, nodes))
    assert scan.diagnosis.verdict.startswith("Root cause: node-a NPU 0 AI Vector core exception")
    assert "7 ranks then timed out" in scan.diagnosis.verdict
    out = CliRunner().invoke(main, ["check", "--only", "LOG001", "--logs", nodes[0], "--logs", nodes[1],
                                    "--format", "json"])
    assert out.exit_code == 1, out.output
    (log001, *_rest) = json.loads(out.output)["findings"]
    _assert_log001_says_what_logs_scan_says({"verdict": log001["detail"], **log001["evidence"]}, scan)
    # the whole job folder given once reads the same
    from npudoctor.probes.runner import LiveRunner

    _assert_log001_says_what_logs_scan_says(_log001_diagnosis(LiveRunner(), str(job)), _scan(job))


def test_log001_reads_a_job_tree_under_root(tmp_path: Path) -> None:
    """`check --root DIR --logs /job`: the job tree is read under the root (system paths), the verdict and
    the places are those `logs scan DIR/job` gives; only the evidence's paths are the system's."""
    from tests.fakenode import FakeNode

    node = FakeNode(tmp_path / "node")
    job = exception_job(node.path("/var"))  # /var/job on the node
    log001 = _log001_diagnosis(node.runner(), "/var/job")
    scan = _scan(job)
    assert log001["verdict"] == scan.diagnosis.verdict and log001["diagnosis"] == scan.diagnosis.to_dict()
    places = [(i["node"], i["rank"], i["device"], i["role"]) for i in log001["incidents"]]  # type: ignore[union-attr,index]
    assert places == [(i.node, i.rank, i.device, i.role) for i in scan.incidents]
    assert all(s.startswith("/var/job/node-") for i in log001["incidents"] for s in i["sources"])  # type: ignore[union-attr,index]


def test_log001_finds_the_silent_rank_of_a_torchrun_log_dir(tmp_path: Path) -> None:
    """torchrun's --log-dir through the runner: each log's end (its last time, the ranks it names) is read
    from what LOG001 read, so the rank that stopped logging is named as logs scan names it."""
    from npudoctor.probes.runner import LiveRunner

    logs = _silent_job(tmp_path / "logs", "unknown")
    log001 = _log001_diagnosis(LiveRunner(), str(logs))
    _assert_log001_says_what_logs_scan_says(log001, _scan(logs))
    assert log001["diagnosis"]["ranks"]["silent"] == ["rank 2"]  # type: ignore[index]
