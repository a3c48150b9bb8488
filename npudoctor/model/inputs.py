"""One exit rule for the commands that read many inputs at once (``fleet``, ``prof analyze``, ``logs scan``),
and one rule for the symbolic links they meet.

* nothing could be read: exit 2 with one error line (a usage error, as for one unreadable input);
* some inputs could not be read: the command says so on stderr (how many, and the first with its reason) and
  exits at least 1: the verdict covers only part of what was asked, and a CI gate must not pass on it;
* every input was read: the verdict's own code (0, or 1 for findings).

What counts as an input that "could not be read" is the command's: a PATH argument or a file it found that
could not be opened, was not what the command reads (not a report, not a profiling table), or held nothing
usable. A file a folder walk skips on purpose (a link out of the folder, a FIFO, a binary file) is no input.

>>> exit_code(0, 0), exit_code(0, 3), exit_code(1, 3), exit_code(1, 0)
(0, 1, 1, 1)
>>> warning_line([("a.json", "not JSON"), ("b.json", "no such file")])
'npudoctor: warning: 2 input(s) could not be read (first a.json: not JSON); the verdict covers the rest: exit 1'
"""

from __future__ import annotations

import os
import stat
from typing import Sequence, Tuple

EXIT_SOME_UNREADABLE = 1
EXIT_NOTHING_READABLE = 2


def exit_code(verdict: int, unreadable: int) -> int:
    """The command's exit code: ``verdict`` (0 or 1) raised to 1 when ``unreadable`` inputs were left out."""
    return max(verdict, EXIT_SOME_UNREADABLE) if unreadable else verdict


def warning_line(unreadable: Sequence[Tuple[str, str]]) -> str:
    """The stderr line for ``unreadable`` (path, reason) pairs (at least one)."""
    path, reason = unreadable[0]
    return (f"npudoctor: warning: {len(unreadable)} input(s) could not be read (first {path}: {reason}); "
            f"the verdict covers the rest: exit {EXIT_SOME_UNREADABLE}")


# -- symbolic links ------------------------------------------------------------------------------------------
# Files are read as regular files and folders as folders, never through a symbolic link (issue 19 point 16):
# a link may point anywhere (/dev/zero, /proc/self/pagemap, a key file, another rank's table read twice).
# * A link named on the command line is refused: one line, exit 2 for a single input (the multi-input rule
#   above when others are readable). The words say what to do: give the file it points to.
# * A link met while walking a folder is skipped and said, with the same words in every walk.
# * ``logs scan --follow-symlinks`` (the one command with that flag) reads both kinds.
# The shell's ``<(cmd)`` names ``/dev/fd/N``, a link in /proc to an anonymous pipe: no file or folder stands
# behind it, so it is read as the stream it is. Nothing is ever written through a link (each writer keeps that).

#: Why a link named on the command line is not read.
NAMED_LINK = "a symbolic link (not followed; give the file it points to)"
#: Why a link met in a folder walk is not read.
WALKED_LINK = "a symbolic link (not followed)"


def is_named_link(path: str) -> bool:
    """Whether ``path``, as named on the command line, is a link to refuse (:data:`NAMED_LINK`): any symbolic
    link but one that leads to an anonymous pipe or socket (``<(cmd)``, ``/dev/stdin`` from a pipe)."""
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return False
    except (OSError, ValueError):
        return False  # nothing there: the reader says so
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return True  # a broken link (or one that cannot be looked through): refused as a link all the same
    anonymous = (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) and not os.path.exists(os.path.realpath(path))
    return not anonymous
