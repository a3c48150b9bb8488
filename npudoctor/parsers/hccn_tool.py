"""Pure readers for ``hccn_tool`` answers and ``/etc/hccn.conf`` (the NPU RoCE port settings).

``hccn_tool`` is Huawei's tool for the RoCE NIC built into each NPU (the ports HCCL uses between nodes, as
NCCL uses InfiniBand/RoCE HCAs). Its ``-g`` (get) answers are ``key: value`` or ``key:value`` lines, sometimes
prefixed with ``[devid N]``; keys are matched case-insensitively, never by column.

>>> parse_link_status("link status: UP\\n")
'UP'
>>> parse_net_health("net health status: Socket failed\\n")
'Socket failed'
>>> parse_device_ip("ipaddr:29.1.112.213\\nnetmask:255.255.0.0\\n")
DeviceIp(address='29.1.112.213', netmask='255.255.0.0')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional

# "[devid 0]" / "[device 0]" prefixes seen on -link_stat and -hw_stats answers.
_DEVICE_PREFIX = re.compile(r"^\s*\[(?:devid|device)\s+\d+\]\s*", re.IGNORECASE)
# "address_0=29.1.137.205": a key, an underscore, the NPU device id, "=", the value.
_CONF_LINE = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z0-9_]*?)_(?P<device>\d+)\s*=\s*(?P<value>.*?)\s*$")


def colon_fields(text: str) -> Dict[str, str]:
    """``key: value`` lines to a dict with lower-case keys (first occurrence wins); other lines are ignored.

    >>> colon_fields("[devid 0]link up count       : 2\\nnetmask:255.255.0.0\\n")
    {'link up count': '2', 'netmask': '255.255.0.0'}
    """
    fields: Dict[str, str] = {}
    for line in text.splitlines():
        line = _DEVICE_PREFIX.sub("", line)
        if ":" not in line:
            continue
        key, value = line.split(":", 1)
        key = " ".join(key.split()).lower()
        if key and key not in fields:
            fields[key] = value.strip()
    return fields


def parse_link_status(text: str) -> Optional[str]:
    """The RoCE port state from ``hccn_tool -i N -link -g`` (``UP`` or ``DOWN``), None if the answer has none.

    >>> parse_link_status("link status: DOWN") is None
    False
    >>> parse_link_status("Command execute failed!") is None
    True
    """
    value = colon_fields(text).get("link status")
    return value.upper() if value else None


def parse_net_health(text: str) -> Optional[str]:
    """The network health from ``hccn_tool -i N -net_health -g``, as printed.

    Values: ``Success`` (the detect address answers), ``Socket failed``, ``Fault``, ``Init`` ...
    """
    return colon_fields(text).get("net health status") or None


@dataclass(frozen=True)
class DeviceIp:
    """The RoCE port address from ``hccn_tool -i N -ip -g``; None for a value that is not set."""

    address: Optional[str]
    netmask: Optional[str]

    @property
    def is_set(self) -> bool:
        return bool(self.address)


def parse_device_ip(text: str) -> DeviceIp:
    """``ipaddr:<ip>`` / ``netmask:<mask>`` lines; an empty value (no IP configured) becomes None.

    >>> parse_device_ip("ipaddr:\\nnetmask:\\n")
    DeviceIp(address=None, netmask=None)
    """
    fields = colon_fields(text)
    return DeviceIp(fields.get("ipaddr") or None, fields.get("netmask") or None)


def parse_hccn_conf(text: str) -> Dict[int, Dict[str, str]]:
    """``/etc/hccn.conf`` to ``{device_id: {"address": ..., "netmask": ..., ...}}``.

    Lines are ``<key>_<device id>=<value>`` (``address``, ``netmask``, ``netdetect``, ``gateway``,
    ``send_arp_status``, ``tls_enable`` ...); comments, blank lines and anything else are skipped.

    >>> conf = parse_hccn_conf("address_0=29.1.137.205\\nnetmask_0=255.255.0.0\\nsend_arp_status_0=1\\n...")
    >>> conf[0]["address"], conf[0]["send_arp_status"]
    ('29.1.137.205', '1')
    """
    devices: Dict[int, Dict[str, str]] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = _CONF_LINE.match(line)
        if match:
            devices.setdefault(int(match["device"]), {})[match["key"].lower()] = match["value"]
    return devices
