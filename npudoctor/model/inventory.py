"""The fields of a node's inventory (``report["inventory"]``), in the order reports and profiles list them.

One list for the probe that builds the inventory, the profile schema that lets a site pin it, the site
check that compares the two, and ``profile derive`` that writes the pins.
"""

from __future__ import annotations

from typing import Tuple

CHIP_FIELDS: Tuple[str, ...] = ("model", "family", "count", "hbm_mib", "bus_ids", "link_width", "link_speed_gts",
                                "npu_firmware")
SOFTWARE_FIELDS: Tuple[str, ...] = ("driver", "firmware", "cann_toolkit", "nnae", "python", "torch", "torch_npu")
SYSTEM_FIELDS: Tuple[str, ...] = ("os", "kernel", "arch")
# Every value a site profile may pin, as dotted keys under ``inventory:``.
PINNABLE: Tuple[str, ...] = (*(f"chips.{name}" for name in CHIP_FIELDS), *SOFTWARE_FIELDS, *SYSTEM_FIELDS)
