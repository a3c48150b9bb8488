"""`npudoctor parse npu-smi FILE|-`: what operators run on output pasted from another node."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from npudoctor.cli import main
from tests.clirunner import cli_runner
from tests.nodes import B3_8CARD
from tests.samples import sample_path, sample_text, smi

CHIP_KEYS = ["npu_id", "chip_id", "name", "health", "bus_id", "power_w", "temp_c", "aicore_pct",
             "memory_used_mib", "memory_total_mib", "hbm_used_mib", "hbm_total_mib"]


def invoke(args, stdin=None):
    return cli_runner().invoke(main, args, input=stdin)


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_parse_is_a_registered_subcommand():
    result = invoke(["--help"])
    assert result.exit_code == 0 and "parse" in result.stdout


def test_json_has_the_documented_shape(tmp_path):
    path = write(tmp_path, "a3.txt", smi("A3_Ascend910").encode())
    result = invoke(["parse", "npu-smi", "--format", "json", path])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data) == ["version", "chips", "processes"]
    assert data["version"] == {"tool": "25.2.1", "driver": "25.2.1"}
    assert len(data["chips"]) == 16 and list(data["chips"][0]) == CHIP_KEYS
    assert data["chips"][1]["power_w"] is None and data["chips"][1]["chip_id"] == 1
    assert data["processes"] == []


def test_json_processes_and_nulls_for_missing_columns(tmp_path):
    path = write(tmp_path, "duo.txt", smi("910B2C").encode())
    data = json.loads(invoke(["parse", "npu-smi", "--format", "json", path]).stdout)
    assert data["processes"] == [
        {"npu_id": 0, "chip_id": 0, "pid": 124528, "name": "python3.8", "memory_mib": 17400}]
    assert data["chips"][0]["hbm_used_mib"] == 20701
    soc = write(tmp_path, "soc.txt", smi("310B4_Alarm").encode())
    (chip,) = json.loads(invoke(["parse", "npu-smi", "--format", "json", soc]).stdout)["chips"]
    assert chip["bus_id"] is None and chip["hbm_total_mib"] is None and chip["health"] == "Alarm"


def test_text_table_from_stdin_with_sample_header_as_noise():
    # The sample file as stored (with its '# source:' header) is also a paste with noise before the table.
    result = invoke(["parse", "npu-smi", "-"], stdin=sample_path(B3_8CARD).read_text("utf-8"))
    assert result.exit_code == 0
    assert "910B3" in result.stdout and "0000:C1:00.0" in result.stdout and "3397 / 65536" in result.stdout
    assert "24.1.0.3" in result.stdout and "no running processes" in result.stdout


def test_partial_table_parses_with_a_note_on_stderr(tmp_path):
    path = write(tmp_path, "p.txt", smi("partial-ellipsis").encode())
    result = invoke(["parse", "npu-smi", "--format", "json", path])
    assert result.exit_code == 0 and "note: partial table" in result.stderr
    assert [c["npu_id"] for c in json.loads(result.stdout)["chips"]] == [7]


def test_gb18030_paste_with_a_table_still_parses(tmp_path):
    text = "在容器内执行 npu-smi info 的输出:\n" + sample_text(B3_8CARD)
    path = write(tmp_path, "gbk.txt", text.encode("gb18030"))
    result = invoke(["parse", "npu-smi", "--format", "json", path])
    assert result.exit_code == 0 and len(json.loads(result.stdout)["chips"]) == 8


@pytest.mark.parametrize("data, message", [
    (b"\x7fELF\x02\x01\x01\x00\x00\x00binary", "binary data"),
    ("华为昇腾 NPU 巡检报告：一切正常\n".encode("gbk"), "not an npu-smi info table"),
    (b"", "empty input"),
    (b"name: x\nfoo: bar\n", "nor `npu-smi info -m` or `-t ...` output"),  # YAML is no `-t` report
    ("\n".join(sample_text(B3_8CARD).splitlines()[:6]).encode(), "no chip row (truncated?)"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, data, message):
    result = invoke(["parse", "npu-smi", write(tmp_path, "bad.txt", data)])
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_dcmi_failure_is_explained_as_check_does(tmp_path):
    """A pasted npu-smi failure is npu-smi output: explained (meaning, cause, fix as SMI001 says), exit 1."""
    from npudoctor.checks.npu_smi import explain_failure
    from npudoctor.parsers.npu_smi import recognise_failure

    text = smi("dcmi-8020_device")
    result = invoke(["parse", "npu-smi", write(tmp_path, "bad.txt", text.encode())])
    assert result.exit_code == 1 and result.stderr == ""
    assert "npu-smi failed: dcmi model initialized failed, because the device is used. ret is -8020" in " ".join(
        result.stdout.split())
    explained = explain_failure(recognise_failure(text))
    flat = " ".join(result.stdout.split())
    for label in ("meaning", "cause", "fix"):
        assert f"{label}: " + " ".join(explained[label].split())[:40] in flat
    assert "1  the text is npu-smi failing" in invoke(["parse", "npu-smi", "--help"]).stdout


def test_wide_table_is_stacked_on_a_narrow_terminal(tmp_path, monkeypatch):
    path = write(tmp_path, "t.txt", sample_text(B3_8CARD).encode())
    monkeypatch.setenv("COLUMNS", "80")
    narrow = invoke(["parse", "npu-smi", path]).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "NPU 3 chip 0  910B3  OK" in narrow and "HBM(MiB) 3393 / 65536" in narrow
    monkeypatch.setenv("COLUMNS", "160")
    wide = invoke(["parse", "npu-smi", path]).stdout
    assert "┃ NPU ┃" in wide and "NPU 3 chip 0" not in wide


def test_closed_stdout_exits_quietly(tmp_path):
    path = write(tmp_path, "t.txt", sample_text(B3_8CARD).encode())
    read, write_end = os.pipe()
    os.close(read)
    proc = subprocess.run([sys.executable, "-m", "npudoctor", "parse", "npu-smi", path], stdout=write_end,
                          stderr=subprocess.PIPE, timeout=60)
    os.close(write_end)
    assert proc.returncode == 0 and proc.stderr == b""


def test_oversize_and_missing_files_exit_2(tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as handle:
        handle.truncate(16 * 1024 * 1024 + 1)  # sparse: fast to make
    result = invoke(["parse", "npu-smi", str(huge)])
    assert result.exit_code == 2 and "larger than 16 MiB" in result.stderr
    result = invoke(["parse", "npu-smi", str(tmp_path / "absent.txt")])
    assert result.exit_code == 2 and "cannot read" in result.stderr and result.stderr.count("\n") == 1


def test_sub_command_reports_and_chip_ids_are_read(tmp_path):
    """Issue 30: `-t board` (real fixture), `-m` (real fixture) and a health report with its alarm explained."""
    board = invoke(["parse", "npu-smi", "--format", "json", write(tmp_path, "b.txt", smi("t-board_card").encode())])
    assert board.exit_code == 0
    (block,) = json.loads(board.stdout)["blocks"]
    assert block["npu_id"] == 0 and block["fields"]["Firmware Version"] == "7.1.0.7.220" and block["alarms"] == []
    ids = invoke(["parse", "npu-smi", write(tmp_path, "m.txt", smi("-m_910B4").encode())])
    assert ids.exit_code == 0 and ids.stdout.splitlines()[2].split() == ["0", "1", "-", "Mcu"]
    health = invoke(["parse", "npu-smi", write(tmp_path, "h.txt", smi("80E01801_Alarm").encode())])
    assert health.exit_code == 0
    assert "alarm 80E01801: HBM multi-bit ECC error (uncorrectable, UCE) -> restart the" in health.stdout
