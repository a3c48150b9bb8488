"""The Textual app of ``npudoctor dashboard``. It only renders: the live layer (:mod:`npudoctor.live`) samples,
follows and judges; :mod:`npudoctor.tui.views` turns that into text. This is the only module importing textual.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, FrozenSet, List, Optional, Tuple

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.scrollbar import ScrollBarRender
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from npudoctor.live.devices import ReplaySampler, Snapshot
from npudoctor.live.history import History
from npudoctor.live.poller import Poller, PollState
from npudoctor.live.session import DashboardConfig
from npudoctor.report.symbols import STYLE
from npudoctor.tui import views
from npudoctor.untrusted import clean

TABS = ("devices", "history", "training", "findings")


def _plain(content: Any) -> Any:
    """What a widget shows, as data: a string is never read as markup (``[bold]`` in a process name prints as
    it is) and loses secrets and control characters (an OSC 52 in an npu-smi cell never reaches the
    terminal); a styled text that carries any keeps its base style only."""
    if isinstance(content, str):
        return Text(clean(content))
    if isinstance(content, Text):
        plain = content.plain
        cleaned = clean(plain)
        return content if cleaned == plain else Text(cleaned, style=content.style)
    return content


class PlainStatic(Static):
    """A Static that shows text as text (:func:`_plain`), whatever code updates it."""

    def __init__(self, content: Any = "", **kwargs: Any) -> None:
        super().__init__(_plain(content), markup=False, **kwargs)

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        super().update(_plain(content), layout=layout)


class WholeCellScrollBar(ScrollBarRender):
    """A scrollbar whose thumb is drawn in whole cells. Textual draws the thumb's ends as block glyphs (a
    vertical thumb's top as ``▅``, a horizontal one's end as ``▏``) on the track's colour; a terminal that
    loses that colour (tmux's 8-colour ``screen``, NO_COLOR) shows them as stray blocks beside the findings."""

    VERTICAL_BARS: ClassVar[List[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[List[str]] = [" "] * 8


def whole_cell_scrollbars(widget: Widget) -> None:
    # Per scrollbar, as textual documents it (its class attribute would change every app of the process).
    widget.vertical_scrollbar.renderer = WholeCellScrollBar  # type: ignore[misc]
    widget.horizontal_scrollbar.renderer = WholeCellScrollBar  # type: ignore[misc]


def _lines_text(lines: List[Tuple[str, str]]) -> Text:
    text = Text()
    for index, (line, style) in enumerate(lines):
        if index:
            text.append("\n")
        text.append(line, style=style or None)
    return text


class TextScreen(ModalScreen[None]):
    """A boxed, scrollable text over the dashboard (help, a finding's details); Esc closes it."""

    BINDINGS: ClassVar = [Binding("escape,q,question_mark,enter", "dismiss", "Close")]
    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > VerticalScroll { width: 78; height: auto; max-height: 22; border: round $accent;
                                  background: $panel; padding: 0 1; }
    """

    def __init__(self, text: Any, widget_id: str = "screen-text") -> None:
        super().__init__()
        self.text = text
        self.widget_id = widget_id

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield PlainStatic(self.text, id=self.widget_id)

    def on_mount(self) -> None:
        whole_cell_scrollbars(self.query_one(VerticalScroll))


class DeviceScreen(TextScreen):
    """The detail view of one chip; it follows the chip's readings while open."""

    def __init__(self, key: str) -> None:
        super().__init__("", "device-detail")
        self.key = key

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        app = self.app
        assert isinstance(app, DashboardApp)
        snapshot = app.last_snapshot
        device = next((d for d in snapshot.devices if d.key == self.key), None) if snapshot else None
        text = "\n".join(views.detail_lines(device, app.history)) if device else f"{self.key}: no reading now"
        self.query_one("#device-detail", Static).update(text)


class DashboardApp(App[None]):
    TITLE = "npudoctor dashboard"
    ENABLE_COMMAND_PALETTE = False  # every action has its key; the palette's ^p would only crowd the footer
    CSS = """
    #status { height: 1; background: $boost; }
    #devnote, #host, #check-status { height: auto; }
    DataTable { height: auto; max-height: 14; }
    #findings-table { max-height: 10; }
    TabPane { padding: 0 0; }
    """
    BINDINGS: ClassVar = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("r", "recheck", "Re-check"),
        Binding("1", "show_tab('devices')", "Devices", show=False),
        Binding("2", "show_tab('history')", "History", show=False),
        Binding("3", "show_tab('training')", "Training", show=False),
        Binding("4", "show_tab('findings')", "Findings", show=False),
        Binding("plus,equals_sign", "speed(2.0)", "Faster", show=False),
        Binding("minus", "speed(0.5)", "Slower", show=False),
        Binding("tab", "next_tab(1)", "Next panel", show=False, priority=True),
        Binding("shift+tab", "next_tab(-1)", "Previous panel", show=False, priority=True),
    ]

    def __init__(self, config: DashboardConfig, check_at_start: bool = True) -> None:
        super().__init__()
        self.config = config
        self.check_at_start = check_at_start
        self.poller = Poller(config.sampler, config.interval_s, clock=config.poll_clock)
        self.history = History()
        self.last_snapshot: Optional[Snapshot] = None
        self.follow: Any = None
        self.logtail: Any = None
        self.report: Any = None
        self.check_state = "not run" if config.check else "no check for this source"
        self._row_keys: List[str] = []
        self._logs_busy = False
        self.job_pids: FrozenSet[int] = frozenset()  # the followed job's processes (its memory log says)
        self._checked_pids: FrozenSet[int] = frozenset()  # ... as the newest check was given them

    # -- layout ------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield PlainStatic(id="status")
        with TabbedContent(initial="devices"):
            with TabPane("1 Devices", id="devices"):
                yield DataTable(id="device-table", cursor_type="row", zebra_stripes=True)
                yield PlainStatic(id="devnote")
                yield PlainStatic(id="host")
                yield PlainStatic(id="source-note")
            with TabPane("2 History", id="history"):
                yield PlainStatic(id="history-text")
            with TabPane("3 Training", id="training"):
                yield PlainStatic(id="training-text")
            with TabPane("4 Findings", id="findings"):
                yield PlainStatic(id="check-status")
                yield DataTable(id="findings-table", cursor_type="row")
                yield PlainStatic(id="log-findings")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#device-table", DataTable)
        for name, width in views.DEVICE_COLUMNS.items():
            table.add_column(name, key=name, width=width)
        findings = self.query_one("#findings-table", DataTable)
        for name in views.FINDING_COLUMNS:
            findings.add_column(name, key=name)
        for scrolling in (table, findings):
            whole_cell_scrollbars(scrolling)
        self.query_one("#source-note", Static).update(Text(self.config.note, style="dim"))
        if self.config.follow:
            from npudoctor.live.training import TrainingFollow

            self.follow = TrainingFollow(self.config.follow, clock=self.config.poll_clock)
        if self.config.logs_dir:
            from npudoctor.live.logtail import LogTail

            self.logtail = LogTail(self.config.logs_dir, clock=self.config.clock)
            self.logtail.start()
        else:
            self.query_one("#training-text", Static).update(
                "no training log followed: start with --follow FILE.jsonl (written by `npudoctor train-step "
                "--log FILE` or MemoryMonitor)")
        if not self.config.logs_dir:
            self.query_one("#log-findings", Static).update("no log folder tailed: start with --logs DIR")
        if self.config.start_polling:
            self.poller.start()
        self.set_interval(self.config.interval_s, self.tick)
        table.focus()
        if self.config.check is not None and self.check_at_start:
            self.action_recheck()
        self.tick()

    # -- the 1 Hz tick: read what the background work has, redraw what changed ------------------------------
    def _shown(self) -> bool:
        """False once the app shuts down: a last timer tick, or a worker's result, can arrive after the screen's
        widgets are gone (on a busy machine it did: NoMatches, no '#status')."""
        stack = self.screen_stack
        return bool(stack) and bool(stack[0].children)

    def tick(self) -> None:
        if not self._shown():
            return
        state = self.poller.state()
        self._show_status(state)
        snapshot = state.snapshot
        if snapshot is not None and snapshot is not self.last_snapshot:
            self.last_snapshot = snapshot
            self.history.add(snapshot)
            self._show_devices(snapshot)
            self.query_one("#history-text", Static).update("\n".join(views.history_lines(self.history)))
            if isinstance(self.screen, DeviceScreen):
                self.screen.show()
        elif snapshot is None:
            self.query_one("#devnote", Static).update(views.devices_note(None))
        if snapshot is not None:
            note: Any = views.devices_note(snapshot)
            if state.stale:
                note = Text(f"these readings are {state.age_s:.0f}s old: npu-smi has not answered since. ",
                            style="bold red") + Text(note)
            self.query_one("#devnote", Static).update(note)
        if self.follow is not None:
            view = self.follow.poll()
            self.query_one("#training-text", Static).update(_lines_text(views.training_lines(view)))
            self.job_pids = view.job_pids
            if self.check_state == "done" and self.job_pids != self._checked_pids:
                self.action_recheck()  # the job's own processes are no leftovers: SMI004 says so once it knows
        if self.logtail is not None and not self._logs_busy:
            # One scan at a time: a slow scan (a burst of log lines) is never overlapped by the next tick's.
            self._logs_busy = True
            self.poll_logs()

    def _show_status(self, state: PollState) -> None:
        text, style = views.age_text(state)
        status = Text(f" {self.config.title} · ", style="bold")
        status.append(text, style=style)
        source = state.snapshot.source if state.snapshot is not None else self.config.sampler.description
        status.append(f" · {source}")
        if state.failure:
            status.append(f" · sampler failed: {state.failure}", style="bold red")
        self.query_one("#status", Static).update(status)

    def _show_devices(self, snapshot: Snapshot) -> None:
        table = self.query_one("#device-table", DataTable)
        keys = [d.key for d in snapshot.devices]
        if keys != self._row_keys:
            table.clear()
            for device in snapshot.devices:
                table.add_row(*self._cells(device), key=device.key)
            self._row_keys = keys
        else:
            for device in snapshot.devices:
                for column, cell in zip(views.DEVICE_COLUMNS, self._cells(device)):
                    table.update_cell(device.key, column, cell)
        self.query_one("#host", Static).update(views.host_text(snapshot.host))

    @staticmethod
    def _cells(device: Any) -> List[Any]:
        cells: List[Any] = [_plain(cell) for cell in views.device_cells(device)]
        badge, style = views.health_badge(device.health)
        cells[1] = Text(badge, style=style)
        return cells

    # -- background work -------------------------------------------------------------------------------------
    @work(thread=True, group="logs")
    def poll_logs(self) -> None:
        try:
            findings = self.logtail.poll()
        except Exception as exc:  # an unreadable file or a scanner bug: say so, keep the dashboard running
            self.logtail.error = f"log scan failed: {exc.__class__.__name__}: {exc}"
            findings = []
        finally:
            self._logs_busy = False
        self.call_from_thread(self._show_log_findings, findings)

    def _show_log_findings(self, findings: List[Any]) -> None:
        if not self._shown():
            return
        head = f"logs under {self.config.logs_dir}: " + (
            self.logtail.error or f"{len(self.logtail.followers)} files followed, {len(findings)} causes")
        verdict = [(self.logtail.verdict, "bold")] if findings and self.logtail.verdict else []
        lines = [(head, "bold"), *verdict] + [views.log_finding_line(f) for f in findings[:8]]
        self.query_one("#log-findings", Static).update(_lines_text(lines))

    def action_recheck(self) -> None:
        if self.config.check is None:
            self.notify("no check for this source", severity="warning")
            return
        self.check_state, self._checked_pids = "running", self.job_pids
        self.query_one("#check-status", Static).update(Text("check: running in the background...", style="yellow"))
        self.run_check()

    @work(thread=True, exclusive=True, group="check")
    def run_check(self) -> None:
        started = time.monotonic()
        try:
            report = self.config.check(self._checked_pids) if self.config.check else None
            error = None
        except Exception as exc:  # a usage error (unreadable bundle) or a crash: show it, keep running
            report, error = None, f"{exc.__class__.__name__}: {exc}"
        self.call_from_thread(self._show_report, report, error, time.monotonic() - started)

    def _show_report(self, report: Any, error: Optional[str], took_s: float) -> None:
        if not self._shown():
            return
        status = self.query_one("#check-status", Static)
        if report is None:
            self.check_state = "failed"
            status.update(Text(f"check could not run: {error}", style="bold red"))
            return
        self.report, self.check_state = report, "done"
        status.update(Text(views.report_summary(report, took_s, self.config.clock()) + "  (r: run again)"))
        table = self.query_one("#findings-table", DataTable)
        table.clear()
        for finding, cells in zip(views.ordered_findings(report.findings), views.finding_rows(report.findings)):
            style = STYLE.get(finding.status, "")  # the house status styles, as `check` prints them
            table.add_row(Text(cells[0], style=style), *map(_plain, cells[1:]))

    # -- actions -------------------------------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_next_tab(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        at = TABS.index(tabs.active) if tabs.active in TABS else 0
        tabs.active = TABS[(at + step) % len(TABS)]

    def action_help(self) -> None:
        self.push_screen(TextScreen(views.HELP, "help-text"))

    def action_speed(self, factor: float) -> None:
        sampler = self.config.sampler
        if isinstance(sampler, ReplaySampler):
            sampler.set_speed(sampler.speed * factor)
            self.poller.poll_now()
            self.notify(f"replay speed x{sampler.speed:g}")
        else:
            self.notify("speed applies to --replay and --demo only", severity="warning")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "device-table" and event.row_key.value is not None:
            self.push_screen(DeviceScreen(str(event.row_key.value)))
        elif event.data_table.id == "findings-table" and self.report is not None:
            ordered = views.ordered_findings(self.report.findings)
            if 0 <= event.cursor_row < len(ordered):
                self.push_screen(TextScreen(views.finding_detail(ordered[event.cursor_row]), "finding-detail"))

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        # Keys go to the panel's table at once (Up/Down/Enter without a click first).
        target = {"devices": "#device-table", "findings": "#findings-table"}.get(event.pane.id or "")
        if target:
            self.query_one(target, DataTable).focus()

    def on_unmount(self) -> None:
        self.poller.stop()
        self.config.sampler.close()
