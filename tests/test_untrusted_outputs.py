"""Issue 19 points 1 and 4: whatever a finding or a view quotes from someone else's text (a plog line, an
npu-smi process name with its arguments, an op name in a profile, a host name in another node's report)
reaches no output with a secret, a terminal escape or a bidi control, in every format of every command;
CSV cells never start a formula and machine formats stay valid."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Iterable
from xml.etree import ElementTree

import pytest

from npudoctor.cli import main
from tests import profdirs
from tests.clirunner import cli_runner
from tests.nodes import healthy_910b_node
from tests.samples import smi

# kind -> (the text as it would appear, the part that must never be shown). Made-up values in real formats.
SECRETS = {
    "url-password": ("https://bob:urlpw8841x@hub.example.org/x", "urlpw8841x"),
    "api-key": ("api_key=apikey77123x", "apikey77123x"),
    "hf-token": ("hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456", "QwErTyUiOpAsDfGhJkLzXcVbNm123456"),
    "hf-token-flag": ("--hf_token=hf_MnBvCxZaSdFgHjKlPoIuYtReWq654321", "MnBvCxZaSdFgHjKlPoIuYtReWq654321"),
    "password-flag": ("--password=pwflag55x", "pwflag55x"),
    "aws-key": ("AKIAQWERTYUIOPASDFGH", "QWERTYUIOPASDFGH"),
    "bearer": ("bearer bearertok9988776655", "bearertok9988776655"),
}
# OSC 52 (clipboard write), OSC 0 (title), CSI clear screen, a right-to-left override.
ESCAPES = "\x1b]52;c;aGFjaw==\x07\x1b]0;pwned\x07\x1b[2J\u202e"
HOSTILE = " ".join(text for text, _secret in SECRETS.values()) + ESCAPES
# No comma, quote or pipe: it must fit in a CSV cell and an npu-smi table cell as it is.
assert not set(HOSTILE) & set(",\"|")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def strings_in(value) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def assert_clean(text: str, kind: str, where: str) -> None:
    """No secret, no control character (tab and newline aside) in what a user or a program reads."""
    if kind == "github":  # GitHub places an annotation by its file= path: the real one, by design
        text = re.sub(r"file=[^,:]*", "file=", text)
    if kind == "json":
        text = "\n".join(strings_in(json.loads(text)))  # what a program reads: JSON escapes decoded
    elif kind == "xml":
        root = ElementTree.fromstring(text)  # valid XML 1.0 (which cannot carry ESC at all)
        text = "\n".join([*root.itertext(), *(v for e in root.iter() for v in e.attrib.values())])
    for kind_name, (_text, secret) in SECRETS.items():
        assert secret not in text, f"{where}: {kind_name} shown"
    assert not CONTROL.search(text), f"{where}: control character {CONTROL.search(text).group(0)!r}"


def invoke(args, env=None):
    return cli_runner().invoke(main, [str(a) for a in args], env={"NO_COLOR": "1", "COLUMNS": "80", **(env or {})})


@pytest.fixture
def hostile_node(node):
    healthy_910b_node(node)
    table = smi("with-processes").replace("| python                   |", f"| python {HOSTILE} |")
    node.command("npu-smi", stdout=table)
    record = f"[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.000 [a.cc:1]1 launch failed: {HOSTILE}\n"
    node.file("/logs/plog/plog-1_20250101000000000.log", record * 3)
    node.setenv(HCCL_IF_IP=HOSTILE)  # an environment value a finding quotes (HCCL003)
    return node


def test_check_every_format_and_the_textfile(hostile_node, tmp_path):
    node = hostile_node
    base = ["check", "--root", node.root, "--logs", "/logs", "--only", "npu-smi,LOG001,HCCL003"]
    text = invoke([*base, "-v"], node.env)
    assert "SMI004" in text.stdout and "LOG001" in text.stdout and "HCCL003" in text.stdout, text.output
    assert "--password=<redacted>" in text.stdout and "RUNTIME x3" in text.stdout  # redacted, not dropped
    assert_clean(text.stdout, "text", "check text")
    for fmt, kind in (("json", "json"), ("junit", "xml"), ("npd", "text"),
                      ("prometheus", "text")):
        result = invoke([*base, "--format", fmt], node.env)
        assert result.stdout, (fmt, result.output)
        assert_clean(result.stdout, kind, f"check --format {fmt}")
    textfile = tmp_path / "npd.prom"
    invoke([*base, "--format", "json", "--textfile", textfile], node.env)
    assert_clean(textfile.read_text("utf-8"), "text", "check --textfile")
    document = json.loads(invoke([*base, "--format", "json"], node.env).stdout)
    smi004 = [f for f in document["findings"] if f["id"] == "SMI004"]
    assert smi004 and "--password=<redacted>" in smi004[0]["evidence"]["name"]  # redacted, not dropped


def test_logs_scan_every_format(hostile_node, tmp_path):
    folder = tmp_path / SECRETS["hf-token"][0]  # a token in a folder name too: every path shown quotes it
    (folder / "plog").mkdir(parents=True)
    for log in hostile_node.path("/logs/plog").iterdir():
        (folder / "plog" / log.name).write_bytes(log.read_bytes())
    for fmt, kind in (("text", "text"), ("json", "json"), ("junit", "xml"), ("github", "github")):
        result = invoke(["logs", "scan", folder, "-v", "--format", fmt])
        assert "error_record" in result.stdout, result.output
        assert_clean(result.stdout, kind, f"logs scan --format {fmt}")


def test_onboard_record_and_summary(hostile_node, tmp_path):
    out = tmp_path / "accept"
    result = invoke(["onboard", "--profile", "atlas800t-a2-8x910b", "-o", out, "--root", hostile_node.root,
                     "--no-collective"], hostile_node.env)
    assert (out / "report.html").exists(), result.output
    assert_clean(result.stdout, "text", "onboard summary")
    report = (out / "report.json").read_text("utf-8")
    assert "SMI004" in report
    assert_clean(report, "json", "onboard report.json")
    page = (out / "report.html").read_text("utf-8")
    assert "\x1b" not in page and "&#27;" not in page
    assert_clean(page, "text", "onboard report.html")


def test_prof_op_names_and_profile_paths(tmp_path):
    tmp_path = tmp_path / SECRETS["hf-token"][0]  # a token in a folder name: every path shown quotes it
    pt = profdirs.torch_npu_rank(tmp_path, rank=0)
    kernel = pt / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kernel.write_bytes(kernel.read_bytes().replace(b",Cast,AI_CPU,", f",[bold]{HOSTILE},AI_CPU,".encode()))
    text = invoke(["prof", "analyze", tmp_path, "-v"])
    assert "PROF001" in text.stdout and "[bold]" in text.stdout, text.output  # markup printed as it is
    assert_clean(text.stdout, "text", "prof text")
    for fmt, kind in (("json", "json"), ("junit", "xml"), ("github", "github")):
        result = invoke(["prof", "analyze", tmp_path, "--format", fmt])
        assert_clean(result.stdout, kind, f"prof --format {fmt}")


def hostile_report(tmp_path: Path, name: str, host: str) -> Path:
    document = {"schema": "npudoctor.report/1", "tool": {}, "host": {"hostname": host},
                "inventory": {"hostname": host, "driver": {"version": f"=HYPERLINK(\"http://x\") {HOSTILE}"}},
                "findings": [{"id": f"SMI004{ESCAPES}", "status": "fail", "title": f"held by {HOSTILE}"}],
                "summary": {"fail": 1}}
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_fleet_text_json_csv(tmp_path):
    reports = [hostile_report(tmp_path, "a.json", f"=cmd|' /C calc'!A0\n{HOSTILE}"),
               hostile_report(tmp_path, "b.json", "node-b")]
    text = invoke(["fleet", *reports])
    assert text.exit_code == 1, text.output
    assert_clean(text.stdout, "text", "fleet text")
    assert len([line for line in text.stdout.splitlines() if line.startswith("  SMI004")]) == 1
    assert_clean(invoke(["fleet", "--format", "json", *reports]).stdout, "json", "fleet json")
    table = invoke(["fleet", "--format", "csv", *reports]).stdout
    assert_clean(table, "text", "fleet csv")
    rows = list(csv.reader(io.StringIO(table)))
    assert len(rows) == 3 and len({len(row) for row in rows}) == 1  # one row per node, every row as wide
    for row in rows[1:]:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell


def test_collective_rank_output_in_text_and_json():
    from npudoctor.fleet import collective as probe

    document = {"error": "rank 1 exited with code 1", "output": f"Traceback ...\n{HOSTILE}\n",
                "hosts": [f"node{ESCAPES}"], "device": f"npu{ESCAPES}"}
    found = probe.failed_run(document["error"], document["output"])
    assert_clean(probe.to_json(document, found), "json", "collective json")
    assert_clean(probe.render_text(document, found), "text", "collective text")
