"""`npudoctor onboard`: the acceptance run writes report.json, the bundle and one self-contained report.html,
never over an existing record; the HTML page puts the verdict first and draws its plots inline."""

from __future__ import annotations

import json
import os
import re
import tarfile
from html.parser import HTMLParser
from xml.etree import ElementTree

from npudoctor import api
from npudoctor.cli import main
from npudoctor.fleet import collective as probe
from npudoctor.fleet import onboard as engine
from npudoctor.model import Status
from npudoctor.report import html
from tests.clirunner import cli_runner
from tests.nodes import healthy_910b_node


class Fetches(HTMLParser):
    """Everything in a page that would make a browser fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.fetches: list = []
        self.tags: list = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "data", "action", "poster") or (value or "").startswith("url("):
                self.fetches.append((tag, name, value))
        if tag in ("script", "link", "iframe", "object", "embed", "img", "base"):
            self.fetches.append((tag, "", ""))


def fetches(page: str):
    parser = Fetches()
    parser.feed(page)
    return parser.fetches + (["url("] if "url(" in page or "@import" in page else []), parser.tags


def test_acceptance_run_writes_the_record(node, tmp_path):
    healthy_910b_node(node)
    out = tmp_path / "accept"
    result = engine.onboard(str(out), "atlas800t-a2-8x910b", engine.CollectiveOptions(run=False),
                            {"python": None, "logs_dirs": ()}, root=str(node.root), environ=node.env)
    assert sorted(p.name for p in out.iterdir()) == ["bundle.tar.gz", "report.html", "report.json"]
    document = json.loads((out / "report.json").read_text())
    assert document["schema"] == "npudoctor.report/1" and document["tool"]["command"] == "onboard"
    assert document["inventory"]["chips"]["count"] == 8
    by_id = {f["id"]: f for f in document["findings"]}
    if not engine.training_supported():
        assert by_id["TRN001"]["status"] == "skip" and "training feature not installed" in by_id["TRN001"]["detail"]
    assert by_id["COL001"]["status"] == "skip" and "--no-collective" in by_id["COL001"]["detail"]
    assert {"LIB005", "PCI001"} <= set(by_id)  # the level-2 import probe and the level-1 checks ran
    with tarfile.open(out / "bundle.tar.gz") as bundle:  # the bundle replays to the same level-1 findings
        assert "manifest.json" in bundle.getnames()
    replayed = api.run_checks(api.make_runner(bundle=str(out / "bundle.tar.gz")), only=("pcie", "npu-smi"))
    assert {f.id for f in replayed.findings if f.status is Status.PASS} >= {"PCI001", "SMI001"}
    page = (out / "report.html").read_text()
    found, tags = fetches(page)
    assert found == [] and "svg" not in tags  # no collective, no memory: no plot
    verdict = "NOT ACCEPTED" if result.report.exit_code() else "ACCEPTED"
    assert page.index(verdict) < page.index("The node") < page.index("Chips") < page.index("Stages")
    chip_table = page[page.index("<h2>Chips"):page.index("<h2>Stages")]
    assert chip_table.count("<td>0000:") == 8 and chip_table.count("<td>OK</td>") == 8  # one row per NPU


def test_existing_record_is_never_overwritten(tmp_path):
    out = tmp_path / "accept"
    out.mkdir()
    (out / "report.json").write_text("keep me\n")
    result = cli_runner().invoke(main, ["onboard", "--profile", "default", "-o", str(out), "--no-collective"])
    assert result.exit_code == 2 and "not empty" in result.stderr
    assert [p.name for p in out.iterdir()] == ["report.json"] and (out / "report.json").read_text() == "keep me\n"
    bad = cli_runner().invoke(main, ["onboard", "--profile", "no-such", "-o", str(tmp_path / "new")])
    assert bad.exit_code == 2 and not (tmp_path / "new").exists()


def test_bad_sizes_or_an_uncreatable_folder_is_a_usage_error_before_any_work(tmp_path):
    sizes = cli_runner().invoke(main, ["onboard", "--profile", "default", "-o", str(tmp_path / "new"),
                                       "--sizes", "x", "--collective-backend", "gloo"])
    assert sizes.exit_code == 2 and "--sizes" in sizes.stderr and not (tmp_path / "new").exists()
    if not os.path.isdir("/proc/self"):
        return
    # /proc is a folder no one can create in, not even root (a read-only mount would do the same)
    blocked = cli_runner().invoke(main, ["onboard", "--profile", "default", "-o", "/proc/npudoctor-new",
                                         "--no-collective"])
    assert blocked.exit_code == 2 and blocked.stderr.startswith("npudoctor: error: -o"), blocked.stderr


def test_page_draws_bus_bandwidth_and_memory_inline():
    rows = [probe.row(op, size, 8, [100.0 * size / 1024] * 8, [True] * 8, 5)
            for op in ("all_reduce", "broadcast") for size in (1024, 1024 ** 2, 64 * 1024 ** 2)]
    document = {"schema": "npudoctor.report/1", "inventory": {"hostname": 'n<1>&"'}, "summary": {"pass": 1},
                "findings": [{"id": "COL001", "status": "pass", "stage": "collective", "title": "t",
                              "subject": "s", "detail": "<script>alert(1)</script>", "evidence": {}}],
                "collective": {"backend": "hccl", "world_size": 8, "results": rows}}
    memory = [{"step": s, "allocated_bytes": (100 + s) * 2 ** 20, "reserved_bytes": 300 * 2 ** 20} for s in range(50)]
    page = html.render(document, memory)
    found, tags = fetches(page)
    assert found == [] and tags.count("svg") == 2 and "script" not in tags  # user text is escaped, never run
    assert "&lt;script&gt;" in page and "n&lt;1&gt;&amp;&quot;" in page
    assert "Bus bandwidth against message size (hccl, 8 ranks)" in page and ">64M<" in page
    assert page.count("<polyline") == 4 and "ACCEPTED: nothing failed" in page
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):  # well-formed: any SVG viewer draws it
        root = ElementTree.fromstring(svg)
        assert root.tag == "svg" and root.findall("polyline")


def test_collective_is_skipped_with_a_reason_where_it_cannot_run(monkeypatch):
    monkeypatch.setattr(probe, "pick_backend", lambda requested: "gloo")
    results, (finding,) = engine.run_collective(engine.CollectiveOptions(), {"chips": {"count": 0}},
                                                api.load_profile())
    assert results is None and finding.status is Status.SKIP and "no NPU or GPU backend" in finding.detail


def test_memlog_is_plotted_and_a_bad_one_is_a_usage_error(node, tmp_path):
    from npudoctor.workload import memlog

    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps(memlog.make_record(step, "run1", allocated_bytes=(100 + step) * 2 ** 20,
                                                          reserved_bytes=400 * 2 ** 20)) + "\n"
                           for step in range(30)))
    records = engine.read_memory(str(log))
    page = html.render({"schema": "npudoctor.report/1", "findings": []}, records)
    assert "Memory over training steps" in page and page.count("<polyline") == 2
    bad = cli_runner().invoke(main, ["onboard", "--profile", "default", "-o", str(tmp_path / "o"),
                                     "--memlog", str(tmp_path / "missing.jsonl")])
    assert bad.exit_code == 2 and bad.stderr.startswith("npudoctor: error: --memlog")
    assert not (tmp_path / "o").exists()


def test_a_record_that_appears_during_the_run_is_kept_and_said_in_one_line(node, tmp_path, monkeypatch):
    """Issue 33: another run writing report.json into the same folder meanwhile was a FileExistsError traceback."""
    healthy_910b_node(node)
    out = tmp_path / "accept"
    real = engine.run_collective

    def meanwhile(*args, **kwargs):
        (out / "report.json").write_text("the other run's\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "run_collective", meanwhile)
    result = cli_runner().invoke(main, ["onboard", "--profile", "default", "-o", str(out), "--no-collective",
                                        "--root", str(node.root)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "appeared while onboard ran" in result.stderr and "nothing was overwritten" in result.stderr
    assert (out / "report.json").read_text() == "the other run's\n" and not (out / "report.html").exists()


def test_onboard_logs_gives_the_job_diagnosis_as_check_logs_does(node, tmp_path):
    """Issue 27 point 5: `onboard --logs DIR` (repeatable) reads the folders as `check --logs DIR` does: LOG001's
    job diagnosis first, in onboard's console and in its report.json."""
    from tests.test_logs_job import exception_job

    healthy_910b_node(node)
    job = exception_job(node.root / "var" / "log")  # node-a/device-0 hits the exception, its 3 peers time out
    logs = [arg for folder in sorted(job.glob("node-a/device-*"))
            for arg in ("--logs", "/" + str(folder.relative_to(node.root)))]
    out = tmp_path / "o"
    result = cli_runner().invoke(main, ["onboard", "--profile", "atlas800t-a2-8x910b", "-o", str(out), "--root",
                                        str(node.root), "--no-collective", *logs], env=node.env)
    assert result.exit_code == 1, result.stderr
    document = json.loads((out / "report.json").read_text())
    first = next(f for f in document["findings"] if f["id"] == "LOG001")
    assert first["subject"] == "diagnosis" and first["status"] == "fail", first["detail"]
    verdict = first["detail"]
    assert verdict.startswith("Root cause: NPU 0 AI Vector core exception in GatherV3_"), verdict
    assert "3 ranks then timed out in HCCL waiting for it" in verdict
    checked = cli_runner().invoke(main, ["check", "--root", str(node.root), *logs, "--only", "LOG001",
                                         "--format", "json"], env=node.env)
    assert json.loads(checked.stdout)["findings"][0]["detail"] == verdict  # one diagnosis, both commands
    assert "Root cause: NPU 0 AI Vector core exception" in " ".join(result.stdout.split())


def test_onboard_logs_of_a_whole_job_names_node_and_npu_as_logs_scan_does(node, tmp_path):
    """Issue 27: `onboard --logs JOB` (a folder per node) gives `logs scan JOB`'s verdict, node named."""
    from tests.test_logs_job import _scan, exception_job

    healthy_910b_node(node)
    job = exception_job(node.root / "var" / "log")
    out = tmp_path / "o"
    result = cli_runner().invoke(main, ["onboard", "--profile", "atlas800t-a2-8x910b", "-o", str(out), "--root",
                                        str(node.root), "--no-collective", "--logs", "/var/log/job"], env=node.env)
    assert result.exit_code == 1, result.stderr
    first = next(f for f in json.loads((out / "report.json").read_text())["findings"] if f["id"] == "LOG001")
    assert first["subject"] == "diagnosis" and first["detail"] == _scan(job).diagnosis.verdict
    assert first["detail"].startswith("Root cause: node-a NPU 0 AI Vector core exception"), first["detail"]
