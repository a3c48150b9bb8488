"""Atomic writes for node_exporter's textfile collector (``--textfile PATH``).

The collector may read the folder at any moment; a half-written file would publish half the series. So the
text goes to a hidden temporary file in the same folder (same file system: the rename is atomic; the
collector only reads ``*.prom``) and is renamed over the target.
"""

from __future__ import annotations

import os
import tempfile

from npudoctor.errors import InputError


class TextfileError(InputError):
    """The textfile cannot be written: one line for the user."""


def check_target(path: str) -> None:
    """Refuse a target that can never be written, before any work is done."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TextfileError(f"--textfile {path}: no such directory {folder}")
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        raise TextfileError(f"--textfile {path}: exists and is not a regular file (refusing to replace it)")


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (temp file in the same folder, fsync, rename, mode 0644).

    Replacing is the point here (the collector wants the newest run), unlike bundles and onboarding
    folders, which are never overwritten. A ``path`` that is a folder, a FIFO or a device is refused.
    """
    check_target(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    except OSError as exc:  # a folder nobody may create files in (read-only, /proc)
        raise TextfileError(f"--textfile {path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # node_exporter usually runs as another user
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise TextfileError(f"--textfile {path}: cannot write: {exc.strerror or exc}") from None
