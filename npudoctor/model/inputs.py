"""One exit rule for the commands that read many inputs at once (``fleet``, ``prof analyze``, ``logs scan``).

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
