"""`npudoctor dashboard` driven by Textual's Pilot at 80x24: keys, panels, a chip turning Warning, a leak in a
followed log, a stalled npu-smi; and SVG snapshots of deterministic screens (fixed clocks, no host readings).

Regenerate the snapshots after an intended change:
`NPUDOCTOR_REGEN_GOLDEN=1 python -m pytest tests/test_dashboard_app.py`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from pathlib import Path

import pytest

pytest.importorskip("textual")

from npudoctor.live.devices import Sampler, snapshot_from_npu_smi
from npudoctor.live.session import DashboardConfig
from npudoctor.probes.sources import CommandResult
from npudoctor.tui.app import DashboardApp, TextScreen
from tests.samples import DATA, sample_text

GOLDEN = DATA / "golden" / "dashboard"
TABLE = sample_text("npu-smi-info_8card_23.0.rc3_with-processes_mindcluster-doc.txt")


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class ScriptedSampler(Sampler):
    """npu-smi answers the test hands out one by one; ``hang`` makes the next poll block like a stuck npu-smi."""

    description = "scripted npu-smi"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.text = TABLE
        self.hang = threading.Event()
        self.release = threading.Event()

    def sample(self):
        if self.hang.is_set():
            self.release.wait(10)
        return snapshot_from_npu_smi(CommandResult(("npu-smi", "info"), 0, self.text, "", 4.2), self.clock(),
                                     source="npu-smi 23.0.rc3 (4.2s)")


def make_app(tmp_path=None, follow=None, check=None, logs_dir=None):
    clock = Clock()
    sampler = ScriptedSampler(clock)
    config = DashboardConfig(sampler=sampler, interval_s=1.0, follow=follow, check=check, logs_dir=logs_dir,
                             clock=lambda: 1e9,
                             poll_clock=clock, start_polling=False)
    app = DashboardApp(config, check_at_start=False)
    app.animation_level = "none"  # the tab underline's slide only costs test time
    return app, sampler, clock


async def poll(app, pilot):
    app.poller.poll_once()
    app.tick()
    await pilot.pause()


def text_of(app, selector: str) -> str:
    return str(app.query_one(selector).content)


def run(coro):
    asyncio.run(coro)


def test_devices_panel_shows_every_chip_and_a_chip_turning_warning():
    async def scenario():
        app, sampler, clock = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await poll(app, pilot)
            table = app.query_one("#device-table")
            assert table.row_count == 8
            assert str(table.get_cell("npu:3/chip:0", "Health")) == "OK"
            assert str(table.get_cell("npu:3/chip:0", "Held by")) == "139372 python"
            sampler.text = TABLE.replace("| 3     xxx                | OK   ", "| 3     xxx                | Warning")
            clock.t += 1
            await poll(app, pilot)
            assert str(table.get_cell("npu:3/chip:0", "Health")) == "WARN"
            assert "NOT OK: NPU 3 Warning" in text_of(app, "#devnote")
    run(scenario())


def test_keys_switch_panels_open_help_and_details_and_q_quits():
    async def scenario():
        app, _sampler, _clock = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await poll(app, pilot)
            tabs = app.query_one("TabbedContent")
            for key, panel in (("2", "history"), ("3", "training"), ("4", "findings"), ("1", "devices")):
                await pilot.press(key)
                assert tabs.active == panel
            await pilot.press("tab")
            assert tabs.active == "history"
            await pilot.press("shift+tab", "question_mark")
            assert "Devices, History, Training, Findings" in text_of(app.screen, "#help-text")
            await pilot.press("escape", "down", "down", "enter")
            assert "NPU 2" in text_of(app.screen, "#device-detail")
            assert "pid 139446" in text_of(app.screen, "#device-detail")
            await pilot.press("escape", "2")
            assert "NPU 7" in text_of(app, "#history-text")
            await pilot.press("q")
        assert app.return_code == 0
    run(scenario())


def test_a_stalled_npu_smi_is_marked_stale_and_the_ui_keeps_answering():
    async def scenario():
        app, sampler, clock = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await poll(app, pilot)
            assert "updated 0s ago" in text_of(app, "#status")
            sampler.hang.set()
            stuck = threading.Thread(target=app.poller.poll_once, daemon=True)
            stuck.start()
            clock.t += 30
            app.tick()
            await pilot.press("2")  # keys still work while npu-smi hangs
            assert app.query_one("TabbedContent").active == "history"
            status = text_of(app, "#status")
            assert "STALE: data 30s old, npu-smi running for 30s" in status
            assert text_of(app, "#devnote").startswith("these readings are 30s old")
            sampler.hang.clear()
            sampler.release.set()
            stuck.join(5)
            app.tick()
            assert "STALE" not in text_of(app, "#status")
    run(scenario())


def _record(step: int, allocated: int) -> str:
    return json.dumps({"schema": "npudoctor.memlog/1", "run": "r", "step": step, "step_s": 0.25,
                       "data_wait_s": 0.05, "loss": 3.0 - step / 100, "device": "npu:0", "allocated_bytes": allocated,
                       "reserved_bytes": allocated + (256 << 20), "device_total_bytes": 64 << 30}) + "\n"


def test_a_leak_appears_in_a_followed_training_log(tmp_path):
    log = tmp_path / "mem.jsonl"

    async def scenario():
        app, _sampler, clock = make_app(follow=str(log))
        async with app.run_test(size=(80, 24)) as pilot:
            await poll(app, pilot)
            await pilot.press("3")
            assert "waiting for the file" in text_of(app, "#training-text")
            log.write_text("".join(_record(s, 8 << 30) for s in range(30)))
            clock.t += 5
            await poll(app, pilot)
            training = text_of(app, "#training-text")
            assert "step 29" in training and "data wait 20%" in training and "no leak" in training
            with open(log, "a") as handle:
                handle.write("".join(_record(s, (8 << 30) + (s - 29) * (64 << 20)) for s in range(30, 100)))
            clock.t += 5
            await poll(app, pilot)
            training = text_of(app, "#training-text")
            assert "LEAK (device): +64.0 MiB/step" in training and "out of memory at step" in training
    run(scenario())


def test_findings_run_the_check_in_a_worker_and_r_runs_it_again():
    from npudoctor import api
    from npudoctor.live.recording import DEMO_BUNDLE

    calls = []

    def check(job_pids=frozenset()):
        calls.append(1)
        return api.run_checks(api.make_runner(bundle=str(DEMO_BUNDLE)), only=("npu-smi",))

    async def scenario():
        app, _sampler, _clock = make_app(check=check)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4", "r")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert "check at" in text_of(app, "#check-status")
            table = app.query_one("#findings-table")
            assert str(table.get_cell_at((0, 0))) == "WARN"  # worst first: NPU 5 is in Warning
            await pilot.press("enter")
            assert "npudoctor explain" in text_of(app.screen, "#finding-detail")
            await pilot.press("escape", "r")
            await app.workers.wait_for_complete()
        assert len(calls) == 2
    run(scenario())


def test_the_followed_jobs_own_processes_are_the_followed_job_not_smi004_warnings(tmp_path):
    """Issue 28: while following a training job, the chips its ranks hold are not "another process holds the
    NPU": the memory log names the job's pids (memlog ``pids``) and SMI004 passes those, warns for the rest."""
    from npudoctor.live.session import make_config

    log = tmp_path / "mem.jsonl"
    config = make_config(demo=True, follow=str(log))  # the demo: 8 ranks of python3.10, pids 120460...121097
    config.start_polling = False
    job = [120460, 120551, 120642, 120733, 120824, 120915, 121006]  # 121097 (NPU 7) is not the job's

    def rows(app):
        table = app.query_one("#findings-table")
        return [" ".join(map(str, table.get_row_at(row))) for row in range(table.row_count)]

    async def scenario():
        app = DashboardApp(config)
        app.animation_level = "none"
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert sum(row.startswith("WARN SMI004") for row in rows(app)) == 8
            record = json.loads(_record(0, 8 << 30))
            log.write_text(json.dumps({**record, "schema": "npudoctor.memlog/2", "pids": job}) + "\n")
            app.tick()  # reads the log, learns the job's pids and runs the check again with them
            await app.workers.wait_for_complete()
            await pilot.pause()
            shown = rows(app)
            assert [row for row in shown if row.startswith("WARN SMI004")] == [
                "WARN SMI004 npu:7/chip:0 pid 121097 python3.10, 54610 MiB device memory"]
            followed = [row for row in shown if "the followed job: pid 12" in row]
            assert len(followed) == 7 and all(row.startswith("PASS SMI004") for row in followed)
            app.tick()  # the pids did not change: no check again
            assert app.check_state == "done"
    run(scenario())


def test_findings_after_history_show_no_stray_block_glyphs_at_80x24():
    """Issue 28: the glyphs seen in Findings under tmux were the table's scrollbar thumbs: a vertical thumb's end
    drawn as a block glyph and a horizontal scrollbar for details wider than the screen, on a track a terminal
    with fewer colours does not draw. Rows now fit the width (cut with ~) and thumbs are whole cells."""
    from textual.scrollbar import ScrollBarRender

    from npudoctor.live.session import make_config

    config = make_config(demo=True)  # 19 findings: more than the table shows, some wider than 80 columns
    config.start_polling = False
    thumb_ends = set(ScrollBarRender.VERTICAL_BARS + ScrollBarRender.HORIZONTAL_BARS) - {" "}

    async def scenario():
        app = DashboardApp(config)
        app.animation_level = "none"
        async with app.run_test(size=(80, 24)) as pilot:
            await app.workers.wait_for_complete()
            await poll(app, pilot)
            await pilot.press("2", "4")
            await pilot.pause()
            table = app.query_one("#findings-table")
            assert table.row_count == 19 and table.max_scroll_y > 0  # it scrolls: a vertical scrollbar shows
            assert table.max_scroll_x == 0  # every row fits: no horizontal scrollbar
            (skipped,) = [table.get_row_at(row) for row in range(19) if str(table.get_row_at(row)[1]) == "SMI003"]
            assert str(skipped[3]).endswith("~")  # its long detail, cut and said so (Enter shows it whole)
            svg = app.export_screenshot()
            assert not thumb_ends & set(svg), sorted(thumb_ends & set(svg))
    run(scenario())


def test_the_tick_redraws_while_a_detail_or_help_screen_is_open():
    # Under load a 1 Hz tick came as the app shut down, after its widgets were gone (NoMatches: no '#status'):
    # the tick is called here while each screen is open and after the app ends, instead of hoping it falls there.
    from npudoctor import api
    from npudoctor.live.recording import DEMO_BUNDLE

    def check(job_pids=frozenset()):
        return api.run_checks(api.make_runner(bundle=str(DEMO_BUNDLE)), only=("npu-smi",))

    async def scenario():
        app, _sampler, _clock = make_app(check=check)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4", "r")
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("enter")
            assert "npudoctor explain" in text_of(app.screen, "#finding-detail")
            await poll(app, pilot)  # the tick, with the detail screen on top
            app.action_recheck()  # and a check finishing behind it
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert "npudoctor explain" in text_of(app.screen, "#finding-detail")
            await pilot.press("escape", "question_mark")
            await poll(app, pilot)
            assert isinstance(app.screen, TextScreen)  # the help screen, with the tick done behind it
            assert "updated" in str(app.screen_stack[0].query_one("#status").content)
        # a last tick and a last check result after the app has shut down (the widgets are gone) change nothing
        app.tick()
        app._show_report(None, "late", 0.0)
        app._show_log_findings([])
    run(scenario())


def test_new_log_findings_appear_while_tailing_a_log_folder(tmp_path):
    plog = tmp_path / "run" / "plog" / "plog-4242_20250101000000000.log"
    plog.parent.mkdir(parents=True)
    plog.write_text("")

    async def scenario():
        app, _sampler, _clock = make_app(logs_dir=str(tmp_path))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4")
            await poll(app, pilot)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert "1 files followed, 0 causes" in text_of(app, "#log-findings")
            plog.write_text(sample_text("hccl_EI0006_socket-establish-timeout_LINK_ERROR_INFO_hccl-doc.txt"))
            await poll(app, pilot)
            await app.workers.wait_for_complete()
            await pilot.pause()
            found = text_of(app, "#log-findings")
            assert "1 files followed, 5 causes" in found
            assert re.search(r"\d\d:\d\d:\d\d ERROR   HCCL socket setup between ranks timed out \[socket setup\] x1",
                             found)
    run(scenario())


def _normalised_svg(svg: str) -> str:
    # Textual names the SVG's CSS classes after a hash of the terminal; the drawing is what is compared.
    return re.sub(r"terminal-\d+", "terminal", svg)


@pytest.mark.parametrize("panel", ["devices", "history"])
def test_svg_snapshots_of_deterministic_screens(panel):
    async def scenario():
        app, sampler, clock = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            for step in range(6):
                sampler.text = TABLE.replace("| 0           4565", f"| {step * 18:<11} 4565")
                clock.t += 1
                await poll(app, pilot)
            await pilot.press({"devices": "1", "history": "2"}[panel])
            await pilot.pause()
            svg = _normalised_svg(app.export_screenshot(title="npudoctor dashboard"))
        path = GOLDEN / f"{panel}.svg"
        if os.environ.get("NPUDOCTOR_REGEN_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(svg, encoding="utf-8")
        assert path.exists(), f"{path} missing: run with NPUDOCTOR_REGEN_GOLDEN=1 once"
        assert svg == Path(path).read_text(encoding="utf-8")
    run(scenario())
