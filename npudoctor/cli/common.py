"""What every command module shares: the exit codes, the one-line usage error, list options, path options.

Exit codes (the contract scripts rely on): 0 nothing failed; 1 a FAIL or ERROR finding (or a WARN under
``--fail-on warn``); 2 usage error, unreadable input, or the tool could not run.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import click

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
# Ctrl-C, as a shell reports a command stopped by SIGINT (128 + 2): what was recorded is still reported
EXIT_INTERRUPTED = 130


# One ``--fail-on`` vocabulary for every command (issue 28): ``fail`` (its alias ``error``) fails on what is
# shown ✗, ``warn`` on what is shown ✗ or !; a command adds the kinds of its own (logs scan: fallback, info, a
# finding kind, an error code; ops audit: fallback). Words are case-insensitive.
FAIL_ON_SEVERITIES = {"fail": "fail", "error": "fail", "warn": "warn", "warning": "warn"}


def fail_on_words(kinds: Sequence[str] = ()) -> str:
    """The vocabulary in a sentence: "fail (or error), warn, fallback"."""
    return ", ".join(["fail (or error)", "warn", *kinds])


class FailOn(click.ParamType):
    """``--fail-on``: a severity of the one vocabulary (as ``fail`` or ``warn``) or one of ``kinds``."""

    name = "fail-on"

    def __init__(self, kinds: Sequence[str] = ()) -> None:
        self.kinds = tuple(kinds)

    def get_metavar(self, param: Any, ctx: Any = None) -> str:  # click 8.0-8.1 pass no ctx
        return "|".join(["fail", "warn", *self.kinds])

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> str:
        word = str(value).strip().lower()
        if word in FAIL_ON_SEVERITIES:
            return FAIL_ON_SEVERITIES[word]
        if word in self.kinds:
            return word
        self.fail(f"{value!r}: expected {fail_on_words(self.kinds)}", param, ctx)


FAIL_ON_HELP = "Exit 1 on FAIL/ERROR (fail, or error; the default) or also on WARN (warn)."


def fail_usage(message: str) -> click.exceptions.Exit:
    """Print a one-line error and leave with exit code 2. The message often quotes a path or a file's own
    text: it stays one line, without secrets or control characters (npudoctor.untrusted)."""
    from npudoctor.untrusted import clean, one_line

    click.echo(f"npudoctor: error: {one_line(clean(message))}", err=True)
    return click.exceptions.Exit(EXIT_USAGE)


def emit_findings(fmt: str, report: Any, command: str, fail_on: str, code: int, document: Any = None,
                  scope: Optional[str] = None) -> None:
    """A run's findings (``check``, ``prof``) in a machine format, each through its one writer; ``document``:
    the command's own JSON document (else the report's), ``scope``: what the verdict is about. Only the writer
    asked for is imported (each costs start-up time)."""
    if fmt == "json":  # stdout cannot carry every character (LANG=C): escapes, never "?" in data
        from npudoctor.report import json_report

        json_report.emit(report.to_dict() if document is None else document)
    elif fmt == "junit":
        from npudoctor.report import junit

        junit.emit(junit.render(report, fail_on))
    elif fmt == "github":
        from npudoctor.report import github

        click.echo(github.report_document(report, command, code, scope), nl=False)
    else:
        from npudoctor.report import clusterd, npd, prometheus

        click.echo({"prometheus": prometheus, "npd": npd, "clusterd": clusterd}[fmt].render(report, fail_on), nl=False)


class PathParam(click.ParamType):
    """A file or folder name (or profile name) from the command line. ``''`` is refused rather than taken as
    "not given" (a script whose variable came out empty must not get the default, or write somewhere else),
    and so is ``-`` unless the parameter reads a stream (``stdin=True``): nothing creates a file named ``-``."""

    name = "path"

    def __init__(self, stdin: bool = False) -> None:
        self.stdin = stdin

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if not isinstance(value, str):
            return value
        label = "/".join(param.opts) if isinstance(param, click.Option) else (
            param.human_readable_name.rstrip(".") if param is not None else "PATH")
        if value == "":
            raise fail_usage(f"{label} '': an empty name is no file or folder")
        if value == "-" and not self.stdin:
            raise fail_usage(f"{label} -: '-' (a stream) is not read or written here; give a file name "
                             f"(./- for a file named -)")
        return value


# Every option and argument naming a file, folder or profile takes one of these (point 17 of issue 19).
PATH = PathParam()
PATH_OR_STDIN = PathParam(stdin=True)


def split_list(values: Sequence[str]) -> Tuple[str, ...]:
    """Accept both `--only A --only B` and `--only A,B`."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


# A topic is shown at most this long in an error (`explain` is given whatever a user pastes).
TOPIC_SHOWN = 60


def quoted_topics(topics: Sequence[str]) -> str:
    """Topics for a one-line error: quoted with repr (no control character reaches the terminal), each cut."""
    return ", ".join(repr(t) if len(t) <= TOPIC_SHOWN else repr(t[:TOPIC_SHOWN]) + "..." for t in topics)
