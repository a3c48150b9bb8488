"""Pure readers for HCCL environment settings: the ``HCCL_SOCKET_IFNAME`` grammar, the whitelist file, IPs.

``HCCL_SOCKET_IFNAME`` has the grammar of NCCL's ``NCCL_SOCKET_IFNAME`` (official HCCL reference page)::

    eth,enp        use interfaces whose name starts with eth or enp
    ^eth,enp       use any interface except those starting with eth or enp
    =eth0,enp0     use exactly eth0 or enp0          (so the shell line reads HCCL_SOCKET_IFNAME==eth0,enp0)
    ^=eth0,enp0    use any interface except exactly eth0 and enp0

>>> pattern = parse_socket_ifname("^=docker0,lo")
>>> pattern.exclude, pattern.exact, pattern.names
(True, True, ('docker0', 'lo'))
>>> pattern.matches("docker0"), pattern.matches("enp67s0f5")
(False, True)
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from npudoctor.parsers import jsondoc

# What may appear in a Linux interface name (IFNAMSIZ 16 with the NUL; no '/', ':' or white space).
_IFNAME = re.compile(r"^[A-Za-z0-9_.@-]{1,15}$")


@dataclass(frozen=True)
class IfnamePattern:
    """One ``HCCL_SOCKET_IFNAME`` value: ``^`` excludes, ``=`` wants exact names; both apply to all names."""

    exclude: bool
    exact: bool
    names: Tuple[str, ...]

    @property
    def form(self) -> str:
        """The rule in words, for messages."""
        names = " or ".join(self.names)
        which = names if self.exact else f"names starting with {names}"
        return f"any interface except {which}" if self.exclude else which

    def matches(self, interface: str) -> bool:
        hit = any(interface == name if self.exact else interface.startswith(name) for name in self.names)
        return hit != self.exclude

    def select(self, interfaces: Iterable[str]) -> List[str]:
        """The interfaces this rule lets HCCL use, in name order."""
        return sorted(name for name in interfaces if self.matches(name))


def parse_socket_ifname(value: str) -> IfnamePattern:
    """Parse an ``HCCL_SOCKET_IFNAME`` value; ValueError (one line, for the user) when it breaks the grammar.

    >>> parse_socket_ifname("eth,enp")
    IfnamePattern(exclude=False, exact=False, names=('eth', 'enp'))
    >>> parse_socket_ifname("=eth0")
    IfnamePattern(exclude=False, exact=True, names=('eth0',))
    >>> parse_socket_ifname("eth0,=enp0")
    Traceback (most recent call last):
    ...
    ValueError: '=enp0' is not an interface name: '^'/'=' must lead the whole list
    """
    rest = value.strip()
    if not rest:
        raise ValueError("empty value")
    exclude = rest.startswith("^")
    if exclude:
        rest = rest[1:]
    exact = rest.startswith("=")
    if exact:
        rest = rest[1:]
    names = [part.strip() for part in rest.split(",")]
    if not any(names):
        raise ValueError("no interface name after the '^'/'=' markers")
    for name in names:
        if not name:
            raise ValueError(f"empty name in the comma list {value.strip()!r}")
        if name[0] in "^=":
            raise ValueError(f"{name!r} is not an interface name: '^'/'=' must lead the whole list")
        if not _IFNAME.match(name):
            raise ValueError(
                f"{name!r} is not an interface name (letters, digits, '_', '.', '-', '@'; at most 15)"
            )
    return IfnamePattern(exclude, exact, tuple(names))


def default_interface_order(interfaces: Iterable[str]) -> List[str]:
    """The order HCCL tries host interfaces when neither HCCL_IF_IP nor HCCL_SOCKET_IFNAME is set.

    Official HCCL_IF_IP page: interfaces other than docker/lo by name (ascending), then docker, then lo.

    >>> default_interface_order(["lo", "docker0", "enp67s0f5", "enp189s0f0"])
    ['enp189s0f0', 'enp67s0f5', 'docker0', 'lo']
    """

    def rank(name: str) -> Tuple[int, str]:
        if name == "lo":
            return (2, name)
        if name.startswith("docker"):
            return (1, name)
        return (0, name)

    return sorted(interfaces, key=rank)


def parse_ip(value: str) -> Optional[Union[ipaddress.IPv4Address, ipaddress.IPv6Address]]:
    """An IPv4/IPv6 address (scope suffix ``%eth0`` dropped), or None when ``value`` is not one.

    >>> str(parse_ip("fe80::1%enp1")), parse_ip("10.10.10.300")
    ('fe80::1', None)
    """
    try:
        return ipaddress.ip_address(value.strip().split("%", 1)[0])
    except ValueError:
        return None


def interfaces_with_address(interfaces: Mapping[str, Sequence[str]], address: str) -> List[str]:
    """The host interfaces that carry ``address`` (compared as addresses, so IPv6 spellings agree).

    >>> interfaces_with_address({"lo": ["127.0.0.1", "::1"], "eth0": ["10.0.0.5"]}, "0:0::1")
    ['lo']
    """
    wanted = parse_ip(address)
    if wanted is None:
        return []
    return sorted(
        name for name, addresses in interfaces.items() if any(parse_ip(a) == wanted for a in addresses)
    )


@dataclass(frozen=True)
class Whitelist:
    """An HCCL whitelist file: ``host_ip`` entries, and those that are not valid IPv4 addresses."""

    host_ips: Tuple[str, ...]
    invalid: Tuple[str, ...] = ()  # "entry (reason)" for each bad host_ip entry
    notes: Tuple[str, ...] = ()  # things HCCL ignores but a person may expect to work


def parse_whitelist(text: str) -> Whitelist:
    """Read a whitelist file; ValueError (one line) when it is not ``{"host_ip": [...]}`` JSON.

    Official format: ``{ "host_ip": ["ip1", "ip2"], "device_ip": ["ip1", "ip2"] }``, addresses in dotted
    decimal; ``device_ip`` is reserved and not supported yet.

    >>> parse_whitelist('{ "host_ip": ["192.0.2.10", "192.0.2.300"] }').invalid
    ('192.0.2.300 (not an IP address)',)
    >>> parse_whitelist("{ host_ip: [] }")
    Traceback (most recent call last):
    ...
    ValueError: not valid JSON (Expecting property name enclosed in double quotes at line 1 column 3)
    """
    try:
        data = jsondoc.loads(text, "")
    except jsondoc.JsonDocumentError as exc:
        raise ValueError(str(exc)[2:]) from None
    if not isinstance(data, dict):
        raise ValueError(
            f'the top level must be an object {{"host_ip": [...]}}, not a JSON {type(data).__name__}'
        )
    if "host_ip" not in data:
        raise ValueError('no "host_ip" key')
    host_ip = data["host_ip"]
    if not isinstance(host_ip, list):
        raise ValueError(f'"host_ip" must be a list of addresses, not a JSON {type(host_ip).__name__}')
    entries: List[str] = []
    invalid: List[str] = []
    for entry in host_ip:
        if not isinstance(entry, str):
            invalid.append(f"{json.dumps(entry)} (not a string)")
            continue
        address = parse_ip(entry)
        if address is None or "%" in entry:
            invalid.append(f"{entry} (not an IP address)")
        elif address.version != 4 or entry.strip() != str(address):
            invalid.append(f"{entry} (HCCL expects dotted-decimal IPv4)")
        else:
            entries.append(entry.strip())
    notes: List[str] = []
    if data.get("device_ip"):
        notes.append('"device_ip" is reserved and not supported by HCCL yet; those entries are ignored')
    unknown = sorted(set(data) - {"host_ip", "device_ip"})
    if unknown:
        notes.append(f"unknown keys ignored: {', '.join(unknown)}")
    return Whitelist(tuple(entries), tuple(invalid), tuple(notes))
