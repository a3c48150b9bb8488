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
# A path named on the command line is the user's choice: a link there is followed (as ``grep -r``, ``find -H``
# and ``du`` do) and reads as the file or folder it points to, which must still be what the command reads (a
# regular file, a folder; a stream where the command takes one). A link met while walking a folder is not
# followed: a folder copied from elsewhere may point anywhere (/dev/zero, /proc/self/pagemap, a key file,
# another rank's table read twice); it is skipped and said, and only ``logs scan --follow-symlinks`` asks for
# such links. Nothing is ever written through a link (a separate rule, kept by each writer).

#: Why a link met in a folder walk is not read (the skip reason every walk gives).
WALKED_LINK = "a symbolic link met in a folder (not followed; name it to read it)"


def named_path(path: str) -> str:
    """The path to read for ``path`` as named on the command line: a link's target (resolved once, here), so
    the readers, which never open a link, read the file or folder it points to; any other path as given.

    A link to something that is neither a regular file nor a folder (the shell's ``<(cmd)`` is a link to a
    pipe in /proc) stays as named: opening it reaches the stream, and its type is judged there.
    """
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return path
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return path  # a broken link, or no such path: the reader says so for the path named
    target = os.path.realpath(path)
    if (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) and os.path.exists(target):
        return target
    return path
