"""The one symbolic-link rule (`model.inputs`), held for `logs scan` and `prof analyze` alike.

Files are read as regular files and folders as folders, never through a link (issue 19 point 16): a link
named on the command line is refused with the same words in both commands (one line, exit 2), a link met while
walking a folder is skipped with the same words; only ``logs scan --follow-symlinks`` reads them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from npudoctor.cli import main
from npudoctor.model.inputs import NAMED_LINK, WALKED_LINK, is_named_link
from tests import profdirs
from tests.clirunner import cli_runner
from tests.test_links_and_empty_args import one_line_error

ERROR_LINE = b"[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.001 [api_c.cc:9]1 rtModelExecute:ErrCode=507011\n"


def invoke(*args):
    return cli_runner().invoke(main, [str(a) for a in args])


def scanned(result):
    assert result.exit_code == 1, result.output  # the 507011 line is a finding
    document = json.loads(result.stdout)
    return document


@pytest.fixture
def logs(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "plog-1_20250101000000000.log").write_bytes(ERROR_LINE)
    return folder


def test_logs_scan_and_prof_refuse_a_named_link_to_a_file_or_folder_with_the_same_words(tmp_path, logs):
    (tmp_path / "latest.log").symlink_to(logs / "plog-1_20250101000000000.log")
    (tmp_path / "latest").symlink_to(logs)
    for named in (tmp_path / "latest.log", tmp_path / "latest"):
        one_line_error(invoke("logs", "scan", named), f"{named}: {NAMED_LINK}")
        # asked for: read as its target
        document = scanned(invoke("logs", "scan", named, "--format", "json", "--follow-symlinks"))
        assert any(f["subject"] == "507011" for f in document["findings"]), document["findings"]
    # beside a readable input: the multi-input rule (said on stderr, exit 1, the rest judged)
    partial = invoke("logs", "scan", tmp_path / "latest.log", logs)
    assert partial.exit_code == 1 and NAMED_LINK in partial.stderr, partial.output

    rank = profdirs.torch_npu_rank(tmp_path / "elsewhere", rank=0, extras=False)
    kernel = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    (tmp_path / "kernel_details.csv").symlink_to(kernel)
    (tmp_path / "run").symlink_to(rank)
    for named in (tmp_path / "kernel_details.csv", tmp_path / "run"):
        one_line_error(invoke("prof", "analyze", named), f"{named}: {NAMED_LINK}")
    assert invoke("prof", "analyze", kernel).exit_code in (0, 1)  # the file itself is read
    assert invoke("prof", "analyze", rank).exit_code in (0, 1)


def test_logs_scan_and_prof_skip_a_link_met_in_a_folder_with_the_same_words(tmp_path, logs):
    inside = logs / "plog-2_20250101000000001.log"
    inside.symlink_to(logs / "plog-1_20250101000000000.log")  # inside the folder: it would be read twice
    document = scanned(invoke("logs", "scan", logs, "--format", "json"))
    assert [os.path.basename(f["path"]) for f in document["files"]] == ["plog-1_20250101000000000.log"]
    assert [(os.path.basename(s["path"]), s["reason"]) for s in document["skipped"]] == [
        ("plog-2_20250101000000001.log", WALKED_LINK)]
    followed = scanned(invoke("logs", "scan", logs, "--format", "json", "--follow-symlinks"))
    assert len(followed["files"]) == 2

    rank = profdirs.torch_npu_rank(tmp_path / "run", rank=0, extras=False)
    output = rank / "ASCEND_PROFILER_OUTPUT"
    (output / "op_statistic.csv").symlink_to(output / "kernel_details.csv")
    result = invoke("prof", "analyze", tmp_path / "run", "--format", "json")
    assert result.exit_code in (0, 1), result.output
    assert f"{output / 'op_statistic.csv'}: {WALKED_LINK}" in json.loads(result.stdout)["problems"]


def test_a_named_link_to_a_pipe_is_read_as_the_stream_it_is(tmp_path):
    # The shell's <(cmd) names /dev/fd/N, a link in /proc to a pipe: it stays as named and is read to its end.
    command = (f"{sys.executable} -m npudoctor logs scan --format json <(printf '%s' "
               f"'{ERROR_LINE.decode().strip()}')")
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "NO_COLOR": "1"})
    assert result.returncode == 1, result.stderr[-1500:]
    assert any(f["subject"] == "507011" for f in json.loads(result.stdout)["findings"])


def test_only_links_to_a_file_folder_or_named_fifo_count_as_named_links(tmp_path):
    real = tmp_path / "real.log"
    real.write_bytes(b"x")
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to-fifo").symlink_to(tmp_path / "fifo")
    (tmp_path / "to-folder").symlink_to(tmp_path)
    for link in ("link", "dangling", "to-fifo", "to-folder"):
        assert is_named_link(str(tmp_path / link)), link
    for as_named in ("fifo", "real.log", "nothing-here"):
        assert not is_named_link(str(tmp_path / as_named)), as_named
    read, write = os.pipe()  # what <(cmd) names: /dev/fd/N, a link in /proc to an anonymous pipe
    try:
        assert not is_named_link(f"/proc/self/fd/{read}")
    finally:
        os.close(read)
        os.close(write)
