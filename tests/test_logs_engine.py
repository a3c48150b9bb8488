"""The scan engine on bytes: streaming, line numbers, bad input, record grammar, rules and the code base."""

from __future__ import annotations

import pytest

from npudoctor.logs import codes
from npudoctor.logs.rules import RulesError, load_rules, parse_rules
from npudoctor.logs.scanner import LONG_LINE_PIECE as MAX_LINE_BYTES
from npudoctor.logs.scanner import MAX_MATCH_CHARS, RuleSet, Scanner
from tests.samples import sample_data

PLOG = sample_data("plog_debug_aicore_error_2025.log")
CONSOLE = sample_data("stdout_vllm_ascend_507011_event_query_EL0003.txt")
INFO = b"[INFO] GE(7,python3):2025-05-08-09:56:18.522.534 [graph.cc:12]7 Build:[INIT][DEFAULT]step ok\n"
ERROR_507011 = (b"[ERROR] RUNTIME(10043,main):2021-03-31-18:59:42.312.957 [api_c.cc:1482]10043 "
                b"rtModelExecute:ErrCode=507011, desc=[the model stream execute failed], "
                b"InnerCode=0x7150050\n")


def scan(data: bytes, chunk: int = 0):
    scanner = Scanner()
    if chunk:
        summary = scanner.scan_stream("f.log", (data[i:i + chunk] for i in range(0, len(data), chunk)))
    else:
        summary = scanner.scan_bytes("f.log", data)
    return summary, scanner.result()


def digest(result):
    return [(f.kind, f.subject, f.severity, f.count, str(f.first), str(f.last)) for f in result.findings]


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_chunking_never_changes_what_is_found(chunk: int) -> None:
    data = PLOG + CONSOLE
    _, whole = scan(data)
    summary, streamed = scan(data, chunk)
    assert digest(streamed) == digest(whole)
    assert streamed.levels == whole.levels and streamed.modules == whole.modules
    assert summary.lines == data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def test_line_numbers_point_at_the_record() -> None:
    data = INFO * 1000 + ERROR_507011 + INFO * 10 + ERROR_507011
    summary, result = scan(data, chunk=10_000)
    (finding,) = result.findings
    assert (finding.kind, finding.subject, finding.count) == ("error_code", "507011", 2)
    assert str(finding.first) == "f.log:1001" and str(finding.last) == "f.log:1012"
    assert finding.code is not None and finding.code.title == "ACL_ERROR_RT_MODEL_EXECUTE"
    assert summary.format == "plog" and summary.records == 1012
    assert result.levels == {"INFO": 1010, "ERROR": 2}
    assert result.modules == {"GE": 1010, "RUNTIME": 2}


def test_records_prefixed_or_indented_by_other_loggers_are_records() -> None:
    data = (b"run/plog/plog-1_2.log:" + ERROR_507011 + b"    " + INFO + b"[rank0]: " + INFO
            + b"some console text\n" * 3)
    summary, result = scan(data)
    assert summary.records == 3
    assert result.levels == {"ERROR": 1, "INFO": 2}
    assert [f.subject for f in result.findings] == ["507011"]


def test_crlf_gbk_junk_and_truncated_last_line() -> None:
    chinese = "[ERROR] HCCL(9,python):2025-01-01-00:00:00.000.000 [a.cc:1][9]通信超时 get socket timeout!\r\n"
    data = (b"\x00\xff\xfe garbage \x81\x00\r\n" + chinese.encode("gbk") + INFO.replace(b"\n", b"\r\n")
            + ERROR_507011.rstrip(b"\n"))  # no final newline
    summary, result = scan(data, chunk=5)
    assert summary.status == "ok" and summary.lines == 4
    timeout = next(f for f in result.findings if f.kind == "hccl_timeout")
    assert "通信超时" in timeout.sample and not timeout.sample.endswith("\r")
    assert str(timeout.first) == "f.log:2"
    assert any(f.subject == "507011" and str(f.first) == "f.log:4" for f in result.findings)


def test_binary_input_is_scanned_and_reported_as_binary() -> None:
    data = bytes(range(256)) * 4096 + b"\n" + ERROR_507011
    summary, result = scan(data, chunk=65536)
    assert summary.format == "binary"
    assert any(f.subject == "507011" for f in result.findings)


def test_a_line_without_newline_is_read_in_pieces_and_keeps_its_number() -> None:
    """A log whose newlines were lost is read in full, in bounded pieces that all carry the line's number:
    a code 2 MiB into the line is found on line 1, and the next line is still line 2."""
    long_line = b"x" * (2 << 20) + b" rtModelExecute:ErrCode=507035 " + b"y" * (MAX_LINE_BYTES * 3) + b"\n"
    summary, result = scan(long_line + ERROR_507011, chunk=1 << 20)
    assert summary.cut_lines == 1 and summary.lines == 2
    found = {f.subject: (f.first.line, f.last.line) for f in result.findings}
    assert found == {"507035": (1, 1), "507011": (2, 2)}


def test_records_whose_newlines_were_lost_are_counted_like_lines() -> None:
    record = b"[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.001 [api_c.cc:9]1 rtModelExecute:ErrCode=507011 "
    info = b"[INFO] GE(1,python):2025-01-01-00:00:00.000.000 [a.cc:1]1 all fine "
    flat = (info * 9 + record) * 2000
    summary, result = scan(flat, chunk=1 << 16)
    assert summary.lines == 1 and summary.records == 20000
    assert [(f.subject, f.count) for f in result.findings] == [("507011", 2000)]


def test_read_error_midway_marks_the_file_partial_and_keeps_what_was_read() -> None:
    def chunks():
        yield ERROR_507011
        raise OSError(5, "Input/output error")

    scanner = Scanner()
    summary = scanner.scan_stream("disk.log", chunks())
    assert (summary.status, summary.error) == ("partial", "Input/output error")
    assert [f.subject for f in scanner.result().findings] == ["507011"]


def test_operator_fallbacks_are_merged_per_operator_type() -> None:
    warning = ("[W compiler_depend.ts:51] Warning: CAUTION: The operator '{}' is not currently supported "
               "on the NPU backend and will fall back to run on the CPU. "
               "This may have performance implications. (function npu_cpu_fallback)\n")
    data = "".join(warning.format(op) for op in ("aten::isin", "aten::unique", "aten::isin")).encode()
    _, result = scan(data)
    assert {(f.kind, f.subject, f.count, f.severity) for f in result.findings} == {
        ("cpu_fallback", "aten::isin", 2, "fallback"), ("cpu_fallback", "aten::unique", 1, "fallback")}


def test_bare_error_and_warning_records_are_reported_per_module() -> None:
    data = (b"[ERROR] TEFUSION(1,atc.bin):2021-01-01-00:00:00.000.000 [x.py:1] something broke\n"
            b"[WARNING] GE(1,atc.bin):2021-01-01-00:00:00.000.000 [y.cc:2]1 odd\n")
    _, result = scan(data)
    assert {(f.kind, f.subject, f.severity) for f in result.findings} == {
        ("error_record", "TEFUSION", "error"), ("warning_record", "GE", "warn")}


def test_slogd_own_log_grammar() -> None:
    data = (b"2025-05-07 19:54:54.608[INFO] log_path_mgr.c:123: start\n"
            b"2025-05-07 19:54:55.001[ERROR] log_server.c:77: write failed\n")
    summary, result = scan(data)
    assert summary.format == "slogd" and summary.records == 2
    assert result.levels == {"INFO": 1, "ERROR": 1}
    assert [(f.kind, f.subject) for f in result.findings] == [("error_record", "SLOGD")]


def test_site_rules_add_a_kind_and_replace_by_id(tmp_path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(
        "rules:\n"
        "  - id: nfs-stale\n    kind: storage\n    severity: warn\n    hints: ['Stale file handle']\n"
        "    pattern: 'Stale file handle: (?P<subject>\\S+)'\n"
        "  - id: atc-success\n    kind: atc_success\n    severity: warn\n    hints: ['ATC run success']\n"
        "    pattern: 'ATC run success'\n", encoding="utf-8")
    rules = load_rules([str(site)])
    scanner = Scanner(rules)
    scanner.scan_bytes("x", b"OSError: Stale file handle: /data/ckpt\n"
                            b"ATC run success, welcome to the next use.\n")
    found = {(f.kind, f.subject, f.severity) for f in scanner.result().findings}
    assert found == {("storage", "/data/ckpt", "warn"), ("atc_success", "atc_success", "warn")}


@pytest.mark.parametrize("text, message", [
    ("rules: 3\n", "a 'rules' list"),
    ("rules:\n  - id: x\n    kind: k\n    hints: [a]\n", "lacks pattern"),
    ("rules:\n  - {id: x, kind: k, hints: [a], pattern: '('}\n", "bad pattern"),
    ("rules:\n  - {id: x, kind: k, hints: [a], pattern: a, severity: fatal}\n", "severity must be"),
    ("rules: [\n", "not valid YAML"),
])
def test_bad_rule_files_give_one_line_reasons(tmp_path, text: str, message: str) -> None:
    site = tmp_path / "bad.yaml"
    site.write_text(text, encoding="utf-8")
    with pytest.raises(RulesError, match=message):
        load_rules([str(site)])


def test_parse_rules_accepts_a_single_hint_string() -> None:
    (rule,) = parse_rules({"rules": [{"id": "a", "kind": "k", "hints": "x", "pattern": "x"}]}, "t")
    assert rule.hints == ("x",) and rule.severity == "error"
    assert isinstance(RuleSet((rule,)).all_hints, tuple)


@pytest.mark.parametrize("code, title, exact", [
    ("EZ9999", "AclNN_Inner_Error", True),
    ("ei0006", "Communication_Error_Get_Socket", True),  # the registry's own title
    ("ERR00100", "PTA call acl api failed", True),
    ("500001", "ACL_ERROR_FAILURE", True),
    ("507048", "ACL_ERROR_RT_FFTS_PLUS_TIMEOUT", True),
    ("EH9999", "ACL inner error", True),
    ("EI0042", "HCCL errors", False),
    ("507777", "AscendCL internal error", False),
    ("0x0000000005010001", "HCCL errNo", False),
])
def test_explain_codes_exactly_or_by_family(code: str, title: str, exact: bool) -> None:
    info = codes.explain(code)
    assert info is not None and (info.title, info.exact) == (title, exact)
    assert info.meaning and info.fix


@pytest.mark.parametrize("text", ["", "hello", "12", "E12", "99999999999"])
def test_explain_rejects_what_is_not_a_code(text: str) -> None:
    assert codes.explain(text) is None


def test_w_codes_are_warnings() -> None:
    info = codes.explain("W11001")
    assert info is not None and info.severity == "warn"


def test_engine_chain_merges_per_operator_type_with_the_engines_that_refused_it() -> None:
    _, result = scan(sample_data("stdout_EZ3003_engine_chain_constructed.txt"))
    by_kind = {f.kind: f for f in result.findings}
    rejected = by_kind["op_rejected"]
    assert (rejected.subject, rejected.count, rejected.severity) == ("TransData", 3, "fallback")
    assert rejected.details["engine"] == {"AIcoreEngine", "DNN_VM_HOST_CPU_OP_STORE", "aicpu_ascend_kernel"}
    assert (by_kind["no_engine"].subject, by_kind["no_engine"].severity) == ("TransData", "error")
    assert rejected.to_dict()["evidence"]["engine"] == sorted(rejected.details["engine"])


@pytest.mark.parametrize("line, code", [
    ("build op model failed, result = 500001", "500001"),
    ("synchronize stream with timeout failed, runtime result = 507011[FUNC:ReportCallError]", "507011"),
    ("Execute op failed. op type = MaskedSelect, ge result = 1343225857", "1343225857"),
    ("Training result = 123456 samples", None),
    ("epoch 3 done, error code is 0", None),
])
def test_numeric_codes_only_where_cann_prints_them(line: str, code) -> None:
    found = [h.subject for h in Scanner().analyze_line(line) if h.kind == "error_code"]
    assert found == ([code] if code else [])


def test_distinct_subjects_are_capped_so_memory_stays_bounded(monkeypatch) -> None:
    from npudoctor.logs import scanner as scanner_module

    monkeypatch.setattr(scanner_module, "MAX_SUBJECTS_PER_KIND", 3)
    lines = "".join(f"ImportError: lib{i}.so: cannot open shared object file: No such file or directory\n"
                    for i in range(10))
    _, result = scan(lines.encode())
    counts = {f.subject: f.count for f in result.findings}
    assert counts == {"lib0.so": 1, "lib1.so": 1, "lib2.so": 1, scanner_module.OTHER_SUBJECT: 7}


def test_engine_is_pure_and_light() -> None:
    """The engine (used by LOG001 and the library doctor) pulls in no UI, CLI or heavy modules."""
    import subprocess
    import sys

    code = ("import sys, npudoctor.logs.scanner, npudoctor.logs.codes; "
            "print(sorted(m for m in ('rich', 'click', 'torch', 'numpy', 'pandas') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("line", [
    "[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.001 [api.cc:1]1 launch failed, ERRCODE=507011",
    "RuntimeError: Error Code Is 507011 (see EZ9999 above)",
    "EZ9999: Inner Error! ... errNo[0x0000000005010009] ... result[207008] ... EI0006",
    "torch_npu ERR00100 then error code is 507035 then EE8888",
])
def test_the_scanner_reads_codes_like_find_codes(line: str) -> None:
    """One reader of error codes: the scan and LIB005 (codes.find_codes) see the same codes in one order."""
    from npudoctor.logs.codes import find_codes

    scanned = [hit.subject for hit in Scanner().analyze_line(line) if hit.kind == "error_code"]
    assert scanned == find_codes(line) and scanned


def test_records_glued_by_concurrent_writers_are_counted_and_read() -> None:
    glued = (b"[INFO] HCCL(17528,python3):2026-03-18-10:33:52.113.960 [transport.cc:88] send ret[9]"
             b"[ERROR] HCCL(17528,python3): 2026-03-18-10:33:52.113.964 [transport_manager.cc:1402] link EI0006\n"
             b"[INFO] GE(1,python):2026-03-18-10:33:52.113.970 [a.cc:1] ok\n")
    scanner = Scanner()
    summary = scanner.scan_bytes("plog", glued)
    result = scanner.result()
    assert (summary.lines, summary.records) == (2, 3)
    assert result.levels == {"INFO": 2, "ERROR": 1}
    assert [(f.kind, f.subject, f.first.line) for f in result.findings] == [("error_code", "EI0006", 1)]


def test_a_site_rule_format_cannot_turn_text_into_a_plog(tmp_path) -> None:
    """The format vote counts plog records once (summary.records), not again under a vote key."""
    rules = tmp_path / "site.yaml"
    rules.write_text('rules:\n- {id: r, kind: k, pattern: "step", hints: [step], format: records, '
                     'severity: info}\n', encoding="utf-8")
    scanner = Scanner(load_rules([str(rules)]))
    summary = scanner.scan_bytes("train.out", b"step 1\nstep 2\nstep 3\n"
                                 b"[ERROR] GE(1,p):2025-01-01-00:00:00.000.000 [a.cc:1]1 x\n")
    assert summary.format == "text"


def test_pastes_from_issue_trackers_still_read() -> None:
    """Quote prefixes and lines hard-wrapped at ~80 columns, as a bug report or a mail reply holds them: a
    code cut from its context by the wrap is found, on the line where its record starts, and the line
    numbers after it stay right."""
    paste = (b"> We see this on every rank:\n"
             b"> [ERROR] RUNTIME(2955986,python):2024-07-04-13:26:17.411.126\n"
             b"> [stream.cc:1100]2955986 Synchronize: Stream synchronize failed, error code is\n"
             b"> 507035\n"
             b"> > [ERROR] GE(1,python):2024-07-04-13:26:17.411.200 [graph.cc:1]1 run graph failed, ErrorNo:\n"
             b"> > 1343225857(Parameter's invalid!)\n"
             b"> [ERROR] HCCL(1,x):2024-07-04-13:26:18.000.000 [a.cc:1]1 EI0006\n")
    summary, result = scan(paste)
    found = {f.subject: f.first.line for f in result.findings if f.kind == "error_code"}
    assert found == {"507035": 2, "1343225857": 5, "EI0006": 7}
    assert summary.lines == 7 and summary.records == 3


def _dense_plog() -> bytes:
    """A job looping on errors, from real sample lines: every plog/device record line of the samples, the
    ERROR/WARNING ones (glued records, markers inside INFO/EVENT lines, hint lines among them) five times
    over, then messages longer than what is matched, a CRLF line and a GB18030 one; the first line is an
    ERROR record."""
    from tests.samples import SAMPLES, sample_bytes

    lines = []
    for path in sorted((SAMPLES / "logs").iterdir()):
        if path.name.startswith(("plog_", "device_")):
            lines.extend(line for line in sample_bytes(path).splitlines() if line.startswith(b"["))
    errors = [line for line in lines if b"[ERROR]" in line or b"[WARNING]" in line]
    body = []
    for round_ in range(5):
        body.extend(errors)
        body.extend(lines[round_::5])
    gbk = "[ERROR] GE(1,python):2025-01-01-00:00:00.000.000 [a.cc:1]1 模型执行失败 ErrCode=507011".encode("gb18030")
    # Messages longer than what is matched, the same but for their pid's length or for their far end.
    long = [b"[ERROR] RUNTIME(%d,python):2025-01-01-00:00:00.000.000 [a.cc:1]1 " % pid
            + b"x" * (MAX_MATCH_CHARS - 60 + shift) + b" ErrCode=507011" + end
            for pid in (1, 123456) for shift in (0, 40) for end in (b"", b" EZ9999")]
    return b"\n".join([errors[0], *body, *long, errors[1] + b"\r", gbk, *body[:3000]]) + b"\n"


@pytest.mark.parametrize("chunk", [0, 4096, 100_000])
def test_error_dense_plog_reads_exactly_like_line_by_line(monkeypatch, chunk: int) -> None:
    """The error-dense fast path (one pass keeps ERROR/WARNING lines by shape) finds what the line-by-line
    path finds: counts, first and last lines, samples, records per level and module, examined lines."""
    from npudoctor.elf.compiled import PURE_PYTHON_VARIABLE
    from npudoctor.logs import scanner as scanner_module

    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")  # the pure-Python passes (tests/test_logs_compiled.py: C)
    data = _dense_plog()
    dense_chunks = []
    real_dense = Scanner._scan_dense_plog

    def spy(self, *args):
        after = real_dense(self, *args)
        dense_chunks.append(after is not None)
        return after

    monkeypatch.setattr(Scanner, "_scan_dense_plog", spy)
    fast_summary, fast = scan(data, chunk)
    # (A chunk's single carried-over line has no line start before it: it goes the usual way.)
    assert dense_chunks.count(True) >= max(1, len(data) // (chunk or len(data)) // 2)
    monkeypatch.setattr(scanner_module, "_looks_error_dense", lambda *args: False)
    slow_summary, slow = scan(data, chunk)
    assert [f.to_dict() for f in fast.findings] == [f.to_dict() for f in slow.findings]
    assert (fast.levels, fast.modules, fast.codes) == (slow.levels, slow.modules, slow.codes)
    assert fast_summary.to_dict() == slow_summary.to_dict()
    assert fast_summary.examined_lines == sum(b"[ERROR]" in line or b"[WARNING]" in line or b"[fault_manager]"
                                              in line or b"[AIC_INFO] node_name:" in line
                                              for line in data.splitlines())
    assert len(fast.findings) > 20 and fast.levels["ERROR"] > fast.levels["INFO"]
    assert fast.codes["507011"] == slow.codes["507011"] > 8


def test_error_dense_shape_cache_keeps_no_long_message(monkeypatch) -> None:
    from npudoctor.elf.compiled import PURE_PYTHON_VARIABLE
    from npudoctor.logs.scanner import MAX_KEPT_MESSAGE_BYTES

    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")  # the pure-Python error-dense pass keeps that cache
    scanner = Scanner()
    scanner.scan_bytes("f.log", _dense_plog())
    assert scanner._raw_shape_hits and all(len(message) <= MAX_KEPT_MESSAGE_BYTES
                                           for _, message in scanner._raw_shape_hits)


def test_error_dense_shape_cache_is_bounded(monkeypatch) -> None:
    from npudoctor.logs import scanner as scanner_module

    data = _dense_plog()
    _, whole = scan(data)
    monkeypatch.setattr(scanner_module, "MAX_SHAPES", 5)  # the cache starts over again and again
    _, bounded = scan(data, 4096)
    assert [f.to_dict() for f in bounded.findings] == [f.to_dict() for f in whole.findings]


def test_read_ahead_keeps_order_and_raises_read_errors_in_place() -> None:
    import time

    from npudoctor.logs.engine import read_ahead

    def failing():
        yield b"a"
        yield b"b"
        raise OSError(5, "Input/output error")

    got = []
    with pytest.raises(OSError, match="Input/output"):
        for chunk in read_ahead(failing()):
            got.append(chunk)
    assert got == [b"a", b"b"]

    reads = []

    def slow():
        for index in range(5):
            time.sleep(0.01)
            reads.append(index)
            yield bytes([index])

    chunks = read_ahead(slow())
    assert next(chunks) == b"\x00"
    chunks.close()  # waits for the read in flight: the file may be closed right after
    done = len(reads)
    time.sleep(0.05)
    assert len(reads) == done <= 2  # one chunk ahead at most, nothing read after close


def test_a_big_file_read_ahead_scans_like_its_bytes(tmp_path, monkeypatch) -> None:
    from npudoctor.logs import engine
    from npudoctor.logs.engine import scan_paths
    from npudoctor.logs.scanner import CHUNK_BYTES

    read_ahead = engine.read_ahead
    used = []
    monkeypatch.setattr(engine, "read_ahead", lambda chunks: used.append(1) or read_ahead(chunks))

    data = (PLOG * (CHUNK_BYTES // len(PLOG) + 2))[:CHUNK_BYTES + 100_000]
    data = data[:data.rfind(b"\n") + 1] + ERROR_507011
    path = tmp_path / "plog-1_20250101000000000.log"
    path.write_bytes(data)
    from_file = scan_paths([str(path)], cwd=str(tmp_path))
    scanner = Scanner()
    summary = scanner.scan_bytes(path.name, data)
    from_bytes = scanner.result()
    assert [f.to_dict() for f in from_file.findings] == [f.to_dict() for f in from_bytes.findings]
    assert from_file.files[0].lines == summary.lines and from_file.levels == from_bytes.levels
    assert used  # a file of more than one chunk is read ahead


def test_plog_record_variants_are_records() -> None:
    """(constructed lines) The record shapes other writers and copies produce: a space after the comma of
    `(pid, proc)`, a space between date and time, modules not seen in the samples (ROCE, HCCP, DRV, KERNEL),
    mangled level words (`[ERRO]`, `[WARN]`, `[error]`): counted as records, levels as CANN's own words, and
    the ERROR/WARNING ones reported per module."""
    lines = [b"[ERROR] ROCE(1234, hccp_service.bin):2024-07-04-13:26:26.139.276 [rs.c:12]1234 rs_socket failed",
             b"[ERROR] HCCP(1234,hccp_service.bin):2024-07-04 13:26:26.139.276 [ra.c:12]1234 qp create failed",
             b"[WARNING] DRV(99,python):2024-07-04-13:26:26.139.276 [devdrv.c:1]99 device busy",
             b"[ERROR] KERNEL(1,kworker):2024-07-04-13:26:26.139.276 [k.c:1]1 oops",
             b"[ERRO] RUNTIME(5,python):2024-07-04-13:26:26.139.276 [x.cc:1]5 bad",
             b"[WARN] RUNTIME(5,python):2024-07-04-13:26:26.139.276 [x.cc:1]5 warn",
             b"[error] RUNTIME(5,python):2024-07-04-13:26:26.139.276 [x.cc:1]5 lower"]
    for repeat in (1, 400):  # the usual path, and the error-dense one
        scanner = Scanner()
        summary = scanner.scan_bytes("p.log", b"\n".join(lines * repeat) + b"\n")
        result = scanner.result()
        assert summary.format == "plog" and summary.records == 7 * repeat
        assert dict(result.levels) == {"ERROR": 5 * repeat, "WARNING": 2 * repeat}
        found = {(f.kind, f.subject): f.count for f in result.findings}
        assert found == {("error_record", "RUNTIME"): 2 * repeat, ("error_record", "HCCP"): repeat,
                         ("error_record", "KERNEL"): repeat, ("error_record", "ROCE"): repeat,
                         ("warning_record", "DRV"): repeat, ("warning_record", "RUNTIME"): repeat}
