"""Pure readers of PCI sysfs attribute text (``/sys/bus/pci/devices/<bdf>/*``).

>>> parse_hex("0x19e5\\n")
6629
>>> parse_link_speed_gts("16.0 GT/s PCIe\\n"), parse_link_speed_gts("8 GT/s"), parse_link_speed_gts("Unknown")
(16.0, 8.0, None)
>>> parse_int("16\\n"), parse_int("")
(16, None)
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

_SPEED = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*GT/s")


def parse_hex(text: Optional[str]) -> Optional[int]:
    if not text:
        return None
    try:
        return int(text.strip(), 16)
    except ValueError:
        return None


def parse_int(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def parse_link_speed_gts(text: Optional[str]) -> Optional[float]:
    """``current_link_speed`` text to GT/s; None for "Unknown" (link down) or an unreadable value."""
    if not text:
        return None
    match = _SPEED.search(text)
    return float(match.group(1)) if match else None


def pcie_generation(speed_gts: Optional[float]) -> Optional[int]:
    """2.5 GT/s is Gen1, 5 Gen2, 8 Gen3, 16 Gen4, 32 Gen5, 64 Gen6.

    >>> pcie_generation(16.0), pcie_generation(32.0), pcie_generation(None)
    (4, 5, None)
    """
    table = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
    return table.get(speed_gts) if speed_gts is not None else None


# One counter line of an AER statistics file: a name (words, possibly with spaces on kernels before 5.4:
# "Receiver Error 2") and a count.
_AER_LINE = re.compile(r"^\s*(?P<name>[A-Za-z_][\w.-]{0,40}(?: [A-Za-z_][\w.-]{0,40}){0,6})\s+(?P<count>\d{1,20})\s*$")


def parse_aer_counts(text: Optional[str]) -> Optional[Tuple[int, Dict[str, int]]]:
    """(total, counters by name) of ``/sys/bus/pci/devices/<bdf>/aer_dev_{correctable,nonfatal,fatal}``; the
    total is the kernel's ``TOTAL_ERR_*`` line (it counts error messages, which may carry several errors),
    else the sum. None for a missing file or text with no counter line.

    The kernel's own sample (Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats), shortened:

    >>> parse_aer_counts("Receiver Error 2\\nBad TLP 0\\nTOTAL_ERR_COR 2\\n")
    (2, {'Receiver Error': 2, 'Bad TLP': 0})
    >>> parse_aer_counts("RxErr 0 BadTLP 0"), parse_aer_counts(None)
    (None, None)
    """
    if text is None:
        return None
    counters: Dict[str, int] = {}
    total: Optional[int] = None
    for line in text.splitlines()[:200]:
        match = _AER_LINE.match(line)
        if not match:
            continue
        count = int(match["count"])
        if match["name"].startswith("TOTAL_ERR_"):
            total = count
        else:
            counters[match["name"]] = count
    if not counters and total is None:
        return None
    return (total if total is not None else sum(counters.values())), counters
