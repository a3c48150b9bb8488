"""Terminal manners every command shares: colour choice, width, symbols a stream can encode, broken pipes.

The house style (see also :mod:`npudoctor.report.progress`):

- colour follows ``--color auto|always|never`` (every command has it), else ``NO_COLOR`` (any non-empty
  value turns colour off), else ``FORCE_COLOR`` (non-empty, not ``0``, turns it on), else whether the stream
  is a terminal (and ``TERM`` is not ``dumb``);
- text fits the terminal's width, 80 columns when the output is not a terminal (``COLUMNS`` overrides both);
- a stream that cannot encode the status symbols (``LANG=C``, ``PYTHONIOENCODING=ascii``) gets ASCII ones,
  and any other character it cannot encode is replaced, never a traceback;
- a reader that goes away (``npudoctor list-checks | head -1``) ends the command quietly with exit code 0.
"""

from __future__ import annotations

import os
import sys
import textwrap
from contextlib import suppress
from typing import IO, TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:  # `npudoctor libs` uses this module and keeps its start-up free of the finding model
    from npudoctor.model.finding import Status

COLOR_CHOICES = ("auto", "always", "never")
DEFAULT_WIDTH = 80
# Narrower than this, wrapping does more harm than good: lines are left long.
MIN_WIDTH = 40


_color_choice = "auto"


def set_color_choice(choice: Optional[str]) -> None:
    """Remember ``--color`` for this process (the CLI's shared option calls this)."""
    global _color_choice
    _color_choice = choice if choice in COLOR_CHOICES else "auto"


def use_color(stream: Optional[IO[str]] = None, choice: Optional[str] = None,
              environ: Optional[Dict[str, str]] = None) -> bool:
    """Whether to colour what goes to ``stream`` (stdout by default)."""
    choice = choice or _color_choice
    if choice == "always":
        return True
    if choice == "never":
        return False
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    force = env.get("FORCE_COLOR")
    if force and force != "0":
        return True
    return is_terminal(stream or sys.stdout) and env.get("TERM") != "dumb"


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def width(stream: Optional[IO[str]] = None) -> int:
    """Columns to fit: ``COLUMNS``, else the terminal's width, else 80 (files, pipes, CI logs)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), MIN_WIDTH)
    stream = stream or sys.stdout
    if is_terminal(stream):
        try:
            return max(os.get_terminal_size(stream.fileno()).columns, MIN_WIDTH)
        except (OSError, ValueError, AttributeError):
            pass
    return DEFAULT_WIDTH


# Where a word longer than a line (a path, LD_LIBRARY_PATH, a C++ name) may break, for ``wrap(breaks=...)``.
WORD_BREAKS = "/:,<("


class _Wrapper(textwrap.TextWrapper):
    breaks = ""

    def _handle_long_word(self, reversed_chunks: List[str], cur_line: List[str], cur_len: int, width: int) -> None:
        """With ``breaks``, a word longer than the line breaks after the last of these characters that fits
        (else it starts the next line), and only where none does, at the last column."""
        if not (self.break_long_words and self.breaks):
            super()._handle_long_word(reversed_chunks, cur_line, cur_len, width)
            return
        room = max(width - cur_len, 1)
        chunk = reversed_chunks[-1]
        end = max(chunk.rfind(mark, 0, room) for mark in self.breaks) + 1
        if end <= 0:
            if cur_line:
                return  # the word starts the next line, which may hold a break
            end = room
        cur_line.append(chunk[:end])
        reversed_chunks[-1] = chunk[end:]


def wrap(text: str, width: int, first: str = "", rest: str = "", words_may_break: bool = True,
         breaks: str = "") -> List[str]:
    """``text`` wrapped to ``width`` columns, each line starting with ``first`` then ``rest``. A word longer
    than a line is broken (after one of ``breaks``, e.g. :data:`WORD_BREAKS`, where one fits), or left long
    when ``words_may_break`` is false."""
    from npudoctor.untrusted.redact import redact_text

    wrapper = _Wrapper(width=max(width, len(rest) + 20), initial_indent=first, subsequent_indent=rest,
                       break_long_words=words_may_break, break_on_hyphens=False)
    wrapper.breaks = breaks
    # Redacted before it is cut: a URL with a password broken after its "/" would no longer look like one
    return wrapper.wrap(redact_text(text)) or [first.rstrip()]


FIX_LABEL = "fix: "
FIX_INDENT = "      "  # fix lines start under a finding's ID (check) or a row's name (libs)


def fix_lines(fix: str, width: int, indent: str) -> List[str]:
    """Each line of ``fix`` wrapped under ``fix:`` (the first line starts ``indent + FIX_LABEL``); words
    (commands, paths) are never broken."""
    rest = indent + " " * len(FIX_LABEL)
    lines: List[str] = []
    for fix_line in fix.splitlines():
        lines.extend(wrap(fix_line, width, rest, rest, words_may_break=False))
    if lines:
        lines[0] = indent + FIX_LABEL + lines[0][len(rest):]
    return lines


def can_encode(text: str, stream: Optional[IO[str]] = None) -> bool:
    encoding = getattr(stream or sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def status_symbols(stream: Optional[IO[str]] = None) -> Dict[Status, str]:
    """The status symbols ``stream`` can print: ✓ ✗ on UTF-8, + x on ASCII terminals."""
    from npudoctor.report.symbols import ASCII_SYMBOL, SYMBOL

    return SYMBOL if can_encode("".join(SYMBOL.values()), stream) else ASCII_SYMBOL


def tolerate_encodings() -> None:
    """Characters stdout/stderr cannot encode are replaced (``?``) instead of raising UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None or getattr(stream, "errors", "strict") != "strict":
            continue
        with suppress(ValueError, OSError):  # a stream that cannot be reconfigured keeps its settings
            reconfigure(errors="replace")


def quiet_broken_pipe() -> None:
    """The reader of stdout went away (``| head``): drop what is still buffered, so that the interpreter's
    final flush does not print "Exception ignored ... BrokenPipeError", and let the caller exit 0."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
