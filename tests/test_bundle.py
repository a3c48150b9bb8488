"""collect -> bundle -> check --from: the same findings on another machine, with secrets redacted."""

from __future__ import annotations

import json
import tarfile

import pytest

from npudoctor import api
from npudoctor.probes.bundle import BundleError, ReplayRunner, build_bundle, write_bundle
from npudoctor.probes.runner import RecordingRunner
from npudoctor.probes.sources import Command
from tests.nodes import collect_and_replay


def _comparable(report):
    return [(f.id, f.status, f.subject, f.detail) for f in report.findings]


def test_collect_then_replay_gives_the_same_findings(node, tmp_path):
    node.npu_node(2)
    node.pci_device("0000:c9:00.0", driver=None, speed="8.0 GT/s PCIe")
    node.setenv(HF_TOKEN="hf_secret_value", HCCL_IF_IP="10.0.0.5")
    bundle = tmp_path / "node.tar.gz"
    live, _, replayed = collect_and_replay(node, bundle)
    assert _comparable(replayed) == _comparable(live)
    assert replayed.source == f"bundle:{bundle}"


def test_bundle_redacts_secrets_in_environment_and_outputs(node, tmp_path):
    node.setenv(HF_TOKEN="hf_secret_value", MY_PASSWORD="hunter2", LD_LIBRARY_PATH="/opt/x", UNREAD="value")
    node.command("tool", stdout="export OPENAI_API_KEY=sk-live-123\nurl https://u:pw123@host/x\n")
    recorder = RecordingRunner(node.runner())
    recorder.environ()
    recorder.run(Command(("tool",)))
    bundle = tmp_path / "b.tar.gz"
    write_bundle(str(bundle), build_bundle(recorder.records, {}))
    with tarfile.open(bundle) as tar:
        everything = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
        manifest = json.loads(tar.extractfile("manifest.json").read())
    for secret in (b"hf_secret_value", b"hunter2", b"sk-live-123", b"pw123"):
        assert secret not in everything
    assert b"/opt/x" in everything  # ordinary values survive
    env = next(r for r in manifest["records"] if r["kind"] == "env")
    assert "UNREAD" in env["names_not_recorded"] and b"value" not in everything  # no check reads it
    assert manifest["schema"] == "npudoctor.bundle/1" and manifest["redacted"] is True
    record = next(r for r in manifest["records"] if r["kind"] == "command")
    assert record["argv"] == ["tool"] and record["rc"] == 0 and "duration_s" in record


def test_collect_never_overwrites(tmp_path):
    target = tmp_path / "node.tar.gz"
    target.write_bytes(b"precious")
    with pytest.raises(api.UsageError, match="already exists"):
        api.collect(str(target))
    assert target.read_bytes() == b"precious"


@pytest.mark.parametrize("content", [b"", b"not a tarball at all", b"\x1f\x8b\x08\x00truncated-gzip"])
def test_bad_bundles_give_one_line_errors(tmp_path, content):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(content)
    with pytest.raises(BundleError) as info:
        ReplayRunner(str(bad))
    assert "\n" not in str(info.value)


def test_tarball_without_manifest_is_rejected(tmp_path):
    other = tmp_path / "other.tar.gz"
    with tarfile.open(other, "w:gz") as tar:
        tar.add(__file__, arcname="x.py")
    with pytest.raises(BundleError, match=r"no manifest\.json"):
        ReplayRunner(str(other))


def test_unrecorded_requests_read_as_not_recorded(tmp_path):
    bundle = tmp_path / "b.tar.gz"
    write_bundle(str(bundle), build_bundle([], {"hostname": "n1"}))
    runner = ReplayRunner(str(bundle))
    assert runner.run(Command(("npu-smi", "info"))).error == "not-recorded"
    assert runner.read_text("/etc/hccn.conf").error == "not-recorded"
    assert runner.host() == {"hostname": "n1"}


def test_collect_with_logs_replays_the_log_findings(node, tmp_path):
    from tests.samples import sample_text

    node.file("/root/ascend/log/debug/plog/plog-7_20250101000000000.log",
              sample_text("plog_runtime_ffts_vector_core_exception_3lines.log"))
    options = {"logs_dirs": ("/root/ascend/log",)}
    live, _, replayed = collect_and_replay(node, tmp_path / "node.tar.gz", only=("logs",), options=options)
    assert live.findings[0].status.value == "fail"
    assert _comparable(replayed) == _comparable(live)


def test_collect_with_logs_of_a_whole_job_replays_its_diagnosis(node, tmp_path):
    """Issue 27: a job tree under --logs is walked through the runner, so the bundle holds what the job
    diagnosis read and `check --from` says the same verdict (node, rank and NPU)."""
    from tests.test_logs_job import exception_job

    exception_job(node.path("/var/log"))
    live, _, replayed = collect_and_replay(node, tmp_path / "node.tar.gz", only=("logs",),
                                           options={"logs_dirs": ("/var/log/job",)})
    assert live.findings[0].subject == "diagnosis" and live.findings[0].detail.startswith("Root cause: node-a NPU 0")
    assert _comparable(replayed) == _comparable(live)
