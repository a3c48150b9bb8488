"""GitHub Actions workflow commands (``::error file=..,line=..,title=..::message``), for every ``--format github``.

The escaping is GitHub's own (actions/toolkit ``command.ts``): ``%``, CR and LF in the message; also ``:`` and
``,`` in property values. Paths are relative to the workspace so that GitHub attaches them to files.
"""

from __future__ import annotations

import os
from typing import Optional

from npudoctor.untrusted import clean, one_line, printable


def escape_data(text: str) -> str:
    """A workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``title=``, ``file=``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workspace_path(path: str, workspace: Optional[str] = None) -> str:
    """``path`` relative to the workspace (``GITHUB_WORKSPACE``, else the current folder) when it lies inside
    it, else as it is."""
    base = os.path.abspath(workspace or os.environ.get("GITHUB_WORKSPACE") or os.getcwd())
    full = os.path.abspath(path)
    if full.startswith(base.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, base)
    return path


def annotation(level: str, message: str, title: str = "", file: str = "", line: Optional[int] = None) -> str:
    """One workflow command line (without its newline): ``level`` is error, warning or notice. The message and
    title quote someone else's text: cleaned (npudoctor.untrusted); ``file`` stays the real path, since GitHub
    places the annotation by it (only control characters are dropped)."""
    message, title = clean(message), one_line(clean(title))
    properties = []
    if file:
        properties.append(f"file={escape_property(printable(file))}")
        if line is not None:
            properties.append(f"line={line}")
    if title:
        properties.append(f"title={escape_property(title)}")
    return f"::{level}{' ' + ','.join(properties) if properties else ''}::{escape_data(message)}"
