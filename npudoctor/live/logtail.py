"""New log findings while a job runs: follow every log file under a folder and scan what each poll adds.

The log doctor's engine (:mod:`npudoctor.logs`) does the reading; this module only finds the files, follows
them (:class:`~npudoctor.live.follow.Follower`) and remembers when each merged finding first appeared.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from npudoctor.live.follow import Follower

if TYPE_CHECKING:
    from npudoctor.logs.model import LogFinding

# Files the log doctor reads: CANN plog/slog/device logs and console captures. Compressed, rotated-away
# archives (.gz) do not grow, so they are not followed.
LOG_SUFFIXES = (".log", ".txt", ".out")
MAX_FILES = 64
MAX_DEPTH = 4


@dataclass(frozen=True)
class LiveLogFinding:
    severity: str  # "error", "warning", "info" as the log doctor grades them
    title: str
    subject: str
    count: int
    first_seen: Optional[float]  # when the dashboard first saw this cause (clock time)
    last_file: str
    fix: str


def _scan_new_text(scanner: Any, name: str, data: bytes) -> None:
    """The one call into the log doctor's engine (its public API moves: keep it here only)."""
    scanner.scan_bytes(name, data)


def find_log_files(root: str, limit: int = MAX_FILES) -> List[str]:
    """Log files under ``root`` (newest first by modification time), regular files only, not too deep."""
    found: List[Tuple[float, str]] = []
    base_depth = root.rstrip(os.sep).count(os.sep)
    for folder, dirs, files in os.walk(root):
        if folder.count(os.sep) - base_depth >= MAX_DEPTH:
            dirs[:] = []
        for name in files:
            if not name.endswith(LOG_SUFFIXES):
                continue
            path = os.path.join(folder, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            if info.st_mode & 0o170000 == 0o100000:  # regular files only: never a FIFO or a device
                found.append((info.st_mtime, path))
    found.sort(reverse=True)
    return [path for _, path in found[:limit]]


class LogTail:
    """Follows the logs under ``root``; :meth:`poll` scans what was added and returns the findings so far."""

    def __init__(self, root: str, clock: Callable[[], float] = time.time, from_start: bool = False) -> None:
        from npudoctor.logs.scanner import Scanner  # the log rules cost start-up time: only with --logs

        self.root = root
        self.clock = clock
        self.from_start = from_start
        self.scanner = Scanner()
        self.followers: Dict[str, Follower] = {}
        self.first_seen: Dict[Tuple[str, str], float] = {}
        self.last_file: Dict[Tuple[str, str], str] = {}
        self.error: Optional[str] = None
        self.verdict = ""  # the diagnosis of what was tailed (logs scan's verdict line)
        self.lines = 0

    def start(self) -> None:
        """Note the files present now; what they already hold is not news (unless ``from_start``)."""
        if not os.path.isdir(self.root):
            self.error = f"{self.root}: not a directory"
            return
        for path in find_log_files(self.root):
            follower = Follower(path)
            if not self.from_start:
                follower.offset = _size(path)
            self.followers[path] = follower

    def poll(self) -> List[LiveLogFinding]:
        if os.path.isdir(self.root):
            for path in find_log_files(self.root):
                self.followers.setdefault(path, Follower(path))  # new since the start: read from its start
        else:
            self.error = f"{self.root}: not a directory"
        for path, follower in self.followers.items():
            lines = follower.poll()
            if lines:
                self.lines += len(lines)
                before = {key: f.count for key, f in self._merged().items()}
                _scan_new_text(self.scanner, path, b"\n".join(lines) + b"\n")
                for key, finding in self._merged().items():
                    if before.get(key) != finding.count:
                        self.first_seen.setdefault(key, self.clock())
                        self.last_file[key] = path
        findings = self.findings()
        if findings:  # the diagnosis `logs scan` gives, over what was tailed so far (issue 27)
            from npudoctor.logs.job import diagnose_result

            self.verdict = diagnose_result(self.scanner.result()).diagnosis.verdict
        return findings

    def _merged(self) -> Dict[Tuple[str, str], LogFinding]:
        return {(f.kind, f.subject): f for f in self.scanner.result().findings}

    def findings(self) -> List[LiveLogFinding]:
        out = []
        for key, finding in self._merged().items():
            out.append(LiveLogFinding(finding.severity, finding.title or finding.kind, finding.subject, finding.count,
                                      self.first_seen.get(key), self.last_file.get(key, ""), finding.fix))
        return sorted(out, key=lambda f: f.first_seen or 0.0, reverse=True)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
