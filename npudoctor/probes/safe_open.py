"""Open files that someone else controls without hanging, eating memory or following a link out.

Every file npudoctor reads whole (system files under ``--root`` and live, ``--profile``/``--rules`` YAML,
bundle members in a folder) goes through :func:`read_file`: it looks at the file type *before* opening
(a FIFO, a device or a socket is refused without being opened: opening ``/dev/zero`` reads forever,
opening a FIFO blocks until a writer comes), opens with ``O_NONBLOCK`` so that a file swapped for a FIFO
between the look and the open still cannot block, checks the opened file is the regular file it looked at,
and reads at most ``max_bytes``.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> os.mkfifo(os.path.join(folder, "fifo"))
>>> read_file(os.path.join(folder, "fifo"), 100)
Traceback (most recent call last):
...
npudoctor.probes.safe_open.UnsafeFile: ...fifo: not a regular file (a FIFO)
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple

__all__ = ["FileData", "UnsafeFile", "file_kind", "read_file"]


class UnsafeFile(OSError):
    """The file cannot be read safely. ``reason`` is a short stable word for records ("not-found",
    "permission", "is-a-directory", "not-regular", "symlink", "too-large", "os-error: ..."); ``str()`` is a
    one-line message for people."""

    def __init__(self, path: str, reason: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return str(self.args[0])


class FileData(NamedTuple):
    data: bytes
    truncated: bool  # bytes were left out (the file is larger than max_bytes)
    size: int  # st_size of the opened file (0 for /proc files)


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
)


def file_kind(mode: int) -> str:
    """``"a FIFO"``, ``"a character device"``... for a mode that is not a regular file; "" for one."""
    if stat.S_ISREG(mode):
        return ""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse(path: str, mode: int) -> UnsafeFile:
    kind = file_kind(mode)
    if stat.S_ISDIR(mode):
        return UnsafeFile(path, "is-a-directory", "is a directory")
    if stat.S_ISLNK(mode):
        return UnsafeFile(path, "symlink", "is a symbolic link (not followed)")
    return UnsafeFile(path, "not-regular", f"not a regular file ({kind})")


def _os_error(path: str, exc: OSError) -> UnsafeFile:
    if exc.errno == errno.ENOENT:
        return UnsafeFile(path, "not-found", "no such file")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UnsafeFile(path, "permission", "permission denied")
    if exc.errno == errno.EISDIR:
        return UnsafeFile(path, "is-a-directory", "is a directory")
    if exc.errno == errno.ELOOP:
        return UnsafeFile(path, "symlink", "is a symbolic link (not followed)")
    if exc.errno == errno.ENOTDIR:
        return UnsafeFile(path, "not-found", "no such file (a parent is not a directory)")
    reason = exc.strerror or exc.__class__.__name__
    return UnsafeFile(path, f"os-error: {reason}", reason)


def read_file(path: str, max_bytes: int, *, tail: bool = False, follow_symlinks: bool = True,
              whole: bool = False) -> FileData:
    """At most ``max_bytes`` of the regular file ``path`` (its end with ``tail``).

    ``whole``: the file must fit (a profile, a rule file): larger ones are refused with "too-large"
    before a byte is read, instead of being cut. ``follow_symlinks=False``: a symlink at ``path`` itself is
    refused (bundle folders). Raises :class:`UnsafeFile`; never blocks on open, never reads a device.
    """
    try:
        before = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError as exc:
        raise _os_error(path, exc) from None
    if not stat.S_ISREG(before.st_mode):
        raise _refuse(path, before.st_mode)
    if whole and before.st_size > max_bytes:
        raise UnsafeFile(path, "too-large", f"too large ({before.st_size} bytes; at most {max_bytes})")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _os_error(path, exc) from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
            raise _refuse(path, opened.st_mode) if not stat.S_ISREG(opened.st_mode) else UnsafeFile(
                path, "os-error: changed", "changed while it was opened")
        size = opened.st_size
        if whole and size > max_bytes:
            raise UnsafeFile(path, "too-large", f"too large ({size} bytes; at most {max_bytes})")
        skipped = False
        if tail and size > max_bytes:
            os.lseek(fd, size - max_bytes, os.SEEK_SET)
            skipped = True
        chunks = []
        left = max_bytes + 1  # one byte more tells a file of exactly max_bytes from a longer one
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        if isinstance(exc, UnsafeFile):
            raise
        raise _os_error(path, exc) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    truncated = skipped or len(data) > max_bytes
    if len(data) > max_bytes:
        if whole:  # grew past the cap after the stat (/proc files report size 0)
            raise UnsafeFile(path, "too-large", f"too large (more than {max_bytes} bytes)")
        data = data[:max_bytes]
    return FileData(data, truncated, size)
