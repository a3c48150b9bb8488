"""Pure reader of ``nvidia-smi --query-gpu=... --format=csv`` and ``--query-compute-apps=... --format=csv``.

The CSV carries a header row naming each field with its unit (``memory.used [MiB]``); values repeat the unit
(``98 %``, ``7234 MiB``, ``81.25 W``) and read ``[N/A]`` or ``[Not Supported]`` where the board has none.
Columns are found by their header name, never by position. A real capture (a bug note in a public
repository, nvidia-smi on an RTX 4090):

>>> gpus = parse_query_gpu('''utilization.gpu [%], memory.used [MiB], memory.total [MiB], name
... 0 %, 678 MiB, 49140 MiB, NVIDIA GeForce RTX 4090''')
>>> gpus[0]["name"], gpus[0]["utilization.gpu"], gpus[0]["memory.used"], gpus[0]["memory.total"]
('NVIDIA GeForce RTX 4090', 0.0, 678.0, 49140.0)
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Union

from npudoctor.errors import InputError

Value = Union[str, float, None]

# `memory.used [MiB]` -> ("memory.used", "MiB")
_HEADER = re.compile(r"^\s*([\w.]+)\s*(?:\[([^\]]*)\])?\s*$")
_NUMBER = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*(?:%|MiB|W|C|MHz)?\s*$")
# Fields that are text even when they look like numbers.
_TEXT_FIELDS = {"name", "uuid", "pci.bus_id", "process_name", "gpu_uuid", "gpu_bus_id", "driver_version"}


class NvidiaSmiParseError(InputError, ValueError):
    """The text is not ``nvidia-smi --format=csv`` output with a header row (one-line reason)."""


def _value(field: str, text: str) -> Value:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):  # [N/A], [Not Supported], [Insufficient Permissions]
        return None
    if field in _TEXT_FIELDS:
        return text
    match = _NUMBER.match(text)
    if not match:
        return text
    value = float(match.group(1))  # a 4000-digit cell is inf: no reading, as [N/A] is
    return value if abs(value) <= 1e18 else None


def parse_csv(text: str) -> List[Dict[str, Value]]:
    """Rows of an ``nvidia-smi --format=csv`` table as {field name (unit dropped): value}; numbers as float.

    A process table (real capture, the same note as above):

    >>> rows = parse_csv('''pid, process_name, used_gpu_memory [MiB]
    ... 1580, /app/llama-server, 340 MiB
    ... 1597, /app/llama-server, 394 MiB''')
    >>> [(row["pid"], row["process_name"], row["used_gpu_memory"]) for row in rows]
    [(1580.0, '/app/llama-server', 340.0), (1597.0, '/app/llama-server', 394.0)]
    >>> parse_csv("No devices were found")
    Traceback (most recent call last):
    ...
    npudoctor.parsers.nvidia_smi.NvidiaSmiParseError: nvidia-smi printed no CSV header: No devices were found
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise NvidiaSmiParseError("empty input: no nvidia-smi output")
    fields: List[str] = []
    for cell in lines[0].split(","):
        match = _HEADER.match(cell)
        if not match:
            raise NvidiaSmiParseError(f"nvidia-smi printed no CSV header: {lines[0].strip()[:120]}")
        fields.append(match.group(1))
    rows: List[Dict[str, Value]] = []
    for line in lines[1:]:
        # A GPU name holds no comma; split from the left so a longer last cell keeps what it has.
        cells = line.split(",", len(fields) - 1)
        if len(cells) != len(fields):
            continue  # a cut-off line at the end of a capture
        rows.append({field: _value(field, cell) for field, cell in zip(fields, cells)})
    return rows


def parse_query_gpu(text: str) -> List[Dict[str, Value]]:
    """``--query-gpu`` rows: one per GPU, in nvidia-smi's order."""
    return parse_csv(text)


def number(row: Dict[str, Value], field: str) -> Optional[float]:
    """The numeric value of ``field`` in ``row``, or None (missing, [N/A], text)."""
    value = row.get(field)
    return value if isinstance(value, float) else None
