"""Issue 19 point 4: untrusted strings are data in every text, CSV, HTML, YAML and TUI output: no OSC 52
(clipboard), OSC 0 (title), CSI (``ESC[2J``), other C0/C1 control or bidi override; rich markup in a name
prints as it is; a host name with a newline adds no YAML key. (Secrets in the same places:
tests/test_untrusted_outputs.py.)"""

from __future__ import annotations

import asyncio
import io
import json
import re

import pytest
import yaml

from npudoctor.cli import main
from npudoctor.report import html
from npudoctor.report.console import make_console
from npudoctor.workload import memlog
from tests.clirunner import cli_runner
from tests.samples import smi

OSC52 = "\x1b]52;c;aGFjaw==\x07"
ESCAPES = f"{OSC52}\x1b]0;pwned\x1b\\\x1b[2J\x9b31m\x07\x08\r\u202e\u2066"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def invoke(args, env=None, stdin=None):
    return cli_runner().invoke(main, [str(a) for a in args], input=stdin,
                               env={"NO_COLOR": "1", "COLUMNS": "80", **(env or {})})


def test_the_sanitizer_removes_every_kind_and_keeps_text_tabs_and_newlines():
    from npudoctor.untrusted import csv_cell, one_line, printable

    assert printable(f"a{ESCAPES}b\tc\nd") == "ab\tc\nd"
    assert RAW.search(printable("".join(map(chr, range(0x00, 0xa0))) + "\u202a\u202b\u202c\u202d\u202e"
                                + "\u2066\u2067\u2068\u2069")) is None
    assert printable("plain 矩阵乘 [bold]x") == "plain 矩阵乘 [bold]x"
    assert one_line("node-1\nseverities:\n  SITE001: warn") == "node-1 severities:   SITE001: warn"
    for formula in ("=HYPERLINK(\"http://x\")", "+1", "-1+2", "@SUM(A1)", "\t=1", "\r=1"):
        assert csv_cell(formula).startswith(("'", " ")), formula
    assert csv_cell("node-1") == "node-1" and csv_cell(5) == 5


def test_an_unterminated_osc_keeps_the_text_after_it():
    from npudoctor.untrusted import printable

    assert printable("x\x1b]0;title and more text") == "xtitle and more text"


def test_the_console_drops_escapes_a_renderer_did_not_clean_and_keeps_its_own_styles():
    from rich.text import Text

    stream = io.StringIO()
    console = make_console(stream, color=True, width=80)
    console.print(Text(f"op{ESCAPES}[bold]name", style="red"))
    out = stream.getvalue()
    assert "op" in out and "[bold]name" in out
    assert re.sub(r"\x1b\[[0-9;]*m", "", out) == re.sub(r"\x1b\[[0-9;]*m", "", out).replace("\x1b", "")
    assert "\x1b]" not in out and "\x1b[2J" not in out and "\u202e" not in out
    assert "\x1b[31m" in out  # the style itself is still drawn


def hostile_table() -> str:
    return smi("with-processes").replace("| python                   |", f"| [bold]py{ESCAPES} |")


def test_parse_npu_smi_text_and_json(tmp_path):
    path = tmp_path / "smi.txt"
    path.write_text(hostile_table(), encoding="utf-8")
    text = invoke(["parse", "npu-smi", path])
    assert text.exit_code == 0, text.output
    assert "[bold]py" in text.stdout and not RAW.search(text.stdout)
    document = json.loads(invoke(["parse", "npu-smi", "--format", "json", path]).stdout)
    names = [p["name"] for p in document["processes"]] if "processes" in document else [
        p["name"] for chip in document["chips"] for p in chip.get("processes", [])]
    assert names and all(not RAW.search(name) and name.startswith("[bold]py") for name in names)


def test_leak_analyze_device_and_run_fields(tmp_path):
    path = tmp_path / "mem.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for step in range(40):
            record = memlog.make_record(step, f"run{ESCAPES}", device=f"npu:0{ESCAPES}[bold]",
                                        allocated_bytes=1 << 30, reserved_bytes=2 << 30, rss_bytes=1 << 30)
            handle.write(json.dumps(record) + "\n")
    text = invoke(["leak", "analyze", path, "-v"])
    assert "npu:0" in text.stdout, text.output
    assert "[bold]" in text.stdout and not RAW.search(text.stdout)
    document = json.loads(invoke(["leak", "analyze", path, "--format", "json"]).stdout)
    assert document["device"].startswith("npu:0")
    assert not RAW.search(json.dumps(document, ensure_ascii=False))  # decoded: no control character


def test_report_html_has_no_raw_escape():
    document = {"schema": "npudoctor.report/1", "inventory": {"hostname": f"node{ESCAPES}<b>"},
                "findings": [{"id": "SMI004", "status": "warn", "title": "t", "subject": f"s{ESCAPES}",
                              "detail": f"pid 1 py{ESCAPES}", "evidence": {"name": f"py{ESCAPES}"}, "fix": ""}],
                "summary": {"warn": 1}}
    page = html.render(document)
    assert "node" in page and "&lt;b&gt;" in page
    assert not RAW.search(page.replace("\n", "")) and "&#27;" not in page


def test_profile_derive_host_name_with_newlines_adds_no_key(tmp_path):
    report = tmp_path / "report.json"
    host = f"node-1\nseverities:\n  SITE001: warn\n{ESCAPES}"
    report.write_text(json.dumps({"schema": "npudoctor.report/1", "tool": {"profile": "default\nx: 1"},
                                  "host": {"hostname": host},
                                  "inventory": {"hostname": host, "driver": f"23.0.7{ESCAPES}\nfoo: 1"},
                                  "summary": {}, "findings": []}), encoding="utf-8")
    site = tmp_path / "site.yaml"
    result = invoke(["profile", "derive", report, "-o", site])
    assert result.exit_code == 0, result.output
    text = site.read_text("utf-8")
    data = yaml.safe_load(text)
    assert set(data) == {"name", "extends", "description", "inventory"}
    assert "severities" not in data and "x" not in data
    assert data["inventory"]["driver"].startswith("23.0.7") and "\n" in data["inventory"]["driver"]
    assert not RAW.search(text.replace("\n", ""))
    assert all(line.startswith(("#", " ", "name:", "extends:", "description:", "inventory:")) or not line
               for line in text.splitlines())


def test_onboard_summary_host_name(node, tmp_path, monkeypatch):
    from npudoctor.probes.runner import LiveRunner
    from tests.nodes import healthy_910b_node

    healthy_910b_node(node)
    real_host = LiveRunner.host
    monkeypatch.setattr(LiveRunner, "host",
                        lambda self: {**real_host(self), "hostname": f"evil{ESCAPES}\nACCEPTED: fake"})
    result = invoke(["onboard", "--profile", "atlas800t-a2-8x910b", "-o", tmp_path / "out", "--root", node.root,
                     "--no-collective"], node.env)
    assert "evil" in result.stdout, result.output
    assert not RAW.search(result.stdout) and "\nACCEPTED: fake" not in result.stdout


def test_dashboard_process_names_reach_no_widget_raw():
    pytest.importorskip("textual")
    from tests.test_dashboard_app import make_app, poll

    async def scenario():
        app, sampler, _clock = make_app()
        sampler.text = hostile_table().replace("[bold]py", "[bold]py --password=pw1234x")
        async with app.run_test(size=(80, 24)) as pilot:
            await poll(app, pilot)
            table = app.query_one("#device-table")
            held = str(table.get_cell("npu:3/chip:0", "Held by"))
            assert held.startswith("139372 [bold]p") and not RAW.search(held)  # cut to 15, ending ~
            await pilot.press("enter")
            await pilot.pause()
            detail = str(app.screen.query_one("#device-detail").content)
            assert "[bold]py" in detail and not RAW.search(detail.replace("\n", ""))
            assert "pw1234x" not in detail and "--password=<redacted>" in detail  # redacted like every report

    asyncio.run(scenario())


def test_parse_npu_smi_failure_line_is_shown_as_data(tmp_path):
    path = tmp_path / "failed.txt"
    path.write_text(f"dcmi model initialized failed, because the device is used. ret is -8020{ESCAPES}"
                    " --password=pw1234x\n", encoding="utf-8")
    result = invoke(["parse", "npu-smi", path])
    assert "ret is -8020" in " ".join(result.stdout.split()), result.output  # wrapped to 80 columns
    assert not RAW.search(result.stdout) and "pw1234x" not in result.stdout
