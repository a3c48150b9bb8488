"""Opening what a user names without trusting it: never block on ``open``, look at the type first."""

from __future__ import annotations

import os
import stat
from typing import IO


def file_type(mode: int) -> str:
    """A word for what a non-regular file is ("fifo", "character device", ...)."""
    for test, name in ((stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "folder")):
        if test(mode):
            return name
    return "special file"


def open_input(path: str, regular_only: bool = True, nofollow: bool = False) -> IO[bytes]:
    """Open ``path`` for reading without ever blocking on ``open`` (a FIFO without a writer).

    With ``regular_only`` anything but a regular file raises OSError ("not a regular file (fifo)");
    otherwise a stream is switched back to blocking reads once open (a pipe with a writer is read to its end).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", path)
        if not stat.S_ISREG(mode):
            if regular_only:
                raise OSError(0, f"not a regular file ({file_type(mode)})", path)
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
