"""The one way numbers with units are written for people (reports, the dashboard, findings' details).

>>> human_bytes(1048576), human_bytes(-1536), human_bytes(12), human_bytes(None)
('1.0 MiB', '-1.5 KiB', '12 B', '?')
>>> signed_bytes(1536), signed_bytes(-12), signed_bytes(None)
('+1.5 KiB', '-12 B', '-')
>>> percent(0.2964), percent(0.2964, 0), percent(None), confidence_percent(0.9996), confidence_percent(0.95)
('29.6%', '30%', '-', '>99.9%', '95.0%')
>>> duration_us(12.34), duration_us(1234.5)
('12.3 us', '1.23 ms')
"""

from __future__ import annotations

from typing import Any, Optional


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


def percent(share: Any, decimals: int = 1) -> str:
    """A share (0-1) as a percentage: one decimal in a sentence (``'29.6%'``), ``decimals=0`` in a table column
    or a limit (``'30%'``); ``-`` when it is not a number (unknown)."""
    if not isinstance(share, (int, float)):
        return "-"
    return f"{float(share) * 100:.{decimals}f}%"


def confidence_percent(probability: float) -> str:
    """A probability as people read it: ``>99.9%`` near certainty, where rounding would say ``100%``."""
    return ">99.9%" if probability >= 0.9995 else percent(probability)


# Below this confidence a trend test has seen no rise at all: "48% confidence of a rise" reads as half a leak.
RISE_SEEN = 0.75


def rise_phrase(probability: float, series: str = "") -> str:
    """A trend test's confidence of a rise in words a person reads right: "no sign of a rise in X (trend
    confidence 48.2%)" where it saw none, else "confidence of a rise in X: 97.0%"."""
    where = f" in {series}" if series else ""
    if probability < RISE_SEEN:
        return f"no sign of a rise{where} (trend confidence {percent(probability)})"
    return f"confidence of a rise{where}: {confidence_percent(probability)}"


def duration_us(us: float) -> str:
    """A duration given in microseconds: ``12.3 us`` below a millisecond, else ``1.23 ms``."""
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us"
