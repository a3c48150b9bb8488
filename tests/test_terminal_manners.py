"""Terminal manners every command shares (issue 10 point 4, issue 8 point 7): progress only on a terminal's
stderr, streaming stages, colour choice, broken pipes, ASCII terminals, stable JUnit.

The pty tests run the real command in a pseudo-terminal, as a person sees it.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from xml.etree import ElementTree as ET

import pytest

from npudoctor import api
from npudoctor.model.finding import Finding, Report, Status
from npudoctor.report import junit, terminal
from npudoctor.report.progress import Progress
from tests.nodes import B3_8CARD, healthy_910b_node, target_python
from tests.samples import sample_data, sample_text

ESC = "\x1b["


def npudoctor(*args, env=None, **kwargs):
    environ = {**os.environ, "COLUMNS": "80", **(env or {})}
    for name in ("NO_COLOR", "FORCE_COLOR"):
        if env is None or name not in env:
            environ.pop(name, None)
    return subprocess.run([sys.executable, "-m", "npudoctor", *args], capture_output=True, env=environ,
                          timeout=60, **kwargs)


def without_durations(text):
    return re.sub(r'"duration_s": [0-9.]+', '"duration_s": 0', text)


def slow_node(node, sleep_s=1.5):
    """A healthy 8x910B node whose npu-smi takes ``sleep_s``: the run has a visible slow step."""
    healthy_910b_node(node)
    node.command("npu-smi", stdout=sample_text(B3_8CARD), sleep_s=sleep_s)
    return {**os.environ, **node.env, "PATH": f"{node.bin}:{os.environ['PATH']}", "COLUMNS": "80"}


def run_in_pty(argv, env, timeout_s=60):
    """Run ``argv`` with stdout and stderr each on its own pseudo-terminal; returns
    ``(stdout_chunks, stderr_text, rc)`` where each stdout chunk is ``(seconds since start, text)``."""
    out_master, out_slave = pty.openpty()
    err_master, err_slave = pty.openpty()
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=out_slave, stderr=err_slave, stdin=subprocess.DEVNULL, env=env)
    os.close(out_slave)
    os.close(err_slave)
    chunks, err = [], []
    open_fds = {out_master, err_master}
    while open_fds and time.monotonic() - started < timeout_s:
        ready, _, _ = select.select(list(open_fds), [], [], 0.05)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed its side
                data = b""
            if not data:
                open_fds.discard(fd)
                os.close(fd)
                continue
            text = data.decode("utf-8", "replace")
            if fd == out_master:
                chunks.append((time.monotonic() - started, text))
            else:
                err.append(text)
    rc = proc.wait(timeout=timeout_s)
    for fd in open_fds:
        os.close(fd)
    return chunks, "".join(err), rc


def first_time(chunks, needle):
    text = ""
    for at, chunk in chunks:
        text += chunk
        if needle in text:
            return at
    raise AssertionError(f"{needle!r} never printed: {text!r}")


def test_check_streams_header_at_once_and_spins_while_npu_smi_is_slow(node):
    env = slow_node(node, sleep_s=2.5)
    chunks, err, rc = run_in_pty([sys.executable, "-m", "npudoctor", "check", "--root", str(node.root),
                                  "--only", "pcie,npu-smi"], env)
    assert rc == 0, (chunks, err)
    header_at = first_time(chunks, "npudoctor ")
    pcie_at = first_time(chunks, "PCI004")
    smi_at = first_time(chunks, "SMI004")
    # The header and the pcie stage are on the screen while npu-smi still runs (2.5 s from the start).
    assert header_at < smi_at - 1.0 and pcie_at < smi_at - 1.0
    # The spinner named what it waited for, with elapsed seconds, on stderr only, and erased its line.
    assert "SMI001 npu-smi available and runs: waiting for npu-smi info" in err and "s\x1b[K" in err
    assert err.endswith("\r\x1b[K")
    stdout = "".join(chunk for _, chunk in chunks)
    assert stdout.index("PCI004") < stdout.index("SMI001")  # stage order kept
    assert ESC in stdout  # a terminal gets colour by default


def test_piped_output_has_no_progress_and_json_is_byte_identical(node):
    env = slow_node(node, sleep_s=0.5)
    args = ["check", "--root", str(node.root), "--only", "pcie,npu-smi", "--format", "json"]
    piped = subprocess.run([sys.executable, "-m", "npudoctor", *args], capture_output=True, env=env, timeout=60)
    chunks, err, rc = run_in_pty([sys.executable, "-m", "npudoctor", *args], env)
    assert rc == piped.returncode == 0
    assert piped.stderr == b""
    assert "SMI001" in err  # the terminal's stderr had the spinner...
    tty_json = "".join(c for _, c in chunks).replace("\r\n", "\n")
    assert ESC not in tty_json
    # ...and stdout did not change (but for the measured durations)
    assert without_durations(tty_json) == without_durations(piped.stdout.decode())


def test_collect_shows_progress_on_a_terminal(node, tmp_path):
    env = slow_node(node, sleep_s=1.0)
    bundle = tmp_path / "b.tar.gz"
    chunks, err, rc = run_in_pty([sys.executable, "-m", "npudoctor", "collect", "--root", str(node.root),
                                  "-o", str(bundle)], env)
    assert rc == 0 and bundle.exists(), (chunks, err)
    assert "recording SMI001 npu-smi available and runs: waiting for npu-smi info" in err
    assert "wrote " in "".join(c for _, c in chunks)


def test_progress_is_silent_off_a_terminal(tmp_path):
    with open(tmp_path / "err", "w") as stream, Progress(stream=stream, delay_s=0, interval_s=0.01) as progress:
        progress.update("waiting")
        time.sleep(0.05)
    assert (tmp_path / "err").read_text() == ""


def test_progress_line_fits_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    progress = Progress(enabled=True)
    progress.update("x" * 100, detail="12 MiB/s")
    line = progress.line()
    assert len(line) <= 37 and line.endswith("…")


@pytest.mark.parametrize(("env", "args", "coloured"), [
    ({"NO_COLOR": "1"}, ["--color", "auto"], False),
    ({"FORCE_COLOR": "1"}, [], True),
    ({"NO_COLOR": "1"}, ["--color", "always"], True),
    ({"FORCE_COLOR": "1"}, ["--color", "never"], False),
    ({}, [], False),  # piped
])
def test_colour_follows_the_user(node, env, args, coloured):
    node.npu_node(8)
    result = npudoctor("check", "--root", str(node.root), "--only", "pcie", *args, env=env)
    assert result.returncode == 0, result.stderr
    assert (ESC.encode() in result.stdout) is coloured


def test_no_color_under_a_terminal(node):
    node.npu_node(8)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "80"}
    chunks, _err, rc = run_in_pty([sys.executable, "-m", "npudoctor", "check", "--root", str(node.root),
                                   "--only", "pcie"], env)
    assert rc == 0 and ESC not in "".join(c for _, c in chunks)


@pytest.mark.parametrize("command", [["list-checks"], ["explain", "PCI001"], ["--help"]])
def test_color_option_on_every_command(command):
    assert npudoctor(*command, "--color", "never").returncode == 0
    assert npudoctor("--color", "never", *command).returncode == 0


def test_every_subcommand_has_color():
    import click

    from npudoctor.cli import main

    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        commands = list(getattr(command, "commands", {}).values()) or [command]
        for sub in commands:
            assert any(p.name == "color" for p in sub.params), f"{name} {sub.name} has no --color"


@pytest.mark.parametrize("command", [["list-checks"], ["check"], ["explain", "PCI001"], ["check", "--format", "junit"]])
def test_closed_stdout_exits_quietly(command):
    """`npudoctor list-checks | head -1`: the reader leaves; no traceback, no "Exception ignored", exit 0
    (`check` may still say its verdict, 1 here: PCI001 fails on this machine)."""
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write fails with EPIPE
    proc = subprocess.run([sys.executable, "-m", "npudoctor", *command], stdout=write, stderr=subprocess.PIPE,
                          timeout=60)
    os.close(write)
    assert proc.returncode in ((0, 1) if command[0] == "check" else (0,))
    assert proc.stderr == b""


def test_head_dash_one_in_a_shell_pipeline():
    proc = subprocess.run(["bash", "-o", "pipefail", "-c",
                           f"{sys.executable} -m npudoctor list-checks | head -2"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout.splitlines()[1].startswith(b"PCI001")


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0",
                                                                    "PYTHONIOENCODING": ""}])
def test_ascii_terminal_gets_ascii_symbols(node, env):
    node.npu_node(8)
    node.path("/sys/bus/pci/devices/0000:c1:00.0/driver").unlink()
    result = npudoctor("check", "--root", str(node.root), "--only", "pcie", env=env)
    text = result.stdout.decode("ascii")  # nothing but ASCII on an ASCII stream
    assert b"Traceback" not in result.stderr
    assert "  + PCI001" in text and "  x PCI002" in text
    assert result.returncode == 1


def test_ascii_terminal_explain_and_list_checks_never_trace():
    for command in (["list-checks"], ["explain", "HCCL004"], ["check", "--only", "pcie"]):
        result = npudoctor(*command, env={"PYTHONIOENCODING": "ascii"})
        assert b"Traceback" not in result.stderr, command
        result.stdout.decode("ascii")


def test_ascii_terminal_gets_ascii_symbols_from_logs_scan(tmp_path):
    log = tmp_path / "plog-1_20210331185942000.log"
    log.write_bytes(sample_data("plog_2021_model_execute_aicore_error.log"))
    texts = {}
    for args in ((), ("-v",)):
        result = npudoctor("logs", "scan", *args, str(log), env={"PYTHONIOENCODING": "ascii"}, cwd=tmp_path)
        assert b"Traceback" not in result.stderr
        text = texts[args] = result.stdout.decode("ascii")  # nothing but ASCII on an ASCII stream
        assert "  x I1 NPU 0 AI Core exception" in text  # the incident first (issue 27)
        assert not re.search(r"^  \? ", text, re.MULTILINE)  # no status symbol replaced by "?"
        assert result.returncode == 1
    verbose = texts[("-v",)]  # -v: every finding, first ... last line (not a replaced "?"), every file
    assert "  x error_code 507011  4 lines  plog-1_20210331185942000.log:" in verbose
    assert re.search(r"\.log:\d+ \.\.\. \d+", verbose)
    assert "  + plog-1_20210331185942000.log  plog" in verbose
    utf8 = npudoctor("logs", "scan", "-v", str(log), env={"PYTHONIOENCODING": "utf-8"}, cwd=tmp_path)
    assert "  ✗ error_code 507011" in utf8.stdout.decode("utf-8") and " … " in utf8.stdout.decode("utf-8")


def test_status_symbols_fall_back():
    class Ascii:
        encoding = "ascii"

    assert terminal.status_symbols(Ascii())[Status.PASS] == "+"
    assert terminal.status_symbols()[Status.PASS] in ("✓", "+")


def test_use_color_rules():
    class Tty:
        def isatty(self):
            return True

    assert terminal.use_color(Tty(), "auto", {}) is True
    assert terminal.use_color(Tty(), "auto", {"NO_COLOR": "1"}) is False
    assert terminal.use_color(Tty(), "auto", {"TERM": "dumb"}) is False
    assert terminal.use_color(None, "auto", {"FORCE_COLOR": "1"}) is True
    assert terminal.use_color(None, "auto", {"FORCE_COLOR": "0"}) is False
    assert terminal.use_color(Tty(), "never", {"FORCE_COLOR": "1"}) is False


# JUnit contracts (issue 10 point 5, issue 8 point 7)

def _junit_cases(report):
    root = ET.fromstring(junit.render(report))
    return {(case.get("classname"), case.get("name")) for case in root.iter("testcase")}


def test_junit_names_are_the_same_on_every_machine(tmp_path):
    """An NPU node and a CPU box give the same testcase names for the same checks (bus ids, paths, versions
    and which subjects exist stay in messages and properties)."""
    from tests.fakenode import FakeNode

    npu = FakeNode(tmp_path / "npu")
    healthy_910b_node(npu)
    npu.path("/sys/bus/pci/devices/0000:41:00.0/driver").unlink()
    cpu = FakeNode(tmp_path / "cpu")
    cpu.pci_device("0000:00:01.0", vendor_id="8086", device_id="7010", class_code="0x010100")
    target_python(cpu, "3.11.7", torch="2.13.0+cpu")
    reports = [api.run_checks(node.runner()) for node in (npu, cpu)]
    assert _junit_cases(reports[0]) == _junit_cases(reports[1])
    names = {name for _, name in _junit_cases(reports[0])}
    assert names == {f.id for f in reports[0].findings}


def test_junit_survives_control_characters():
    hostile = "plog line \x01\x02\x1b[2J\x7f end \ud800"
    report = Report([Finding("LOG001", Status.FAIL, "Newest CANN plogs", subject="a\x01b", detail=hostile,
                             evidence={"line": hostile}, fix="see \x0b", stage="logs")])
    text = junit.render(report)
    root = ET.fromstring(text)  # parses
    failure = next(root.iter("failure"))
    # The finding itself dropped the control characters and the escape (npudoctor.untrusted); the text stays.
    assert failure.get("message").startswith("fail: ab: plog line  end")
    assert "\x01" not in text and "\x1b" not in text and "[2J" not in text


@pytest.mark.parametrize("fmt", ["json", "junit"])
def test_machine_formats_on_an_ascii_stdout_keep_their_data(fmt):
    report = Report([Finding("LOG001", Status.WARN, "Newest CANN plogs", detail="算子 fallback ✓", stage="logs")])
    from npudoctor.report import json_report

    if fmt == "json":
        text = json_report.render(report, ascii_only=True)
        assert json.loads(text)["findings"][0]["detail"] == "算子 fallback ✓"
    else:
        text = junit.ascii_only(junit.render(report, fail_on="warn"))
        assert ET.fromstring(text).find(".//failure").get("message") == "warn: 算子 fallback ✓"
    text.encode("ascii")
