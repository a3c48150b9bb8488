"""One safe opener for every file read whole: FIFOs, devices and huge files never hang or eat memory."""

from __future__ import annotations

import os

import pytest

from npudoctor.probes.safe_open import UnsafeFile, read_file
from tests.bounded import run_npudoctor


def test_fifo_device_directory_and_cap(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, reason in ((str(fifo), "not-regular"), ("/dev/zero", "not-regular"), (str(tmp_path), "is-a-directory"),
                         (str(tmp_path / "missing"), "not-found")):
        with pytest.raises(UnsafeFile) as info:
            read_file(path, 100)
        assert info.value.reason == reason and str(info.value).startswith(path)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 1000 + b"\nend\n")
    assert read_file(str(big), 10) == (b"x" * 10, True, 1005)
    assert read_file(str(big), 4, tail=True) == (b"end\n", True, 1005)
    with pytest.raises(UnsafeFile, match="too large"):
        read_file(str(big), 10, whole=True)
    link = tmp_path / "link"
    link.symlink_to(big)
    assert read_file(str(link), 3).data == b"xxx"
    with pytest.raises(UnsafeFile) as info:
        read_file(str(link), 3, follow_symlinks=False)
    assert info.value.reason == "symlink"
    zero_link = tmp_path / "zero"
    zero_link.symlink_to("/dev/zero")
    with pytest.raises(UnsafeFile, match="a character device"):
        read_file(str(zero_link), 3)


def test_runner_reads_a_fifo_hccn_conf_as_an_error_not_a_hang(node):
    node.mkdir("/etc")
    os.mkfifo(node.path("/etc/hccn.conf"))
    node.symlink("/usr/local/Ascend/driver/version.info", "/dev/zero")
    runner = node.runner()
    assert runner.read_text("/etc/hccn.conf").error == "not-regular"
    assert runner.read_text("/usr/local/Ascend/driver/version.info").error == "not-regular"
    result = run_npudoctor(["check", "--root", str(node.root), "--format", "json"])
    assert result.rc in (0, 1), result.stderr
    result.assert_cheap()
