"""The commands added after `check` speak its house style (issue 10): prof analyze/run, train-step, leak analyze,
dashboard's command line, collect --samples, list-checks/explain.

A header, the findings in check's finding lines, a summary and one verdict sentence last; 80 columns when piped
(wrapped, never cut); ASCII symbols on an ASCII stdout; no colour codes in a pipe or under NO_COLOR; progress on a
terminal's stderr only; JSON byte-identical on a terminal and in a pipe. Golden files pin the text at 80 columns
(regenerate with `NPUDOCTOR_REGEN_GOLDEN=1` and review the diff like code).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pytest

from npudoctor import api
from npudoctor.cli import main
from npudoctor.prof.engine import analyze
from npudoctor.report import console, github, prof_console, train_console
from npudoctor.report.github import annotation, escape_property
from npudoctor.report.progress import Progress
from npudoctor.workload import leak, memlog
from npudoctor.workload.findings import train_report
from tests import profdirs
from tests.clirunner import cli_runner
from tests.samples import sample_data, sample_text
from tests.test_golden_outputs import check_golden
from tests.test_terminal_manners import ESC, npudoctor, run_in_pty, slow_node

STARTED = 1796121600.0  # 2026-12-01 10:40 UTC
LEAK_LOG = "memlog_tiny_cpu_inject_leak_1MiB_constructed.jsonl.txt"
TRAIN_DOCUMENT = "train_step_tiny_cpu_20steps_constructed.json.txt"
VERDICT = re.compile(r"^(No problems found|\d+ problems?|\d+ warnings?) (in|on|training) ")


def verdict_of(lines):
    """The verdict sentence: what follows the summary line ("17 findings in 11 checks: ..."), unwrapped; it is
    the last thing printed."""
    summary = max(i for i, line in enumerate(lines) if re.match(r"\d+ findings? in \d+ checks?", line))
    return " ".join(lines[summary + 1:])


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder with two torch_npu ranks (``prof``) and a leaking memory log (``mem.jsonl``), as the current
    folder: paths are shown relative, as a user types them."""
    profdirs.torch_npu_rank(tmp_path / "prof", 0)
    profdirs.torch_npu_rank(tmp_path / "prof", 1)
    (tmp_path / "mem.jsonl").write_bytes(sample_data(LEAK_LOG))
    monkeypatch.chdir(tmp_path)
    for name in ("COLUMNS", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _console(color):
    buffer = io.StringIO()
    return console.make_console(file=buffer, color=color, width=80), buffer


# -- golden files at 80 columns ---------------------------------------------------------------------------------

@pytest.mark.parametrize("color", [False, True])
def test_prof_text_golden(workdir, color):
    result = analyze(["prof"], api.load_profile())
    out, buffer = _console(color)
    prof_console.render(result, out, started=STARTED, version="<version>", profile="default")
    check_golden(f"prof_analyze.80{'.color' if color else ''}.txt", buffer.getvalue())


def test_train_step_text_golden():
    data = json.loads(sample_text(TRAIN_DOCUMENT))
    document = {key: value for key, value in data.items() if key != "report"}
    report = train_report(document, api.load_profile())
    report.tool["version"] = "<version>"
    report.host = {"hostname": "node-a2-01"}
    out, buffer = _console(False)
    train_console.render(report, document, console=out, started=STARTED)
    check_golden("train_step.80.txt", buffer.getvalue())


def test_leak_analyze_text_golden(workdir):
    records = memlog.read_records("mem.jsonl")
    verdict = leak.analyze(records)
    out, buffer = _console(False)
    train_console.render_leak(verdict, "mem.jsonl", 1, len(records), console=out, started=STARTED,
                              version="<version>")
    text = buffer.getvalue()
    check_golden("leak_analyze.80.txt", text)
    assert "✗ TRN003" in text and "host memory leak" in text  # the finding, with check's symbol and fix
    assert verdict_of(text.splitlines()).startswith("1 problem in the memory log: TRN003 cpu host memory leak")


# -- the same manners for every new command ----------------------------------------------------------------------

REPORTS = {  # commands whose text is a report: header first, verdict sentence last
    "prof analyze": (["prof", "analyze", "prof"], 0),
    "leak analyze": (["leak", "analyze", "mem.jsonl"], 1),
}
LISTINGS = {"list-checks": (["list-checks"], 0), "explain": (["explain", "PROF001", "TRN003"], 0)}
ALL = {**REPORTS, **LISTINGS}


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_piped_report_has_header_findings_and_a_verdict_in_80_plain_columns(workdir, name):
    args, code = REPORTS[name]
    result = cli_runner().invoke(main, args)
    assert result.exit_code == code, result.output
    lines = result.stdout.splitlines()
    assert re.match(rf"npudoctor \S+ {name}, \d{{4}}-\d\d-\d\d \d\d:\d\d UTC$", lines[0])
    assert VERDICT.match(verdict_of(lines))  # the summary, then the verdict sentence last
    assert ESC not in result.stdout and result.stderr == ""  # no colour, no progress in a pipe
    assert max(map(len, lines)) <= 80
    # Wrapped, not cut: every word of every finding's detail is printed.
    for finding_id in re.findall(r"^  [✓!✗E-] ([A-Z]+\d+)", result.stdout, re.M):
        assert finding_id in result.stdout


@pytest.mark.parametrize("name", sorted(ALL))
def test_no_color_wins_and_force_color_colours(workdir, name, monkeypatch):
    args, code = ALL[name]
    monkeypatch.setenv("FORCE_COLOR", "1")
    forced = cli_runner().invoke(main, args)
    monkeypatch.setenv("NO_COLOR", "1")
    plain = cli_runner().invoke(main, args)
    assert forced.exit_code == plain.exit_code == code
    assert ESC not in plain.stdout
    if name in REPORTS:
        assert ESC in forced.stdout  # the check can fail: colour is there when asked for
        assert re.sub(r"\x1b\[[0-9;]*m", "", forced.stdout) == plain.stdout


@pytest.mark.parametrize("name, symbol", [("prof analyze", "  ! PROF001"), ("leak analyze", "  x TRN003"),
                                          ("list-checks", "PROF011"), ("explain", "PROF001")])
def test_ascii_stdout_gets_ascii_symbols(workdir, name, symbol):
    args, code = ALL[name]
    result = npudoctor(*args, env={"PYTHONIOENCODING": "ascii"}, cwd=workdir)
    assert result.returncode == code and b"Traceback" not in result.stderr
    assert symbol in result.stdout.decode("ascii")  # nothing but ASCII, and the ASCII status symbols


@pytest.mark.parametrize("name", sorted(ALL))
def test_head_dash_one_exits_quietly(workdir, name):
    args, code = ALL[name]
    proc = subprocess.run(["bash", "-o", "pipefail", "-c",
                           " ".join([sys.executable, "-m", "npudoctor", *args]) + " | head -1"],
                          capture_output=True, timeout=60, cwd=workdir)
    # 0, or the verdict's code when the whole report fit the pipe before head left (a leak: 1).
    assert proc.returncode in (0, code) and proc.stderr == b"", proc.stderr
    assert len(proc.stdout.splitlines()) == 1


@pytest.mark.parametrize("args", [["prof", "analyze", "prof", "--format", "json"],
                                  ["leak", "analyze", "mem.jsonl", "--format", "json"],
                                  ["prof", "analyze", "prof", "--format", "junit"]])
def test_machine_formats_are_the_same_bytes_on_a_terminal(workdir, args):
    env = {**os.environ, "COLUMNS": "80"}
    piped = subprocess.run([sys.executable, "-m", "npudoctor", *args], capture_output=True, env=env, timeout=60)
    chunks, _err, rc = run_in_pty([sys.executable, "-m", "npudoctor", *args], env)
    assert rc == piped.returncode and piped.stderr == b""
    assert "".join(c for _, c in chunks).replace("\r\n", "\n") == piped.stdout.decode()


def test_prof_json_on_an_ascii_stdout_keeps_its_data(workdir):
    utf8 = cli_runner().invoke(main, ["prof", "analyze", "prof", "--format", "json"])  # the reference, in process
    ascii_out = npudoctor("prof", "analyze", "prof", "--format", "json", env={"PYTHONIOENCODING": "ascii"},
                          cwd=workdir)
    assert json.loads(ascii_out.stdout.decode("ascii")) == json.loads(utf8.stdout)


def test_train_step_steps_on_the_shared_spinner_and_header_first(monkeypatch):
    """In-process (torch is imported once per test run): the spinner as a terminal's stderr gets it, forced on
    and without its start delay; stdout gets the header, then the findings, never the step counter."""
    pytest.importorskip("torch")
    import functools

    from npudoctor.cli import train as train_cli

    monkeypatch.setattr(train_cli, "Progress", functools.partial(Progress, enabled=True, delay_s=0, interval_s=0.005))
    monkeypatch.delenv("COLUMNS", raising=False)
    result = cli_runner().invoke(main, ["train-step", "--device", "cpu", "--steps", "12", "--batch", "8"])
    # 12 steps on a busy CI machine: the verdicts themselves are tested elsewhere, the manners here.
    assert result.exit_code in (0, 1) and isinstance(result.exception, (SystemExit, type(None))), result.exception
    assert "training tiny CLIP on cpu  step " in result.stderr and result.stderr.endswith("\r\x1b[K")
    lines = result.stdout.splitlines()
    assert re.match(r"npudoctor \S+ train-step on \S+, \d{4}-\d\d-\d\d \d\d:\d\d UTC$", lines[0])
    assert lines[1] == "tiny CLIP, fp32, 12 steps on cpu, profile default"
    assert "\r" not in result.stdout and ESC not in result.stdout
    assert max(map(len, lines)) <= 80
    assert VERDICT.match(verdict_of(lines)) and "12 steps are too few to judge whether the loss falls" in result.stdout


def test_collect_samples_show_on_the_spinner(node, tmp_path):
    env = slow_node(node, sleep_s=0.4)
    bundle = tmp_path / "b.tar.gz"
    chunks, err, rc = run_in_pty([sys.executable, "-m", "npudoctor", "collect", "--root", str(node.root), "-o",
                                  str(bundle), "--samples", "3", "--interval", "0.5"], env)
    assert rc == 0 and bundle.exists(), (chunks, err)
    assert "recording npu-smi info over time  sample " in err


def test_dashboard_refuses_to_draw_into_a_pipe():
    pytest.importorskip("textual")
    result = cli_runner().invoke(main, ["dashboard", "--demo", "--no-check"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "npudoctor: error: the dashboard needs a terminal (stdin and stdout are not one)\n"


# -- one list of IDs -----------------------------------------------------------------------------------------------

def test_list_checks_lists_every_id_explain_knows():
    listed = cli_runner().invoke(main, ["list-checks"]).stdout
    ids = [line.split()[0] for line in listed.splitlines()
           if line.strip() and not line.endswith(":") and not line.startswith(" ")]
    known = [spec.id for spec in api.rulebook()]
    assert ids == known and len(set(ids)) == len(ids)
    assert {"PROF001", "TRN005", "COL003", "hccl-socket-timeout"} <= set(ids) and len(ids) >= 87
    for check_id in ids:
        assert api.explain_topic(check_id) is not None, check_id
    rows = json.loads(cli_runner().invoke(main, ["list-checks", "--format", "json"]).stdout)
    assert [row["id"] for row in rows] == ids and rows[-1]["room"] == "logs"


# -- GitHub annotations: one escaping for logs and prof -------------------------------------------------------------

def test_prof_github_annotations_end_with_the_verdict(workdir):
    result = analyze(["prof"], api.load_profile())
    scope = prof_console.verdict_scope(result)
    lines = github.report_document(result.as_report(), "npudoctor prof", 0, scope).splitlines()
    assert lines[0].startswith("::warning title=PROF001 Operators on the AI CPU / host CPU [Cast]::")
    assert lines[-1] == ("::notice title=npudoctor prof::5 warnings in 2 ranks: PROF001 Cast 4 task(s) of >= 20 us on "
                         "the AI CPU, total 290.0 us...; 15 checks could "
                         "not apply; exit 0")
    assert all("\n" not in line and "%0A" in line for line in lines[:-1])  # the fix on its own line, escaped


def test_github_escaping():
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert annotation("error", "x\ny", "t:1", "f.log", 3) == "::error file=f.log,line=3,title=t%3A1::x%0Ay"
    assert annotation("notice", "done") == "::notice::done"


def test_prof_run_without_msprof_says_so_in_one_line_and_a_snippet_that_fits(monkeypatch):
    from npudoctor.prof import launch

    monkeypatch.setattr(launch, "find_msprof", lambda *args, **kwargs: None)
    result = cli_runner().invoke(main, ["prof", "run", "--", "python3", "train.py"])
    assert result.exit_code == 2 and result.stdout == ""
    first, *snippet = result.stderr.splitlines()
    assert first.startswith("npudoctor: error: msprof not found")
    assert snippet[-1] == "then: npudoctor prof analyze ./prof_out"
    assert max(map(len, snippet)) <= 80  # code is not wrapped by the terminal: it is written to fit
