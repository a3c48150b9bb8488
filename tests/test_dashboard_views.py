"""The dashboard's view logic (plain functions, no textual) and its command line."""

from __future__ import annotations

import os

import pytest

from npudoctor.cli import main
from npudoctor.live.devices import DeviceReading, Holder, snapshot_from_npu_smi
from npudoctor.live.history import History
from npudoctor.live.poller import PollState
from npudoctor.live.session import SessionError, make_config
from npudoctor.live.training import TrainingView
from npudoctor.probes.sources import CommandResult
from npudoctor.tui import views
from npudoctor.workload.leak import analyze
from tests.clirunner import cli_runner
from tests.samples import sample_text

TABLE = sample_text("npu-smi-info_8card_23.0.rc3_with-processes_mindcluster-doc.txt")


def _device(**changes):
    fields = dict(key="npu:0/chip:0", label="NPU 0", name="910B3", health="OK", util_pct=93.0, mem_used_mib=51397,
                  mem_total_mib=65536, temp_c=52.0, power_w=334.3, bus_id="0000:C1:00.0",
                  holders=(Holder(120460, "python3.10", 48310),))
    fields.update(changes)
    return DeviceReading(**fields)


def test_device_row_cells_fit_their_columns():
    cells = views.device_cells(_device())
    assert cells == ("NPU 0", "OK", "93%", "████████░░ 50.2/64.0G", "52C", "334W", "120460 python3~")
    for cell, width in zip(cells, views.DEVICE_COLUMNS.values()):
        assert len(cell) <= width
    assert sum(views.DEVICE_COLUMNS.values()) + 2 * len(views.DEVICE_COLUMNS) <= 80


def test_missing_readings_show_as_unknown_not_as_zero():
    cells = views.device_cells(_device(util_pct=None, mem_used_mib=None, temp_c=None, power_w=None, holders=()))
    assert cells[2:] == ("?", "·········· ?/64.0G", "?", "?", "-")


def test_health_badges_say_what_npu_smi_said():
    assert [views.health_badge(h)[0] for h in ("OK", "Warning", "Alarm", "Critical", None)] == \
        ["OK", "WARN", "ALARM", "CRIT", "n/a"]


def test_devices_note_names_the_unhealthy_chips_and_the_no_device_reason():
    warning = TABLE.replace("| 3     xxx                | OK   ", "| 3     xxx                | Warning")
    snap = snapshot_from_npu_smi(CommandResult(("npu-smi", "info"), 0, warning), 0.0)
    assert views.devices_note(snap) == ("8 chips, 8 in use; NOT OK: NPU 3 Warning "
                                        "(details: npu-smi info -t health -i 3)")
    failed = snapshot_from_npu_smi(CommandResult(("npu-smi", "info"), None, error="timeout"), 0.0)
    assert views.devices_note(failed) == "no device readings: npu-smi info: timeout"


def test_age_text_marks_stale_data_with_its_age():
    assert views.age_text(PollState(None, None, 3.0, False, 0)) == ("waiting for the first reading (3s)", "yellow")
    assert views.age_text(PollState(None, 9.0, None, True, 4))[0] == "STALE: data 9s old"


def test_history_lines_fit_80_columns():
    history = History()
    for t in range(150):
        history.add(snapshot_from_npu_smi(CommandResult(("npu-smi", "info"), 0, TABLE), float(t)))
    lines = views.history_lines(history)
    assert len(lines) == 9 and all(len(line) <= 80 for line in lines)
    assert lines[1].startswith("NPU 0") and lines[1].endswith("94%")


def test_history_of_a_node_without_devices_shows_the_host():
    from npudoctor.live.devices import HostReading, Snapshot

    history = History()
    for t, cpu in enumerate((10.0, 50.0, 90.0)):
        history.add(Snapshot(float(t), "host", host=HostReading(cpu, 4096, 16384)))
    lines = views.history_lines(history)
    assert lines[1] == "(no device readings yet)"
    assert lines[-1].startswith("host") and lines[-1].endswith("▂▅▇  90%                       ▃▃▃  25%")
    assert all(len(line) <= 80 for line in lines)


def _records(slope: int, steps: int = 80):
    return [{"schema": "npudoctor.memlog/1", "run": "r", "step": s, "step_s": 0.3, "data_wait_s": 0.03,
             "loss": 1.0, "device": "npu:0", "allocated_bytes": (4 << 30) + s * slope,
             "reserved_bytes": 6 << 30, "device_total_bytes": 64 << 30, "time_unix_s": None} for s in range(steps)]


def _view(records):
    verdict = analyze(records)
    return TrainingView("mem.jsonl", "following", records[-1], len(records), 0.1, [0.3] * len(records),
                        [1.0] * len(records), [r["allocated_bytes"] for r in records],
                        [r["reserved_bytes"] for r in records], [None] * len(records), verdict,
                        records[-1]["step"])


def test_training_lines_show_the_step_and_the_leak_verdict():
    leaking = [text for text, _style in views.training_lines(_view(_records(32 << 20)))]
    assert leaking[1].startswith("step 79  step time 300 ms  data wait 10%  loss 1.0000")
    verdict_line = next(line for line in leaking if line.startswith("LEAK"))
    assert "+32.0 MiB/step" in verdict_line and "out of memory at step" in verdict_line
    # the dashboard says the leak verdict's confidence as `leak analyze` does (it said "100%" for >99.9%)
    assert "confidence >99.9%" in verdict_line and "confidence >99.9%" in _view(_records(32 << 20)).verdict.summary
    clean = [text for text, _style in views.training_lines(_view(_records(0)))]
    assert any(line.startswith("no leak") for line in clean)
    assert all(len(line) <= 80 for line in clean)


def test_detail_view_lists_holders_and_how_to_read_a_warning():
    lines = views.detail_lines(_device(health="Warning"), History())
    assert any("pid 120460" in line and "48310 MiB" in line for line in lines)
    assert lines[-1].startswith("why: npu-smi info -t health -i 0")


# -- the command line --------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--replay", "missing.tar.gz"], "missing.tar.gz: no such file"),
    (["--demo", "--replay", "x.tar.gz"], "--replay and --demo cannot be used together"),
    (["--demo", "--follow", "/dev/null"], "--follow /dev/null: not a regular file"),
    (["--demo", "--follow", "/no/such/dir/mem.jsonl"], "no such directory"),
    (["--demo", "--logs", "/no/such/dir"], "--logs /no/such/dir: not a directory"),
])
def test_bad_dashboard_options_give_one_line_errors(args, message):
    result = cli_runner().invoke(main, ["dashboard", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith("npudoctor: error: ") and message in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_a_followed_log_may_not_exist_yet(tmp_path):
    config = make_config(demo=True, follow=str(tmp_path / "later.jsonl"), run_check=False)
    assert config.follow and config.check is None and "demo" in config.note


def test_session_without_a_device_tool_samples_the_host(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    config = make_config(run_check=False)
    snap = config.sampler.sample()
    if os.path.exists("/usr/local/sbin/npu-smi") or os.path.exists("/usr/local/bin/npu-smi"):
        pytest.skip("this machine has npu-smi")
    assert snap.kind == "host" and snap.host is not None and snap.host.mem_total_mib
    with pytest.raises(SessionError):
        make_config(replay=str(tmp_path / "nothing.tar.gz"))


def test_without_textual_the_dashboard_says_which_extra_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "textual", None)  # `import textual` now raises ImportError
    import npudoctor.tui

    for name in [m for m in sys.modules if m.startswith(("npudoctor.tui.app", "textual."))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(npudoctor.tui, "app", raising=False)
    result = cli_runner().invoke(main, ["dashboard", "--demo"])
    assert result.exit_code == 2 and "npudoctor dashboard needs textual" in result.stderr
    assert "textual comes with npudoctor itself: reinstall it (pip install -e '" in result.stderr
    assert len(result.stderr.splitlines()) == 1
