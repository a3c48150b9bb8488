"""A small reader of Markdown pipe tables (pure), for documents such as Ascend/pytorch COMPATIBILITY.en.md.

A table is a header row, a separator row of dashes (``|:---:|---|``) and body rows, each ``| a | b |``.
Each table remembers the nearest ``#`` heading above it.

>>> tables = read_tables('''## PyTorch and Python versions
...
... | PyTorch Version |   Python version   |
... |:---------------:|:------------------:|
... | PyTorch 2.1.0   | Python3.8, Python3.9 |
... ''')
>>> tables[0].heading, tables[0].header
('PyTorch and Python versions', ('PyTorch Version', 'Python version'))
>>> tables[0].rows
[('PyTorch 2.1.0', 'Python3.8, Python3.9')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Tuple

_SEPARATOR_CELL = re.compile(r"^:?-{3,}:?$")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


@dataclass
class Table:
    heading: str
    header: Tuple[str, ...]
    rows: List[Tuple[str, ...]] = field(default_factory=list)


def row_cells(line: str) -> Tuple[str, ...]:
    """The cells of a ``| a | b | c |`` row, stripped; a row cut off before its last ``|`` keeps what it has.

    >>> row_cells("| NPU  Name | Health |"), row_cells("| 0  910B3 | OK")
    (('NPU  Name', 'Health'), ('0  910B3', 'OK'))
    """
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|"):
        inner = inner[:-1]
    return tuple(cell.strip() for cell in inner.split("|"))


def _is_row(line: str) -> bool:
    return line.strip().startswith("|")


def _is_separator(line: str) -> bool:
    cells = row_cells(line)
    return (
        _is_row(line) and bool(cells) and all(_SEPARATOR_CELL.match(cell.replace(" ", "")) for cell in cells)
    )


def read_tables(text: str) -> List[Table]:
    """Every pipe table in ``text``, in document order; rows keep the header's cell count (padded with "")."""
    lines = text.splitlines()
    tables: List[Table] = []
    heading = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        match = _HEADING.match(line.strip())
        if match and not _is_row(line):
            heading = match.group(1)
        if _is_row(line) and index + 1 < len(lines) and _is_separator(lines[index + 1]):
            table = Table(heading, row_cells(line))
            index += 2
            while index < len(lines) and _is_row(lines[index]):
                cells = row_cells(lines[index])
                width = len(table.header)
                table.rows.append((cells + ("",) * width)[:width])
                index += 1
            tables.append(table)
            continue
        index += 1
    return tables
