"""Progress for long work: one spinner line on stderr that names what the command waits for, with elapsed time.

The house style for every command (check, collect, libs, logs scan, prof, train-step, onboard):

- progress goes to **stderr** and only when stderr is a terminal; pipes, files, CI logs, ``--format json`` and
  ``--format junit`` never see it, so machine output stays byte-identical;
- it names the thing being waited for (``SMI001 npu-smi available and runs``, ``reading plog 3/12``) and the
  seconds spent on it; nothing is drawn for work that ends within ``delay_s`` (no flicker on fast runs);
- results written to stdout while the spinner runs go through :meth:`Progress.hidden`, which erases the
  spinner line first and lets the next tick redraw it below the new output.

Use::

    from npudoctor.report.progress import Progress

    with Progress() as progress:            # enabled only when stderr is a TTY (enabled=False forces it off)
        for item in items:
            progress.update(f"reading {item}", detail="12 MiB/s")
            result = work(item)
            with progress.hidden():
                print_result(result)         # stdout, printed between spinner frames
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager, suppress
from typing import IO, Any, Iterator, Optional, Sequence

from npudoctor.report import terminal

UNICODE_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
ASCII_FRAMES = "|/-\\"


def progress_wanted(stream: Optional[IO[str]] = None) -> bool:
    """Progress only for people: stderr is a terminal, ``TERM`` is not ``dumb``, and it was not turned off
    (``NPUDOCTOR_PROGRESS=0``)."""
    stream = stream or sys.stderr
    if os.environ.get("NPUDOCTOR_PROGRESS", "") == "0" or os.environ.get("TERM") == "dumb":
        return False
    return terminal.is_terminal(stream)


class Progress:
    """A spinner line on ``stream`` (stderr) redrawn by a background thread; a no-op when not enabled."""

    def __init__(self, stream: Optional[IO[str]] = None, enabled: Optional[bool] = None,
                 delay_s: float = 0.3, interval_s: float = 0.1) -> None:
        self.stream = stream or sys.stderr
        self.enabled = progress_wanted(self.stream) if enabled is None else enabled
        self.delay_s = delay_s
        self.interval_s = interval_s
        self.frames = UNICODE_FRAMES if terminal.can_encode(UNICODE_FRAMES, self.stream) else ASCII_FRAMES
        self._label = ""
        self._detail = ""
        self._since = time.monotonic()
        self._drawn = False
        self._thread: Any = None
        if self.enabled:  # threading only for people at a terminal (`npudoctor libs` start-up counts)
            import threading

            self._lock: Any = threading.Lock()
            self._stop = threading.Event()

    def __enter__(self) -> Progress:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.enabled and self._thread is None:
            import threading

            self._since = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="npudoctor-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the spinner and erase its line."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        with self._lock:
            self._erase()

    def update(self, label: str, detail: str = "") -> None:
        """Now waiting for ``label`` (the elapsed time restarts); ``detail`` is extra text such as a rate."""
        if not self.enabled:
            return
        with self._lock:
            if label != self._label:
                self._erase()  # the last label's line must not stay up while the next one is quick
                self._since = time.monotonic()
            self._label = label
            self._detail = detail

    @contextmanager
    def hidden(self) -> Iterator[None]:
        """Write to stdout inside this block: the spinner line is erased first and not redrawn meanwhile."""
        if not self.enabled:
            yield
            return
        with self._lock:
            self._erase()
            yield
            with suppress(OSError, ValueError):
                sys.stdout.flush()

    def line(self, now: Optional[float] = None) -> str:
        """The spinner line as it is drawn now (without the frame), fitted to the terminal's width."""
        elapsed = (time.monotonic() if now is None else now) - self._since
        text = f"{self._label}{'  ' + self._detail if self._detail else ''}  {elapsed:.1f}s"
        room = terminal.width(self.stream) - 3
        if len(text) > room:
            text = text[:max(room - 1, 0)] + ("…" if terminal.can_encode("…", self.stream) else ".")
        return text

    def _run(self) -> None:
        frame = 0
        while not self._stop.wait(self.interval_s):
            with self._lock:
                if not self._label or time.monotonic() - self._since < self.delay_s:
                    continue
                self._write(f"\r{self.frames[frame % len(self.frames)]} {self.line()}\x1b[K")
                self._drawn = True
            frame += 1

    def _erase(self) -> None:
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is decoration, never a failure
            self.enabled = False


def describe_command(argv: Sequence[str]) -> str:
    """A command as a spinner names it: ``npu-smi info``, ``python3 -c …`` (never a whole script)."""
    if not argv:
        return ""
    shown = [os.path.basename(argv[0])]
    for arg in argv[1:3]:
        shown.append("…" if "\n" in arg or len(arg) > 40 else arg)
        if shown[-1] == "…":
            break
    return " ".join(shown)


class ProgressListener:
    """A run listener (``api.run_checks(listener=...)``) that names the running check, and the command it
    waits for, on a spinner."""

    def __init__(self, progress: Progress, verb: str = "") -> None:
        self.progress = progress
        self.verb = verb
        self._check = ""

    def started(self, report: Any) -> None:
        pass

    def checking(self, spec: Any) -> None:
        self._check = f"{self.verb}{spec.id} {spec.title}"
        self.progress.update(self._check)

    def running(self, argv: Sequence[str]) -> None:
        self.progress.update(f"{self._check}: waiting for {describe_command(argv)}")

    def stage_done(self, stage: str, findings: Any) -> None:
        pass

    def sampling(self, index: int, count: int) -> None:
        """``collect --samples N``: sample ``index + 1`` of ``count`` is being taken."""
        self.progress.update(f"{self.verb}npu-smi info over time", detail=f"sample {index + 1}/{count}")
