"""`npudoctor fleet PATH...`: many reports and bundles at once, failing checks per node and version drift."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tarfile

import pytest

from npudoctor.cli import main
from npudoctor.fleet import demo, view
from npudoctor.model.inputs import NAMED_LINK, WALKED_LINK
from tests.clirunner import cli_runner


@pytest.fixture(scope="module")
def documents():
    return dict(demo.scenario_reports())


def write_report(path, document, **inventory):
    path.write_text(json.dumps(dict(document, inventory=dict(document["inventory"], **inventory))))
    return path


def test_reports_bundles_and_archives_in_one_view(tmp_path, documents):
    folder = tmp_path / "reports"
    folder.mkdir()
    write_report(folder / "a.json", documents["healthy"], hostname="node-a")
    write_report(folder / "b.json", documents["healthy"], hostname="node-b", driver="24.1.0")
    write_report(folder / "c.json", documents["unbound-device"], hostname="node-c")
    shutil.copy(demo.scenario_path("chip-warning"), folder / "d.tar.gz")  # a bundle: replayed
    archive = tmp_path / "more.tar.gz"  # a tar of reports collected from other nodes
    with tarfile.open(archive, "w:gz") as tar:
        data = json.dumps(dict(documents["version-mismatch"], inventory=dict(
            documents["version-mismatch"]["inventory"], hostname="node-e"))).encode()
        info = tarfile.TarInfo("reports/node-e.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    result = view.build([str(folder), str(archive)])
    names = {node.name: node for node in result.nodes}
    assert set(names) == {"node-a", "node-b", "node-c", "atlas-chip-warning", "node-e"}
    assert names["node-c"].failing == ("PCI002",) and names["atlas-chip-warning"].warning == ("SMI002",)
    assert dict(result.failing_checks()) == {"PCI002": ["node-c"], "VER003": ["node-e"]}
    drift = {d.field: d for d in result.drift()}
    assert drift["driver"].majority == "24.1.0.3" and drift["driver"].majority_count == 4
    assert drift["driver"].others == [("24.1.0", ["node-b"])]
    assert drift["torch"].others == [("2.2.0", ["node-e"])]
    assert "hostname" not in drift and "chips.source" not in drift
    assert result.exit_code() == 1


def test_hostile_inputs_are_listed_never_read_whole(tmp_path, documents):
    write_report(tmp_path / "good.json", documents["healthy"], hostname="good")
    os.mkfifo(tmp_path / "fifo.json")
    os.symlink("/dev/zero", tmp_path / "zero.json")
    with open(tmp_path / "huge.json", "wb") as handle:
        handle.truncate(view.MAX_REPORT_BYTES + 1)  # sparse: costs no disk
    (tmp_path / "binary.json").write_bytes(b"\x00\xff\xfe garbage")
    (tmp_path / "other.json").write_text('{"schema": "npudoctor.logs/1"}')
    (tmp_path / "broken.tar.gz").write_bytes(b"\x1f\x8b not really gzip")
    result = view.build([str(tmp_path)])
    assert [node.name for node in result.nodes] == ["good"]
    reasons = {os.path.basename(path): reason for path, reason in result.errors}
    assert reasons["fifo.json"].startswith("not a regular file") and reasons["zero.json"] == WALKED_LINK
    assert reasons["huge.json"].startswith("larger than") and reasons["binary.json"].startswith("not JSON")
    assert "npudoctor.logs/1" in reasons["other.json"] and reasons["broken.tar.gz"].startswith("not a readable")


def test_links_are_never_read_named_or_met_in_the_walk(tmp_path, documents):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_report(elsewhere / "secret.json", documents["unbound-device"], hostname="elsewhere")
    (elsewhere / "bundle").mkdir()  # a bundle folder (manifest.json inside) met through a link
    (elsewhere / "bundle" / "manifest.json").write_text("{}")
    folder = tmp_path / "reports"
    folder.mkdir()
    write_report(folder / "good.json", documents["healthy"], hostname="good")
    (folder / "linked.json").symlink_to(elsewhere / "secret.json")
    (folder / "linked-bundle").symlink_to(elsewhere / "bundle")
    (tmp_path / "named.json").symlink_to(elsewhere / "secret.json")
    result = view.build([str(folder), str(tmp_path / "named.json")])
    assert [node.name for node in result.nodes] == ["good"]
    assert sorted(result.errors) == sorted([(str(folder / "linked.json"), WALKED_LINK),
                                            (str(folder / "linked-bundle"), WALKED_LINK),
                                            (str(tmp_path / "named.json"), NAMED_LINK)])


def test_a_node_reported_twice_counts_once_by_its_newest_report(tmp_path, documents):
    old = dict(documents["unbound-device"], run={"started": "2026-11-30T10:00:00Z"})
    new = dict(documents["healthy"], run={"started": "2026-12-01T10:00:00Z"})
    write_report(tmp_path / "2.json", new, hostname="n1")
    write_report(tmp_path / "1.json", old, hostname="n1")
    result = view.build([str(tmp_path)])
    assert len(result.nodes) == 1 and result.nodes[0].verdict == "ok" and result.reports_read == 2


def test_names_that_only_read_alike_once_cleaned_stay_two_nodes(tmp_path, documents):
    # Two hosts whose names differ only by a secret (redacted to the same text) or a control character: two
    # nodes, each named with its report; the same written name twice is still one node.
    write_report(tmp_path / "a.json", documents["healthy"], hostname="AKIAIOSFODNN7EXAMPLE-gpu")
    write_report(tmp_path / "b.json", documents["unbound-device"], hostname="AKIAIOSFODNN7EXAMPLF-gpu")
    write_report(tmp_path / "c.json", documents["healthy"], hostname="node\x1b[31m1")
    write_report(tmp_path / "d.json", documents["healthy"], hostname="node1", driver="24.1.0")
    write_report(tmp_path / "e.json", documents["healthy"], hostname="node1", driver="24.1.0")
    result = view.build([str(tmp_path)])
    names = {node.name: node.verdict for node in result.nodes}
    assert names == {f"<redacted>-gpu ({tmp_path / 'a.json'})": "ok", f"<redacted>-gpu ({tmp_path / 'b.json'})": "fail",
                     f"node1 ({tmp_path / 'c.json'})": "ok", f"node1 ({tmp_path / 'e.json'})": "ok"}, names
    assert result.reports_read == 5
    document = json.dumps(view.to_dict(result))
    assert "AKIAIOSFODNN7EXAMPL" not in document and "\\u001b" not in document
    (drift,) = [d for d in result.drift() if d.field == "driver"]
    assert (drift.majority_count, drift.others) == (3, [("24.1.0", [f"node1 ({tmp_path / 'e.json'})"])])


def test_cli_formats_and_exit_codes(tmp_path, documents):
    write_report(tmp_path / "a.json", documents["healthy"], hostname="a")
    write_report(tmp_path / "b.json", documents["healthy"], hostname="b", torch_npu="2.1.0.post8")
    runner = cli_runner()
    text = runner.invoke(main, ["fleet", str(tmp_path)])
    assert text.exit_code == 0 and "torch_npu: 2.1.0.post10 on 1 node(s)" in text.output
    assert "2.1.0.post8 on 1: b" in text.output and max(map(len, text.output.splitlines())) <= 100
    document = json.loads(runner.invoke(main, ["fleet", str(tmp_path), "--format", "json"]).output)
    assert document["schema"] == "npudoctor.fleet/1" and document["summary"]["nodes"] == 2
    assert document["drift"] == [{"field": "torch_npu", "majority": "2.1.0.post10", "majority_nodes": 1,
                                  "others": [{"value": "2.1.0.post8", "nodes": ["b"]}]}]
    rows = list(csv.DictReader(io.StringIO(runner.invoke(main, ["fleet", str(tmp_path), "--format", "csv"]).output)))
    assert [(r["node"], r["verdict"], r["torch_npu"], r["chips.count"]) for r in rows] == [
        ("a", "ok", "2.1.0.post10", "8"), ("b", "ok", "2.1.0.post8", "8")]
    (tmp_path / "broken.json").write_text("{")
    partial = runner.invoke(main, ["fleet", str(tmp_path), "--format", "csv"])
    # Some inputs unreadable: said on stderr and exit 1 (npudoctor.model.inputs), never a clean 0.
    assert partial.exit_code == 1 and partial.stderr.startswith("npudoctor: warning: 1 input(s) could not be read")
    missing = runner.invoke(main, ["fleet", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and missing.stderr.startswith("npudoctor: error: no readable npudoctor report")
    assert runner.invoke(main, ["fleet"]).exit_code == 2


def test_demo_fleet_shows_every_scenario_and_drift():
    result = cli_runner().invoke(main, ["fleet", "--demo", "--format", "json"])
    document = json.loads(result.output)
    assert result.exit_code == 1 and document["summary"]["nodes"] == 42
    failing = {item["id"] for item in document["failing_checks"]}
    assert failing == {"VER003", "LIB001", "PCI002", "SMI001", "PCI004", "HCCL002", "SMI002"}  # SMI002: hbm-ecc
    assert {d["field"] for d in document["drift"]} >= {"driver", "firmware", "cann_toolkit", "torch_npu",
                                                       "chips.npu_firmware"}  # the NPUs' own, at --level 2
    # which chip to act on, per node (issue 30): the hbm-ecc node's NPU 5
    (hbm,) = [node for node in document["nodes"] if node["name"] == "atlas-00022"]
    assert hbm["chips"] == [{"id": "SMI002", "subject": "npu:5/chip:0"}]
    text = cli_runner().invoke(main, ["fleet", "--demo"]).output
    assert "atlas-00022 npu:5/chip:0" in text and "atlas-00024 npu:2/chip:0" in text


def test_archives_of_reports_are_read_one_member_at_a_time_within_caps(tmp_path, documents, monkeypatch):
    """An archive of reports is untrusted like a bundle: a huge long-name header or too many members is
    refused with one reason, never read into memory (it used getmembers(): 2 GB for a 2 MB archive)."""
    from npudoctor.probes import bundle

    long_name = tmp_path / "long-name.tar"
    with tarfile.open(long_name, "w", format=tarfile.GNU_FORMAT) as tar:
        data = json.dumps(documents["healthy"]).encode()
        info = tarfile.TarInfo("x" * (bundle.MAX_TAR_HEADER_BYTES + 1) + ".json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    many = tmp_path / "many.tar"
    with tarfile.open(many, "w") as tar:
        for index in range(5):
            info = tarfile.TarInfo(f"note-{index}.txt")
            tar.addfile(info, io.BytesIO(b""))
    write_report(tmp_path / "good.json", documents["healthy"], hostname="good")
    monkeypatch.setattr(bundle, "MAX_BUNDLE_MEMBERS", 3)
    result = view.build([str(tmp_path / "good.json"), str(long_name), str(many)])
    assert [node.name for node in result.nodes] == ["good"]
    reasons = {os.path.basename(path): reason for path, reason in result.errors}
    assert reasons["long-name.tar"].startswith("not a readable archive")
    assert "extended header" in reasons["long-name.tar"]
    assert reasons["many.tar"] == "not a readable archive: more than 3 members"
