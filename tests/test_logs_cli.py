"""`npudoctor logs scan`: inputs, output formats, --fail-on and exit codes (0 / 1 / 2)."""

from __future__ import annotations

import gzip
import json
import os
from xml.etree import ElementTree as ET

import pytest

from npudoctor.cli import main
from tests.clirunner import cli_runner
from tests.samples import sample_data, sample_path


def run(args, stdin=None):
    # Wide, so that what is asserted is the content; the 80-column layout has its own test and goldens.
    return cli_runner().invoke(main, ["logs", "scan", *args], input=stdin, env={"COLUMNS": "1000"})


@pytest.fixture
def logdir(tmp_path):
    """An ~/ascend/log-like tree: run/plog with an AI Core error, debug/plog clean, a torch_npu console."""
    (tmp_path / "run" / "plog").mkdir(parents=True)
    (tmp_path / "debug" / "plog").mkdir(parents=True)
    (tmp_path / "run" / "plog" / "plog-2955986_20240704132617000.log").write_bytes(
        sample_data("plog_run_runtime_idedd_errors_2024.log"))
    (tmp_path / "debug" / "plog" / "plog-1_20210331185941176.log").write_bytes(
        sample_data("plog_2021_acl_runtime_head.log"))
    (tmp_path / "console.txt").write_bytes(sample_data("stdout_torch_npu_cpu_fallback_ERR01007.txt"))
    (tmp_path / "notes.md").write_text("not a log", encoding="utf-8")
    return tmp_path


def test_directory_walk_json_schema_and_exit_code(logdir) -> None:
    result = run([str(logdir), "--format", "json"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "npudoctor.logs/2"  # /2 keeps every /1 key and adds incidents and diagnosis
    paths = [os.path.relpath(f["path"], logdir) for f in doc["files"]]
    assert paths == ["console.txt", "debug/plog/plog-1_20210331185941176.log",
                     "run/plog/plog-2955986_20240704132617000.log"]
    assert [f["format"] for f in doc["files"]] == ["torch_npu", "plog", "plog"]
    assert all(f["status"] == "ok" and f["records"] >= 0 for f in doc["files"])
    summary = doc["summary"]
    assert summary["levels"]["ERROR"] == 62 and summary["modules"]["RUNTIME"] > 0
    assert summary["codes"]["507035"] == 5
    kinds = {(f["kind"], f["subject"]) for f in doc["findings"]}
    assert ("cpu_fallback", "aten::linalg_lstsq.out") in kinds
    assert ("aicore_exception", "vector core exception") in kinds
    vector = next(f for f in doc["findings"] if f["subject"] == "507035")
    assert vector["explain"]["title"] == "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION"
    assert vector["evidence"]["first"].startswith(str(logdir / "run" / "plog"))
    assert doc["exit_code"] == 1 and doc["fail_on"] == ["error"]


@pytest.mark.parametrize("fail_on, code", [
    ([], 1),                                # default: error (ERR01007 is an error code)
    (["--fail-on", "fallback"], 1),
    (["--fail-on", "cpu_fallback"], 1),     # a finding kind
    (["--fail-on", "ERR01007"], 1),         # a code
    (["--fail-on", "EZ3002,507011"], 0),    # codes that are not there
    (["--fail-on", "info"], 0),
    (["--fail-on", "aicore_exception"], 0),
])
def test_fail_on_selects_what_fails(fail_on, code) -> None:
    result = run([str(sample_path("torch_npu_cpu-fallback-warning_ERR01007_torch_npu-doc.txt")), *fail_on])
    assert result.exit_code == code, result.output


def test_fail_on_fallback_without_errors(tmp_path) -> None:
    log = tmp_path / "train.out"
    log.write_bytes(sample_data("torch_npu_cpu-fallback-warning_ERR01007_torch_npu-doc.txt")
                    .splitlines(keepends=True)[0])  # only the fallback warning line
    assert run([str(log)]).exit_code == 0
    assert run([str(log), "--fail-on", "warn"]).exit_code == 0
    assert run([str(log), "--fail-on", "fallback"]).exit_code == 1


def test_clean_input_exits_0(tmp_path) -> None:
    log = tmp_path / "plog-1_1.log"
    log.write_bytes(sample_data("plog_run_info_ge_tdt_2024.log"))
    result = run([str(log)])
    assert result.exit_code == 0, result.output
    assert "nothing found that needs attention" in result.stdout


def test_atc_success_with_slow_operators_fails_only_on_warn() -> None:
    path = str(sample_path("atc_success_W11001_constructed.txt"))
    assert run([path]).exit_code == 0
    warned = run([path, "--fail-on", "warn", "--format", "json"])
    assert warned.exit_code == 1
    slow = [f for f in json.loads(warned.stdout)["findings"] if f["kind"] == "slow_operator"]
    assert {(f["subject"], f["count"]) for f in slow} == {("Slice_29", 2), ("Gather_12", 1)}


def test_stdin_and_gzip(tmp_path) -> None:
    data = sample_data("plog_runtime_ffts_vector_core_exception_3lines.log")
    zipped = tmp_path / "plog-1_2.log.gz"
    zipped.write_bytes(gzip.compress(data))
    result = run(["-", str(zipped), "--format", "json"], stdin=data)
    doc = json.loads(result.stdout)
    assert [f["path"] for f in doc["files"]] == ["<stdin>", str(zipped)]
    assert [f["records"] for f in doc["files"]] == [3, 3]
    vector = next(f for f in doc["findings"] if f["subject"] == "vector core exception")
    assert vector["count"] == 2


def test_unreadable_file_is_reported_and_the_others_still_scanned(tmp_path) -> None:
    good = tmp_path / "a.log"
    good.write_bytes(sample_data("plog_runtime_ffts_vector_core_exception_3lines.log"))
    cut_gz = tmp_path / "b.log.gz"
    cut_gz.write_bytes(gzip.compress(os.urandom(100000))[:2000])  # a .gz cut short: not decompressible
    result = run([str(good), str(tmp_path / "missing.log"), str(cut_gz), "--format", "json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    statuses = {os.path.basename(f["path"]): f["status"] for f in doc["files"]}
    assert statuses == {"a.log": "ok", "missing.log": "unreadable", "b.log.gz": "partial"}
    assert doc["summary"]["unreadable"] == 1
    # the vector core exception lines carry no ACL code, only the task scheduler's retCode=0x31
    assert doc["summary"]["codes"] == {"0x31": 1}
    assert "missing.log: no such file or directory" in result.stderr
    assert "b.log.gz" in result.stderr


def test_nothing_readable_is_exit_2(tmp_path) -> None:
    result = run([str(tmp_path / "nope.log")])
    assert result.exit_code == 2
    assert "nothing readable" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("args, message", [
    (["--fail-on", "bogus"], "--fail-on 'bogus'"),
    (["--rules", "/nonexistent/rules.yaml"], "no such file"),
])
def test_usage_errors_are_exit_2_with_one_line(tmp_path, args, message) -> None:
    log = tmp_path / "a.log"
    log.write_text("hello\n", encoding="utf-8")
    result = run([str(log), *args])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_junit_output(logdir) -> None:
    result = run([str(logdir), "--format", "junit", "--fail-on", "error,fallback"])
    root = ET.fromstring(result.stdout)
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    failures = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures", "-1")) == len(failures) > 0
    fallback = next(c for c in cases if c.get("name") == "cpu_fallback aten::linalg_lstsq.out")
    failure = fallback.find("failure")
    assert failure is not None and failure.get("type") == "fallback"
    assert "console.txt:1" in (failure.text or "")


def test_github_annotations(logdir) -> None:
    result = run([str(logdir), "--format", "github"])
    lines = result.stdout.splitlines()
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    fallback = next(line for line in lines if "cpu_fallback" in line)
    assert fallback.startswith("::warning file=")
    assert f"file={logdir}/console.txt,line=1," in fallback
    # the 507035 finding is part of the AI Core incident: one annotation for the incident, the verdict first
    error = next(line for line in lines if "root%3A" in line and "507035" in line)
    assert error.startswith("::error ") and "%0A" in error and "Root cause" in error  # multi-line escaped


def test_human_output_explains_codes(logdir) -> None:
    result = run([str(logdir), "-v"])
    assert result.exit_code == 1
    text = result.stdout
    assert "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION" in text
    assert "cpu_fallback aten::linalg_lstsq.out" in text
    assert "sample:" in text
    assert "summary:" in text.splitlines()[-1]


def test_parallel_ranges_give_the_same_report_as_one_pass(tmp_path, monkeypatch) -> None:
    from npudoctor.logs import engine

    body = b"".join(sample_data(name) for name in (
        "plog_run_runtime_idedd_errors_2024.log", "plog_2021_acl_runtime_head.log",
        "plog_debug_engine_placement_constructed.log", "plog_stars_aivec_error_errcode_triplet_2025.log"))
    log = tmp_path / "plog-1_20250101000000000.log"
    log.write_bytes(body * 20)
    single = run([str(log), "--format", "json", "--jobs", "1"])
    from npudoctor.logs.scanner import Scanner

    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 1024)
    part_counts = []
    add_parts = Scanner.add_parts
    monkeypatch.setattr(Scanner, "add_parts", lambda self, parts: part_counts.append(len(parts))
                        or add_parts(self, parts))
    split = run([str(log), "--format", "json", "--jobs", "3"])
    assert part_counts[0] == 3  # (then the job layer adds the file's result to the merged one)
    assert split.exit_code == single.exit_code == 1
    one, many = json.loads(single.stdout), json.loads(split.stdout)
    assert many["files"] == one["files"] and many["summary"] == one["summary"]
    assert many["findings"] == one["findings"]
    assert one["files"][0]["lines"] == body.count(b"\n") * 20


def test_line_boundaries_cut_after_newlines(tmp_path) -> None:
    from npudoctor.logs.engine import line_boundaries

    log = tmp_path / "a.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(1000)))
    data = log.read_bytes()
    cuts = line_boundaries(str(log), len(data), 4)
    assert cuts[0] == 0 and cuts[-1] == len(data) and len(cuts) == 5
    assert all(data[cut - 1:cut] == b"\n" for cut in cuts[1:])


def test_permission_denied_file_is_reported_and_others_scanned(tmp_path, monkeypatch) -> None:
    from npudoctor.logs import engine

    good = tmp_path / "a.log"
    good.write_bytes(sample_data("plog_runtime_ffts_vector_core_exception_3lines.log"))
    secret = tmp_path / "secret.log"
    secret.write_text("x\n", encoding="utf-8")
    real_open = engine.open_input

    def open_input(path, *args, **kwargs):
        if path.endswith("secret.log"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(engine, "open_input", open_input)
    result = run([str(tmp_path), "--format", "json"])
    assert result.exit_code == 1
    files = {os.path.basename(f["path"]): f for f in json.loads(result.stdout)["files"]}
    secret_file = files["secret.log"]
    assert (secret_file["status"], secret_file["error"]) == ("unreadable", "Permission denied")
    assert files["a.log"]["status"] == "ok" and files["a.log"]["records"] == 3
    assert "secret.log: Permission denied" in result.stderr


def test_pipes_and_devices_are_read_as_given() -> None:
    result = run(["/dev/null", "--format", "json"])
    assert result.exit_code == 0
    (only,) = json.loads(result.stdout)["files"]
    assert (only["status"], only["format"], only["lines"]) == ("ok", "empty", 0)


def test_explain_codes() -> None:
    result = cli_runner().invoke(main, ["logs", "explain", "EI0006", "507777"])
    assert result.exit_code == 0
    assert "EI0006: Communication_Error_Get_Socket" in result.stdout and "HCCL_CONNECT_TIMEOUT" in result.stdout
    assert "507777: AscendCL internal error" in result.stdout and "explained by its family" in result.stdout
    # the same explanation, in the same layout, as `npudoctor explain`
    assert result.stdout == cli_runner().invoke(main, ["explain", "EI0006", "507777"]).stdout
    bad = cli_runner().invoke(main, ["logs", "explain", "hello"])
    assert bad.exit_code == 2 and "not a known error code: 'hello'" in bad.stderr
    # whatever is pasted: no control character reaches the terminal, and one line stays one line
    hostile = cli_runner().invoke(main, ["logs", "explain", "E\x1b[31mZ9999", "5" * 100000])
    assert hostile.exit_code == 2 and "\x1b" not in hostile.stderr and len(hostile.stderr) < 300


def test_folders_give_rotated_and_zipped_logs_and_slogdlog(tmp_path) -> None:
    """What a walk takes: plog-*.log, rotated copies (.log.1), zipped ones (.log.gz, .log.2.gz), slogdlog,
    .txt/.out console captures; what it leaves: everything else, counted as skipped."""
    data = sample_data("plog_runtime_ffts_vector_core_exception_3lines.log")
    (tmp_path / "plog-1.log").write_bytes(data)
    (tmp_path / "plog-1.log.1").write_bytes(data)
    (tmp_path / "plog-1.log.gz").write_bytes(gzip.compress(data))
    (tmp_path / "plog-1.log.2.gz").write_bytes(gzip.compress(data))
    (tmp_path / "slogdlog").write_bytes(data)
    (tmp_path / "train.out").write_bytes(data)
    (tmp_path / "model.om").write_bytes(b"\x00" * 10)
    result = run([str(tmp_path), "--format", "json"])
    doc = json.loads(result.stdout)
    assert sorted(os.path.basename(f["path"]) for f in doc["files"]) == [
        "plog-1.log", "plog-1.log.1", "plog-1.log.2.gz", "plog-1.log.gz", "slogdlog", "train.out"]
    assert all(f["records"] == 3 for f in doc["files"])
    assert [os.path.basename(s["path"]) for s in doc["skipped"]] == ["model.om"]


def test_text_output_shows_what_a_rule_read_out_of_the_lines(tmp_path) -> None:
    """The HCCL watchdog finding carries its op (subject), SeqNum, timeout and ranks in the text output too."""
    log = tmp_path / "console.txt"
    log.write_bytes(sample_data("torch_npu_hccl_watchdog_timeout_vllm-ascend-382.txt"))
    result = run([str(log), "-v"])  # -v: every finding, also those an incident holds
    out = " ".join(result.stdout.split())
    assert "hccl_timeout ALLREDUCE" in out
    assert "seen: ran_ms 3600185, 3600993; rank 0, 1; seq 196; timeout_ms 3600000" in out
