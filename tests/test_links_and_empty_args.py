"""Issue 19 points 16 and 17: files are read and written as regular files, never through a symbolic link;
an empty argument is refused rather than taken as "not given", and ``-`` is refused where no stream fits.
Hostile layouts are built here; runs that could hang are measured in a child (tests/bounded.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from npudoctor.cli import main
from npudoctor.workload import memlog
from tests import profdirs
from tests.bounded import run_npudoctor
from tests.clirunner import cli_runner
from tests.test_prof_run import fake_env, npudoctor


def invoke(*args, env=None):
    return cli_runner().invoke(main, [str(a) for a in args], env=env)


def one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npudoctor: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# -- point 16: never through a link --------------------------------------------------------------------------
def test_prof_analyze_reads_no_table_through_a_link(tmp_path):
    outside = profdirs.torch_npu_rank(tmp_path / "elsewhere", rank=0)
    kernel = outside / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    run = tmp_path / "run" / "ASCEND_PROFILER_OUTPUT"
    run.mkdir(parents=True)
    (run / "kernel_details.csv").symlink_to(kernel)
    (run / "op_summary_0_1_20230818142704.csv").symlink_to("/proc/self/pagemap")
    result = run_npudoctor(["prof", "analyze", str(tmp_path / "run")])
    result.assert_one_line_error("symbolic link")
    result.assert_cheap()
    (tmp_path / "given.csv").symlink_to(kernel)  # a link given by name is not followed either
    one_line_error(invoke("prof", "analyze", tmp_path / "given.csv"), "symbolic link")
    assert invoke("prof", "analyze", kernel).exit_code == 0  # the file itself is read


def test_leak_analyze_refuses_a_link(tmp_path):
    real = tmp_path / "mem.jsonl"
    real.write_text("".join(json.dumps(memlog.make_record(step, "r", device="cpu", rss_bytes=1 << 30)) + "\n"
                            for step in range(20)))
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    one_line_error(invoke("leak", "analyze", link), "symbolic link")
    pagemap = tmp_path / "pagemap.jsonl"
    pagemap.symlink_to("/proc/self/pagemap")
    result = run_npudoctor(["leak", "analyze", str(pagemap)])
    result.assert_one_line_error("symbolic link")
    result.assert_cheap()
    assert invoke("leak", "analyze", real).exit_code == 0


def test_train_step_log_is_never_written_through_a_link(tmp_path):
    target = tmp_path / "victim.jsonl"
    link = tmp_path / "log.jsonl"
    link.symlink_to(target)  # dangling: the old writer created the target through it
    with pytest.raises(memlog.MemlogError, match="symbolic link"):
        memlog.MemlogWriter(link)
    assert not target.exists()


def test_check_textfile_in_a_linked_folder_writes_nothing(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    root = tmp_path / "root"
    root.mkdir()
    result = invoke("check", "--root", root, "--only", "PCI001", "--textfile", tmp_path / "link" / "npd.prom")
    one_line_error(result, "symbolic link")
    assert list(real.iterdir()) == []
    ok = invoke("check", "--root", root, "--only", "PCI001", "--textfile", real / "npd.prom")
    # an empty root: nothing was checked (exit 2), and the textfile still says what the run found
    assert ok.exit_code == 2 and (real / "npd.prom").read_text().startswith("#")
    assert [p.name for p in real.iterdir()] == ["npd.prom"]  # no temporary file left


def test_prof_run_output_that_is_a_link_is_refused(tmp_path):
    env = fake_env(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real)
    result = npudoctor(["prof", "run", "-o", "out", "--", "true"], env, tmp_path)
    assert result.returncode == 2 and "symbolic link" in result.stderr, result.stderr
    assert list(real.iterdir()) == []


# -- point 17: '' and '-' ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["check", "--textfile", ""], ["check", "--textfile", "-"], ["check", "--profile", ""], ["check", "--root", ""],
    ["check", "--from", ""], ["check", "--logs", ""], ["check", "--python", ""],
    ["collect", "-o", ""], ["collect", "-o", "-"],
    ["profile", "derive", "report.json", "-o", ""], ["profile", "derive", "report.json", "-o", "-"],
    ["profile", "derive", "", "-o", "x.yaml"],
    ["onboard", "--profile", "default", "-o", ""], ["onboard", "--profile", "default", "-o", "-"],
    ["onboard", "--profile", "default", "-o", "out", "--logs", ""],
    ["prof", "run", "-o", "", "--", "true"], ["prof", "run", "-o", "-", "--", "true"],
    ["prof", "analyze", ""], ["leak", "analyze", ""], ["leak", "analyze", "-"],
    ["train-step", "--log", ""], ["train-step", "--log", "-"], ["train-step", "--weights", ""],
    ["dashboard", "--follow", ""], ["fleet", ""], ["libs", ""], ["logs", "scan", ""],
])
def test_empty_and_dash_arguments_are_refused(tmp_path, args):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = invoke(*args, env=fake_env(tmp_path))
    finally:
        os.chdir(cwd)
    one_line_error(result, "''" if "" in args else "-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["bin", "template"])  # nothing written, no '-'


@pytest.mark.parametrize("command", [["collective"], ["onboard", "--profile", "default", "-o", "out"]])
def test_empty_sizes_are_refused(tmp_path, command):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = invoke(*command, "--sizes", "")
    finally:
        os.chdir(cwd)
    one_line_error(result, "--sizes")
    assert not (tmp_path / "out").exists()


def test_dash_still_means_stdin_where_a_stream_fits(tmp_path):
    assert invoke("logs", "scan", "-").exit_code == 0
    table = Path(profdirs.__file__).parent / "data" / "samples"
    sample = next(table.glob("npu-smi-info_8card*with-processes*.txt"))
    result = cli_runner().invoke(main, ["parse", "npu-smi", "-"], input=sample.read_text("utf-8"))
    assert result.exit_code == 0, result.output
