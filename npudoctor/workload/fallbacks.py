"""CPU-fallback warnings a training run prints, counted per operator while it trains (torch-free).

torch_npu prints ``Warning: CAUTION: The operator 'aten::isin.Tensor_Tensor_out' is not currently supported on
the NPU backend and will fall back to run on the CPU`` from C++ (``npu_cpu_fallback``, straight to stderr) or, in
a Python call, as a Python warning. :class:`FallbackWatch` sees both: it wraps ``warnings.showwarning`` and, when
asked, tees file descriptor 2 through a pipe (every byte still reaches the original stderr). Lines are judged
by the log doctor's own rule (``checks/log_rules.yaml``, kind ``cpu_fallback``), so the text is parsed once,
in one place. Each operator gets the step it was first seen at and how often it was seen (torch_npu warns once
per operator and process unless told otherwise, so a count of 1 says "seen", not "called once").
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from typing import Any, Dict, List, Optional, Pattern, Tuple

MAX_OPERATORS = 64  # distinct operators kept (a run with more is broken in other ways)
_MAX_LINE = 4096


def _fallback_rules() -> List[Tuple[Tuple[str, ...], Pattern[str]]]:
    from npudoctor.logs.rules import default_rules

    return [(rule.hints, rule.pattern) for rule in default_rules().rules if rule.kind == "cpu_fallback"]


class FallbackWatch:
    """Counts CPU-fallback warnings per operator; :meth:`changed` gives the table when it changed."""

    def __init__(self, capture_stderr: bool = True) -> None:
        self.capture_stderr = capture_stderr
        self.step = 0
        self.ops: Dict[str, Dict[str, int]] = {}   # op -> {"first_step", "count"}
        self._rules = _fallback_rules()
        self._lock = threading.Lock()
        self._dirty = False
        self._saved_showwarning: Any = None
        self._saved_fd: Optional[int] = None
        self._thread: Optional[threading.Thread] = None
        self._read_fd: Optional[int] = None
        self._pump_lock = threading.Lock()
        self._pending = b""
        self._echoes: List[str] = []

    # --- what is fed ------------------------------------------------------------------------------------------
    def feed(self, text: str) -> None:
        """Judge each line of ``text``; a CPU-fallback warning counts its operator."""
        for line in text.splitlines():
            line = line[:_MAX_LINE]
            for hints, pattern in self._rules:
                if not any(hint in line for hint in hints):
                    continue
                match = pattern.search(line)
                if match and match.groupdict().get("subject"):
                    self._count(match.group("subject"))
                    break

    def _count(self, op: str) -> None:
        with self._lock:
            entry = self.ops.get(op)
            if entry is None:
                if len(self.ops) >= MAX_OPERATORS:
                    return
                entry = self.ops[op] = {"first_step": self.step, "count": 0}
            entry["count"] += 1
            self._dirty = True

    def changed(self) -> Optional[List[Dict[str, Any]]]:
        """The whole table (``[{"op", "first_step", "count"}]``) when it changed since the last call, else None."""
        with self._lock:
            if not self._dirty:
                return None
            self._dirty = False
            return self.table_locked()

    def table(self) -> List[Dict[str, Any]]:
        with self._lock:
            return self.table_locked()

    def table_locked(self) -> List[Dict[str, Any]]:
        return [{"op": op, **entry} for op, entry in sorted(self.ops.items(), key=lambda i: (i[1]["first_step"], i[0]))]

    # --- where it comes from ----------------------------------------------------------------------------------
    def set_step(self, step: int) -> None:
        """The step now starting; what stderr got before it is counted under the step before."""
        self.drain()
        self.step = step

    def start(self) -> FallbackWatch:
        self._saved_showwarning = warnings.showwarning

        def showwarning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                        line: Optional[str] = None) -> None:
            with contextlib.suppress(Exception):
                text = str(message)
                self.feed(text)
                if self._saved_fd is not None:  # printed to stderr next: not counted twice
                    self._echoes.append(text[:200])
            self._saved_showwarning(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning
        if self.capture_stderr:
            self._tee_stderr()
        return self

    def _tee_stderr(self) -> None:
        try:
            read_end, write_end = os.pipe()
            os.set_blocking(read_end, False)
            saved = os.dup(2)
            os.dup2(write_end, 2)
            os.close(write_end)
        except OSError:
            return  # no stderr to tee (a daemon): Python warnings are still seen
        self._saved_fd, self._read_fd = saved, read_end
        self._thread = threading.Thread(target=self._pump, name="npudoctor-fallback-watch", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        import select

        while self._read_fd is not None:
            with contextlib.suppress(OSError, ValueError):
                select.select([self._read_fd], [], [], 0.2)
            if not self.drain():
                break

    def drain(self) -> bool:
        """Pass on and judge what stderr holds now; False once the pipe is closed."""
        with self._pump_lock:
            fd = self._read_fd
            if fd is None:
                return False
            while True:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    return True
                except OSError:
                    data = b""
                if not data:
                    os.close(fd)
                    self._read_fd = None
                    return False
                if self._saved_fd is not None:
                    with contextlib.suppress(OSError):
                        os.write(self._saved_fd, data)  # the user's stderr first: nothing is held back
                with contextlib.suppress(Exception):
                    self._feed_bytes(data)

    def _feed_bytes(self, data: bytes) -> None:
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        if len(self._pending) > _MAX_LINE:
            self._pending = self._pending[-_MAX_LINE:]
        for raw in lines:
            line = raw.decode("utf-8", errors="replace")
            echo = next((e for e in self._echoes if e and e in line), None)
            if echo is not None:
                self._echoes.remove(echo)
                continue
            self.feed(line)

    def stop(self) -> None:
        if self._saved_showwarning is not None:
            warnings.showwarning = self._saved_showwarning
            self._saved_showwarning = None
        if self._saved_fd is not None:
            with contextlib.suppress(OSError):
                os.dup2(self._saved_fd, 2)  # closes the pipe's write end held at 2
            self.drain()
            with self._pump_lock:
                if self._read_fd is not None:  # a forked child may still hold the pipe: stop reading anyway
                    with contextlib.suppress(OSError):
                        os.close(self._read_fd)
                    self._read_fd = None
            if self._thread is not None:
                self._thread.join(timeout=2.0)
            with contextlib.suppress(OSError):
                os.close(self._saved_fd)
            self._saved_fd = None
        if self._pending:
            self.feed(self._pending.decode("utf-8", errors="replace"))
            self._pending = b""

    def __enter__(self) -> FallbackWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
