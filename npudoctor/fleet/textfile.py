"""Atomic writes for node_exporter's textfile collector (``--textfile PATH``).

The collector may read the folder at any moment; a half-written file would publish half the series. So the
text goes to a hidden temporary file in the same folder (same file system: the rename is atomic; the
collector only reads ``*.prom``) and is renamed over the target.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from typing import Tuple

from npudoctor.errors import InputError


class TextfileError(InputError):
    """The textfile cannot be written: one line for the user."""


def write_new(path: str, text: str, advice: str = "choose another name") -> None:
    """Write ``text`` to a new file ``path``: never overwritten, never through a link (``open(..., "x")``
    fails on any existing name, a link included). A file that exists, or appeared while the command ran
    (another run writing into the same folder), is one line saying nothing was overwritten."""
    try:
        with open(path, "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise TextfileError(f"{path} already exists; {advice} (nothing was overwritten)") from None
    except OSError as exc:
        raise TextfileError(f"cannot write {path}: {exc.strerror or exc}") from None


def check_target(path: str) -> None:
    """Refuse a target that can never be written, before any work is done."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.islink(os.path.dirname(path) or "."):
        raise TextfileError(f"--textfile {path}: its folder is a symbolic link (not followed; give the real "
                            f"folder)")
    if not os.path.isdir(folder):
        raise TextfileError(f"--textfile {path}: no such directory {folder}")
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        raise TextfileError(f"--textfile {path}: exists and is not a regular file (refusing to replace it)")


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (temp file in the same folder, fsync, rename, mode 0644).

    Replacing is the point here (the collector wants the newest run), unlike bundles and onboarding
    folders, which are never overwritten. A ``path`` that is a folder, a FIFO or a device is refused, and so
    is a folder reached through a link: the folder is opened once without following a link, and the
    temporary file is created and renamed relative to that open folder (a link swapped in later is not
    followed either).
    """
    check_target(path)
    name = os.path.basename(path)
    folder = os.path.dirname(path) or "."
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        folder_fd = os.open(folder, flags)
    except OSError as exc:
        reason = "its folder is a symbolic link (not followed)" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else \
            f"cannot write: {exc.strerror or exc}"
        raise TextfileError(f"--textfile {path}: {reason}") from None
    tmp = ""
    try:
        fd, tmp = _create_temporary(folder_fd, name)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), 0o644)  # node_exporter usually runs as another user
            os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)  # replaces a link, never follows
    except OSError as exc:  # a folder nobody may create files in (read-only, /proc)
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder_fd)
        raise TextfileError(f"--textfile {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        os.close(folder_fd)


def _create_temporary(folder_fd: int, name: str) -> Tuple[int, str]:
    """A new hidden ``.NAME.XXXX.tmp`` in the open folder (the collector reads only ``*.prom``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _attempt in range(100):
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o600, dir_fd=folder_fd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name")
