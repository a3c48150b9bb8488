"""Bundles are untrusted input, and `collect -o` writes only what it says."""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest

from npudoctor import api
from npudoctor.probes import bundle as bundle_module
from npudoctor.probes.bundle import SCHEMA, BundleError, ReplayRunner, build_bundle, write_bundle
from npudoctor.probes.sources import Command
from tests.bounded import run_npudoctor


def manifest(records=(), **extra) -> bytes:
    return json.dumps({"schema": SCHEMA, "records": list(records), **extra}).encode()


def tar_with(path, members, gnu_long_name_bytes=0):
    """A .tar.gz of (name, data[, size]) members; ``size`` may exceed the data (a header that lies)."""
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name, data, *size in members:
            info = tarfile.TarInfo(name)
            info.size = size[0] if size else len(data)
            if size:
                tar.fileobj.write(info.tobuf(tarfile.GNU_FORMAT))  # the header alone, no data
            else:
                tar.addfile(info, io.BytesIO(data))
    return str(path)


def test_gnu_long_name_header_is_capped(tmp_path):
    long_name = "raw/" + "a" * (2 * 1024 * 1024)
    path = tar_with(tmp_path / "long.tar.gz", [("manifest.json", manifest()), (long_name, b"x")])
    result = run_npudoctor(["check", "--from", path])
    result.assert_one_line_error("extended header")
    result.assert_cheap()


def test_ten_gb_member_is_rejected_from_its_header(tmp_path):
    records = [{"key": "cmd:npu-smi info", "kind": "command", "raw": "raw/0000.txt"}]
    path = tar_with(tmp_path / "big.tar.gz", [("manifest.json", manifest(records)),
                                              ("raw/0000.txt", b"", 10 * 1024 ** 3)])
    result = run_npudoctor(["check", "--from", path])
    result.assert_one_line_error("larger than")
    result.assert_cheap()


def test_members_the_manifest_does_not_reference_are_never_read(tmp_path, monkeypatch):
    records = [{"key": "cmd:tool", "kind": "command", "raw": "raw/0000.txt"}]
    members = [("manifest.json", manifest(records)), ("raw/0000.txt", b"out\n")]
    members += [(f"raw/{i:04d}.txt", b"\0" * 1024) for i in range(1, 50)]
    path = tar_with(tmp_path / "many.tar.gz", members)
    runner = ReplayRunner(path)
    assert set(runner._members) == {"raw/0000.txt"} and runner.run(Command(("tool",))).stdout == "out\n"
    monkeypatch.setattr(bundle_module, "MAX_BUNDLE_MEMBERS", 10)
    with pytest.raises(BundleError, match="more than 10 members"):
        ReplayRunner(path)
    monkeypatch.setattr(bundle_module, "MAX_BUNDLE_MEMBERS", 1000)
    records = [{"key": f"cmd:t{i}", "kind": "command", "raw": f"raw/{i:04d}.txt"} for i in range(50)]
    path = tar_with(tmp_path / "total.tar.gz", [("manifest.json", manifest(records)), *members[1:]])
    monkeypatch.setattr(bundle_module, "MAX_BUNDLE_TOTAL_BYTES", 10 * 1024)
    with pytest.raises(BundleError, match="more than 10240 bytes"):
        ReplayRunner(path)


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/passwd"])
def test_members_outside_the_bundle_are_refused(tmp_path, name):
    path = tar_with(tmp_path / "evil.tar.gz", [("manifest.json", manifest()), (name, b"x")])
    with pytest.raises(BundleError, match="outside the bundle"):
        ReplayRunner(path)


def test_dev_zero_and_a_fifo_as_the_bundle_do_not_hang(tmp_path):
    fifo = tmp_path / "bundle.tar.gz"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        result = run_npudoctor(["check", "--from", path])
        result.assert_one_line_error("not a regular file or folder")
        result.assert_cheap()


def folder_bundle(tmp_path, records, files):
    folder = tmp_path / "b"
    (folder / "raw").mkdir(parents=True)
    (folder / "manifest.json").write_bytes(manifest(records))
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def test_folder_bundle_symlink_fifo_and_unreadable_file(tmp_path):
    records = [{"key": "file:/etc/hccn.conf", "kind": "file", "path": "/etc/hccn.conf", "raw": "raw/0000.txt"}]
    secret = tmp_path / "outside.txt"
    secret.write_text("root-only secret")
    folder = folder_bundle(tmp_path, records, {})
    (folder / "raw" / "0000.txt").symlink_to(secret)
    with pytest.raises(BundleError, match="symbolic link"):
        ReplayRunner(str(folder))
    (folder / "raw" / "0000.txt").unlink()
    os.mkfifo(folder / "raw" / "0000.txt")
    result = run_npudoctor(["check", "--from", str(folder)])
    result.assert_one_line_error("not a regular file")
    result.assert_cheap()
    (folder / "raw" / "0000.txt").unlink()
    (folder / "raw").rmdir()
    (folder / "raw").symlink_to(tmp_path)  # a raw/ folder that is a link out
    (tmp_path / "0000.txt").write_text("outside")
    with pytest.raises(BundleError, match="raw: not a folder"):
        ReplayRunner(str(folder))


@pytest.mark.parametrize("records, field", [
    (None, "records: expected a list, got null"),
    ("x", "records: expected a list, got a string"),
    ([1, 2], "records[0]: expected an object, got an integer"),
    ([{"kind": "command"}], "records[0].key: missing"),
    ([{"key": ["a"], "kind": "command"}], "records[0].key: expected a string, got a list"),
    ([{"key": "cmd:x", "kind": "command", "rc": "0"}], "records[0].rc: expected an integer or null, got a string"),
    ([{"key": "cmd:x", "kind": "command", "argv": [1]}], "records[0].argv: expected a list of strings"),
    ([{"key": "env", "kind": "env", "variables": {"A": 1}}], "records[0].variables: expected an object of strings"),
    ([{"key": "cmd:x", "kind": "command", "raw": "../../etc/passwd"}], "records[0].raw: not a raw/ file name"),
])
def test_manifest_schema_errors_name_the_field(tmp_path, records, field):
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"schema": SCHEMA, "records": records}))
    with pytest.raises(BundleError) as info:
        ReplayRunner(str(folder))
    assert f"manifest.json: {field}" in str(info.value) and "\n" not in str(info.value)


def test_deeply_nested_manifest_is_one_line(tmp_path):
    folder = tmp_path / "b"
    folder.mkdir()
    nested = "[" * 200_000 + "]" * 200_000
    (folder / "manifest.json").write_text(f'{{"schema": "{SCHEMA}", "records": {nested}}}')
    result = run_npudoctor(["check", "--from", str(folder)])
    result.assert_one_line_error("manifest.json")
    result.assert_cheap()


def test_replay_decodes_raw_files_like_a_live_read(node, tmp_path):
    gbk = "错误码 EE9999: 设备异常\n".encode("gb18030")
    node.file("/etc/hccn.conf", gbk)
    live = node.runner().read_text("/etc/hccn.conf").text
    records = [{"key": "file:/etc/hccn.conf", "kind": "file", "path": "/etc/hccn.conf", "raw": "raw/0000.txt"}]
    folder = folder_bundle(tmp_path, records, {"raw/0000.txt": gbk})
    assert ReplayRunner(str(folder)).read_text("/etc/hccn.conf").text == live == gbk.decode("gb18030")


# -- collect -o -----------------------------------------------------------------------------------------------
def test_collect_refuses_empty_names_existing_partial_and_planted_symlinks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("",):
        with pytest.raises(api.UsageError, match="empty"):
            api.collect(name, root=str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == []
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "b.tar.gz.partial").symlink_to(victim)
    with pytest.raises(OSError, match="already exists"):
        write_bundle(str(tmp_path / "b.tar.gz"), build_bundle([], {}))
    assert victim.read_text() == "precious" and not (tmp_path / "b.tar.gz").exists()
    (tmp_path / "b.tar.gz.partial").unlink()
    (tmp_path / "b.tar.gz.partial").write_text("someone's")
    with pytest.raises(OSError, match="already exists"):
        write_bundle(str(tmp_path / "b.tar.gz"), build_bundle([], {}))
    assert (tmp_path / "b.tar.gz.partial").read_text() == "someone's"


def test_a_full_disk_leaves_nothing_behind(tmp_path, monkeypatch):
    import errno

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    members = build_bundle([], {})
    monkeypatch.setattr(tarfile.TarFile, "addfile", no_space)
    with pytest.raises(OSError, match="No space"):
        write_bundle(str(tmp_path / "b.tar.gz"), members)
    real_fdopen = os.fdopen

    class FullFile(io.RawIOBase):
        def __init__(self, fd):
            self.fd = fd

        def writable(self):
            return True

        def write(self, data):
            no_space()

        def close(self):
            os.close(self.fd)
            super().close()

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: FullFile(fd) if a and "w" in a[0] else real_fdopen(fd, *a))
    with pytest.raises(OSError, match="No space"):
        write_bundle(str(tmp_path / "folder"), members)
    assert os.listdir(tmp_path) == []


def test_collect_cli_full_disk_is_one_line_and_cleaned(tmp_path, monkeypatch):
    import errno

    from npudoctor.cli import main
    from tests.clirunner import cli_runner

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "addfile", no_space)
    monkeypatch.chdir(tmp_path)
    result = cli_runner().invoke(main, ["collect", "-o", "b.tar.gz", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "No space left on device" in result.stderr
    assert sorted(os.listdir(tmp_path)) == []


def test_bundle_replays_with_the_options_collect_was_given(node, tmp_path):
    from tests.nodes import collect_and_replay
    from tests.samples import sample_text

    node.file("/root/ascend/log/debug/plog/plog-7_20250101000000000.log",
              sample_text("plog_runtime_ffts_vector_core_exception_3lines.log"))
    node.command("mypython", stdout="")
    options = {"logs_dirs": ("/root/ascend/log",), "python": "mypython"}
    live, _, replayed = collect_and_replay(node, tmp_path / "n.tar.gz", only=("LOG001", "VER005"), options=options)
    assert [(f.id, f.status) for f in replayed.findings] == [(f.id, f.status) for f in live.findings]
    assert all(f.detail != "not-recorded" and "not recorded" not in f.detail for f in replayed.findings)
    assert ReplayRunner(str(tmp_path / "n.tar.gz")).collect_options == {
        "level": 1, "python": "mypython", "logs_dirs": ["/root/ascend/log"]}
