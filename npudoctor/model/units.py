"""The one way numbers with units are written for people (reports, the dashboard, findings' details).

>>> human_bytes(1048576), human_bytes(-1536), human_bytes(12), human_bytes(None)
('1.0 MiB', '-1.5 KiB', '12 B', '?')
>>> signed_bytes(1536), signed_bytes(-12), signed_bytes(None)
('+1.5 KiB', '-12 B', '-')
"""

from __future__ import annotations

from typing import Optional


def human_bytes(value: Optional[float]) -> str:
    """Binary units with one decimal (``1536 -> '1.5 KiB'``), the sign kept; ``?`` when unknown."""
    if value is None:
        return "?"
    sign = "-" if value < 0 else ""
    size = abs(float(value))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{sign}{size:.0f} {unit}" if unit == "B" else f"{sign}{size:.1f} {unit}"
        size /= 1024
    return f"{sign}{size:.1f} TiB"  # pragma: no cover - the loop always returns


def signed_bytes(value: Optional[float]) -> str:
    """A change per step, with its sign (``+1.0 MiB``); ``-`` when unknown."""
    if value is None:
        return "-"
    return ("+" if value >= 0 else "") + human_bytes(value)
