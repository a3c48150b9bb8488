"""Follow a file that grows while a job writes it (``tail -F``): new complete lines on each poll.

A rotated file (the path now names another inode) is read from its start; a truncated one (shorter than what
was read) too. Only regular files are read (a FIFO or a device given by mistake is refused, never blocks),
and at most ``max_bytes`` per poll so a huge backlog is caught up over several polls.
"""

from __future__ import annotations

import os
import stat
from typing import List, Optional, Tuple

MAX_BYTES_PER_POLL = 4 * 1024 * 1024
# A line longer than this without a newline is cut (a binary file given by mistake stays bounded).
MAX_LINE_BYTES = 1024 * 1024


class Follower:
    """``poll()`` -> the complete lines added since the last poll; ``events`` says what happened to the file."""

    def __init__(self, path: str, max_bytes: int = MAX_BYTES_PER_POLL) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.offset = 0
        self.identity: Optional[Tuple[int, int]] = None
        self.carry = b""
        self.error: Optional[str] = None  # why the file cannot be read right now ("not-found", ...)
        self.events: List[str] = []  # "rotated", "truncated" (newest last; the caller may clear it)

    def _restart(self, event: str) -> None:
        self.events.append(event)
        self.offset = 0
        self.carry = b""

    def poll(self) -> List[bytes]:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self.error = "not-found"
            return []
        except OSError as exc:
            self.error = f"os-error: {exc.strerror or exc}"
            return []
        if not stat.S_ISREG(info.st_mode):
            self.error = "not a regular file"
            return []
        identity = (info.st_dev, info.st_ino)
        if self.identity is not None and identity != self.identity:
            self._restart("rotated")
        elif info.st_size < self.offset:
            self._restart("truncated")
        self.identity = identity
        if info.st_size == self.offset:
            self.error = None
            return []
        try:
            # O_NONBLOCK: a FIFO swapped in after the stat above never blocks the open; fstat re-checks the kind.
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            self.error = f"os-error: {exc.strerror or exc}"
            return []
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                self.error = "not a regular file"
                return []
            if (opened.st_dev, opened.st_ino) != identity:
                return []  # replaced between stat and open: the next poll sees the new file
            os.lseek(fd, self.offset, os.SEEK_SET)
            data = os.read(fd, self.max_bytes)
        except OSError as exc:
            self.error = f"os-error: {exc.strerror or exc}"
            return []
        finally:
            os.close(fd)
        self.error = None
        self.offset += len(data)
        data = self.carry + data
        cut = data.rfind(b"\n") + 1
        lines, self.carry = data[:cut].splitlines(), data[cut:]
        if len(self.carry) > MAX_LINE_BYTES:
            lines.append(self.carry)
            self.carry = b""
        return lines
