"""Hostile inputs for the log doctor: FIFOs and /dev/zero links in scanned folders, rules files that are
devices, huge, alias bombs or backtracking patterns, cut .gz files, failing stdin. Built here, small."""

from __future__ import annotations

import gzip
import io
import json
import os
import time
from pathlib import Path

import pytest

from npudoctor.cli import main
from npudoctor.model.inputs import NAMED_LINK, WALKED_LINK
from tests.bounded import run_npudoctor
from tests.clirunner import cli_runner

REPO = Path(__file__).resolve().parents[1]
ERROR_LINE = b"[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.001 [api_c.cc:9]1 rtModelExecute:ErrCode=507011\n"


def run(args, stdin=None):
    return cli_runner().invoke(main, ["logs", "scan", *args], input=stdin)


def run_child(args, timeout=20.0, cwd=None):
    """(exit code, stdout, stderr, seconds, peak RSS MiB) of ``python -m npudoctor ARGS`` in a child."""
    result = run_npudoctor(args, kill_after_s=timeout, cwd=str(cwd or REPO),
                           env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="100"))
    if result.seconds >= timeout:
        pytest.fail(f"npudoctor {' '.join(args)} hung for {timeout} s")
    return result.rc, result.stdout, result.stderr, result.seconds, result.peak_mib


@pytest.fixture
def hostile_dir(tmp_path):
    """A log folder holding a real log, a FIFO named like a log, a *.log link to /dev/zero and a *.log link
    to a file outside the folder."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "plog-1_20250101000000000.log").write_bytes(ERROR_LINE)
    os.mkfifo(folder / "plog-2_20250101000000001.log")
    (folder / "plog-3_20250101000000002.log").symlink_to("/dev/zero")
    secret = tmp_path / "secret.txt"
    secret.write_text("[ERROR] GE(1,x):2025-01-01-00:00:00.000.000 [a.cc:1]1 SECRET=hunter2\n", encoding="utf-8")
    (folder / "plog-4_20250101000000003.log").symlink_to(secret)
    return folder


def test_logs_scan_skips_fifos_devices_and_links_met_in_the_folder(hostile_dir) -> None:
    code, out, err, seconds, rss = run_child(["logs", "scan", str(hostile_dir), "--format", "json"])
    assert code == 1, err
    assert seconds < 10 and rss < 200
    doc = json.loads(out)
    assert [os.path.basename(f["path"]) for f in doc["files"]] == ["plog-1_20250101000000000.log"]
    skipped = {os.path.basename(s["path"]): s["reason"] for s in doc["skipped"]}
    assert skipped == {"plog-2_20250101000000001.log": "not a regular file (fifo)",
                       "plog-3_20250101000000002.log": WALKED_LINK,
                       "plog-4_20250101000000003.log": WALKED_LINK}
    assert "hunter2" not in out


def test_follow_symlinks_reads_regular_targets_but_never_devices(hostile_dir) -> None:
    code, out, err, seconds, _ = run_child(["logs", "scan", str(hostile_dir), "--format", "json",
                                            "--follow-symlinks"])
    assert code == 1 and seconds < 10, err
    doc = json.loads(out)
    assert len(doc["files"]) == 2  # the real log and the linked regular file
    skipped = {os.path.basename(s["path"]): s["reason"] for s in doc["skipped"]}
    assert skipped["plog-3_20250101000000002.log"] == "not a regular file (character device)"


def test_check_logs_skips_fifos_and_dev_zero(tmp_path) -> None:
    root = tmp_path / "root"
    plogs = root / "logs" / "plog"
    plogs.mkdir(parents=True)
    (plogs / "plog-1_20250101000000000.log").write_bytes(ERROR_LINE)
    os.mkfifo(plogs / "plog-2_20250101000000001.log")
    (plogs / "plog-3_20250101000000002.log").symlink_to("/dev/zero")
    code, out, err, seconds, rss = run_child(["check", "--root", str(root), "--logs", "/logs", "--only", "LOG001",
                                              "--format", "json"])
    assert code == 1 and seconds < 10 and rss < 200, err
    doc = json.loads(out)
    # the diagnosis first (issue 27), then the merged cause
    finding, *_ = [f for f in doc["findings"] if f["id"] == "LOG001"]
    assert finding["status"] == "fail" and "507011" in finding["detail"] and finding["subject"] == "diagnosis"
    scan = finding["evidence"]["scan"]
    assert scan["files_scanned"] == ["/logs/plog/plog-1_20250101000000000.log"]
    assert any("plog-2" in s and "not a regular file" in s for s in scan["skipped"])
    assert any("plog-3" in s for s in scan["skipped"])


def test_check_logs_refuses_a_linked_root_and_skips_a_linked_plog_folder(tmp_path) -> None:
    root = tmp_path / "root"
    elsewhere = root / "elsewhere" / "plog"
    elsewhere.mkdir(parents=True)
    (elsewhere / "plog-1_20250101000000000.log").write_bytes(ERROR_LINE)
    (root / "logs").mkdir()
    (root / "logs" / "plog").symlink_to("/elsewhere/plog")  # a folder of the walk that is a link
    (root / "linked").symlink_to("/elsewhere")  # the folder named with --logs is a link
    for named, said in (("/logs", f"/logs/plog: {WALKED_LINK}"), ("/linked", f"/linked: {NAMED_LINK}")):
        code, out, err, _, _ = run_child(["check", "--root", str(root), "--logs", named, "--only", "LOG001",
                                          "--format", "json"])
        assert code in (0, 1, 2) and "Traceback" not in err, err
        (finding,) = [f for f in json.loads(out)["findings"] if f["id"] == "LOG001"]
        scan = finding["evidence"].get("scan", finding["evidence"])
        assert said in scan["skipped"] + scan["problems"], finding
        assert "507011" not in finding["detail"], finding


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "huge"])
def test_rules_that_are_devices_fifos_or_huge_are_refused_at_once(tmp_path, kind) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(ERROR_LINE)
    rules = tmp_path / "rules.yaml"
    if kind == "dev-zero":
        rules_path = "/dev/zero"
    elif kind == "fifo":
        os.mkfifo(rules)
        rules_path = str(rules)
    else:
        rules.write_bytes(b"rules:\n" + b"# padding\n" * 300_000)
        rules_path = str(rules)
    code, _, err, seconds, rss = run_child(["logs", "scan", str(log), "--rules", rules_path])
    assert code == 2 and seconds < 10 and rss < 200
    assert err.startswith("npudoctor: error: ") and len(err.strip().splitlines()) == 1, err
    assert rules_path in err


def test_alias_bomb_rules_file_is_refused(tmp_path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(ERROR_LINE)
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        prev = chr(ord("a") + level - 1)
        name = chr(ord("a") + level)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines.append("rules: [*i]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err, seconds, rss = run_child(["logs", "scan", str(log), "--rules", str(bomb)])
    assert code == 2 and seconds < 10 and rss < 200, err
    assert "alias" in err and str(bomb) in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("text, message", [
    ("rules:\n- {id: x, kind: k, pattern: a, hints: [a], severty: warn}\n",
     "unknown key 'severty' (did you mean 'severity'?)"),
    ("rules:\n- {id: x, kind: k, pattern: a, hints: [a], any_level: 'yes'}\n", "any_level must be true or false"),
    ("rules:\n- {id: x, kind: k, pattern: [a], hints: [a]}\n", "pattern must be a string"),
    ("rules:\n- {id: x, kind: k, pattern: a, hints: 7}\n", "hints must be a string or a list of strings"),
    ("rule:\n- {id: x}\n", "expected a mapping with a 'rules' list"),
    ("rules: []\nextra: 1\n", "unknown key 'extra'"),
])
def test_rule_files_are_checked_against_their_schema(tmp_path, text, message) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(ERROR_LINE)
    rules = tmp_path / "site.yaml"
    rules.write_text(text, encoding="utf-8")
    result = run([str(log), "--rules", str(rules)])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("pattern, why", [
    ("(a+)+$", "repeat inside a repeat"),
    ("(\\\\w+\\\\s?)*x", "repeat inside a repeat"),
    ("failed.*rank.*timeout", "long gaps"),
])
def test_site_patterns_known_to_backtrack_are_refused(tmp_path, pattern, why) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(ERROR_LINE)
    rules = tmp_path / "site.yaml"
    rules.write_text(f'rules:\n- {{id: x, kind: k, pattern: "{pattern}", hints: [a]}}\n', encoding="utf-8")
    result = run([str(log), "--rules", str(rules)])
    assert result.exit_code == 2 and why in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_safe_site_rule_still_loads_and_sees_only_the_start_of_a_long_line(tmp_path) -> None:
    from npudoctor.logs.rules import SITE_RULE_MAX_CHARS

    rules = tmp_path / "site.yaml"
    rules.write_text('rules:\n- {id: x, kind: site_kind, pattern: "MARK (?P<subject>[^;]+);", hints: [MARK]}\n',
                     encoding="utf-8")
    log = tmp_path / "a.txt"
    log.write_bytes(b"MARK early;\n" + b"x" * (SITE_RULE_MAX_CHARS + 10) + b" MARK late;\n")
    result = run([str(log), "--rules", str(rules), "--format", "json", "--fail-on", "site_kind"])
    assert result.exit_code == 1, result.stderr
    subjects = {f["subject"] for f in json.loads(result.stdout)["findings"] if f["kind"] == "site_kind"}
    assert subjects == {"early"}


def test_truncated_gz_keeps_what_decompresses_and_says_partial(tmp_path) -> None:
    body = ERROR_LINE * 20000 + b"".join(b"[INFO] GE(1,x):2025-01-01-00:00:00.000.000 [a.cc:1]1 line %d\n" % i
                                          for i in range(20000))
    packed = gzip.compress(body)
    cut = tmp_path / "plog-1_1.log.gz"
    cut.write_bytes(packed[:len(packed) * 3 // 4])
    result = run([str(cut), "--format", "json"])
    assert result.exit_code == 1
    (summary,) = json.loads(result.stdout)["files"]
    assert summary["status"] == "partial" and summary["records"] >= 20000
    assert "partial" in result.stderr and "truncated" in result.stderr


def test_gzip_members_and_padding_read_like_gzip() -> None:
    from npudoctor.logs.engine import gunzip_chunks

    data = gzip.compress(b"one\n") + gzip.compress(b"two\n") + b"\x00" * 10
    assert b"".join(gunzip_chunks([data[:7], data[7:]], chunk_bytes=2)) == b"one\ntwo\n"


class FailingStdin(io.RawIOBase):
    """A stdin that gives one record, then an I/O error (a dropped ssh session, a dead pipe)."""

    def __init__(self) -> None:
        self.calls = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self.calls += 1
        if self.calls > 1:
            raise OSError(5, "Input/output error")
        buffer[:len(ERROR_LINE)] = ERROR_LINE
        return len(ERROR_LINE)


def test_a_stdin_read_error_is_partial_and_said() -> None:
    from npudoctor.logs.engine import scan_paths

    result = scan_paths(["-"], stdin=io.BufferedReader(FailingStdin(), buffer_size=64))
    (summary,) = result.files
    assert summary.status == "partial" and summary.error == "Input/output error"
    assert [f.subject for f in result.findings] == ["507011"]
    cli = run(["-", "--format", "json"], stdin=io.BufferedReader(FailingStdin(), buffer_size=64))
    assert cli.exit_code == 1
    assert "npudoctor: warning: <stdin>: Input/output error" in cli.stderr and "partial" in cli.stderr


def test_explicit_device_is_read_only_so_far(tmp_path) -> None:
    code, out, err, seconds, rss = run_child(["logs", "scan", "/dev/zero", "--format", "json"])
    assert code in (0, 1) and seconds < 15 and rss < 200, err
    (summary,) = json.loads(out)["files"]
    assert summary["status"] == "partial" and "device" in summary["error"]


def _literal_runs(items, out):
    """The literal pieces of a parsed pattern, in order (what a near-miss line is made of)."""
    run_ = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            run_.append(chr(arg))
            continue
        if run_:
            out.append("".join(run_))
            run_ = []
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            _literal_runs(arg[2], out)
        elif name == "SUBPATTERN":
            _literal_runs(arg[-1], out)
        elif name == "BRANCH":
            for branch in arg[1]:
                _literal_runs(branch, out)
    if run_:
        out.append("".join(run_))
    return out


def _adversarial_lines(rule, sample_texts):
    from npudoctor.logs.rules import _sre_parse
    from npudoctor.logs.scanner import MAX_MATCH_CHARS

    size = MAX_MATCH_CHARS

    def fill(unit: str) -> str:
        return (unit * (size // max(len(unit), 1) + 1))[:size]

    runs = _literal_runs(_sre_parse(rule.pattern.pattern), [])
    for hint in rule.hints[:2]:
        yield hint + "x" * size  # long, no match
        for sep in (" ", ";", "[", "_", "; ", "0x1["):  # many separators
            yield fill(hint + sep)
            yield hint + sep + fill(sep.join(runs[1:-1] or runs) + sep)
            yield fill(sep.join(runs[:-1]) + sep)
    for text in sample_texts:  # a real match without its last character, over and over (near misses)
        match = rule.pattern.search(text)
        if match:
            for sep in (" ", "; "):
                yield fill(match.group(0)[:-1] + sep)
            break


def test_every_shipped_rule_stays_fast_on_adversarial_lines() -> None:
    """device-fault-event took 4.9 s on one 16 KB line (three chained .*? gaps); every rule now stays well
    under a budget on long lines, lines without a match, lines full of separators and near misses."""
    from npudoctor.logs.rules import load_rules

    samples = REPO / "tests" / "data"
    texts = [p.read_text(encoding="utf-8", errors="replace")
             for folder in (samples / "samples" / "logs", samples / "constructed") for p in sorted(folder.iterdir())]
    slow = []
    for rule in load_rules().rules:
        for line in _adversarial_lines(rule, texts):
            start = time.perf_counter()
            rule.pattern.search(line)
            took = time.perf_counter() - start
            if took > 0.5:
                slow.append(f"{rule.id}: {took:.2f} s on {line[:60]!r}...")
                break
    assert not slow, slow


def test_shipped_fault_event_rule_still_reads_the_fields() -> None:
    from npudoctor.logs.scanner import Scanner

    line = ("[EVENT] DRV(3423,dms_poll_task):2025-05-08-03:25:04.229.345 [dms_event.c:1399][fault_manager]"
            "[27026.820643] event_id=0x80cb8002; device_id=0; node_type=0x65[AIV]; node_id=6; sub_node_id=0; "
            "event_type=0x2[input error]; severity=1[Warning]; assertion=1[Event occur];")
    (hit,) = [h for h in Scanner().analyze_line(line) if h.kind == "device_fault"]
    assert hit.subject == "AIV" and dict(hit.details) == {"event_id": "0x80cb8002", "event": "input error"}
    assert not [h for h in Scanner().analyze_line(line.replace("severity=1", "severity=0"))
                if h.kind == "device_fault"]


def test_error_dense_near_misses_scan_in_linear_time() -> None:
    """The error-dense path's record-line pattern on lines built to make it backtrack: headers cut short
    before `)`, before the timestamp, modules of 16 KiB, at every line start of a 4 MiB chunk."""
    from npudoctor.logs.scanner import Scanner

    width = 16 * 1024
    lines = [b"[ERROR] RUNTIME(1," + b"p" * width, b"[ERROR] RUNTIME(1,p): 2025-01-01-00:00:" + b"0" * width,
             b"[ERROR] " + b"A" * width + b"(", b"[WARNING] GE(" + b"-1," * (width // 3)]
    data = b"\n".join(lines * (4 * 1024 * 1024 // (len(lines) * width))) + b"\n"
    start = time.perf_counter()
    summary = Scanner().scan_bytes("f.log", data)
    assert time.perf_counter() - start < 5  # about 0.1 s; quadratic backtracking would take minutes
    assert summary.lines == data.count(b"\n") and summary.examined_lines == summary.lines


def test_code_contexts_stay_linear_on_adversarial_lines() -> None:
    """The code reader's contexts (`failed: N`, `(N)`, `ret=`, `code=`, retCode=0x, `HCCL function error: ...,
    error code is N`) on 16 KB lines made of near misses: each line is read in well under the budget."""
    from npudoctor.logs.codes import find_codes
    from npudoctor.logs.scanner import MAX_MATCH_CHARS

    units = ["failed: 50703", "(50703", "ret=10700", "code=50704", "retCode=0x", "error code is:10000",
             "HCCL function error: HcclAllReduce(", ", error code is ", "ErrorNo: 429496729", "errNo[0x"]
    for unit in units:
        line = (unit * (MAX_MATCH_CHARS // len(unit) + 1))[:MAX_MATCH_CHARS]
        start = time.perf_counter()
        find_codes(line)
        assert time.perf_counter() - start < 0.5, unit
    long_hccl = "HCCL function error: " + "x" * MAX_MATCH_CHARS + ", error code is 7"
    assert find_codes(long_hccl) == []  # the call's text is bounded: no code from 16 KB away


def test_wrapped_fallback_rejoin_stays_linear() -> None:
    """Lines full of the fallback warning's pieces that never make the whole message: the rejoin tries a few
    neighbours per piece, never more."""
    from npudoctor.logs.scanner import rejoin_wrapped_fallbacks

    pieces = [b"CAUTION: The operator 'x", b"' is not currently supported on the NPU", b"fall back to run on the CPU"]
    region = b"\n".join(pieces * 20000) + b"\n"
    start = time.perf_counter()
    assert rejoin_wrapped_fallbacks(region).count(b"\n") == region.count(b"\n")
    assert time.perf_counter() - start < 5
