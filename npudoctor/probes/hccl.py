"""Probes of the hccl stage: HCCL environment, host interfaces, the whitelist file, hccn_tool per NPU.

Shell equivalents::

    env | grep ^HCCL_
    ip -o addr
    cat "$HCCL_WHITELIST_FILE"
    cat /etc/hccn.conf
    ls /dev/davinci*
    for i in <each /dev/davinci$i>; do
        hccn_tool -i $i -link -g; hccn_tool -i $i -net_health -g; hccn_tool -i $i -ip -g
    done
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npudoctor.knowledge import setting
from npudoctor.parsers.hccn_tool import (
    DeviceIp,
    parse_device_ip,
    parse_hccn_conf,
    parse_link_status,
    parse_net_health,
)
from npudoctor.probes import provides
from npudoctor.probes.pci import davinci_nodes
from npudoctor.probes.sources import Command

HCCN_TOOL = "hccn_tool"
# Where the driver package installs hccn_tool when it is not on PATH.
HCCN_TOOL_DIRS: Tuple[str, ...] = ("/usr/local/Ascend/driver/tools", "/usr/local/bin")
HCCN_CONF = "/etc/hccn.conf"
# The per-NPU queries, in the order they run: name -> hccn_tool arguments after "-i N".
HCCN_QUERY_ARGS: Mapping[str, Tuple[str, ...]] = {
    "link": ("-link", "-g"),
    "net_health": ("-net_health", "-g"),
    "ip": ("-ip", "-g"),
}
# HccnQuery.error of a call npudoctor did not start (a timeout or the time budget stopped the calls).
NOT_RUN = "not run: "


@dataclass(frozen=True)
class HcclEnv:
    """The ``HCCL_*`` variables set in the environment npudoctor runs in (the training job's, ideally)."""

    variables: Mapping[str, str]

    def get(self, name: str) -> Optional[str]:
        return self.variables.get(name)


@provides("hccl.env")
def hccl_env(ctx: Any) -> HcclEnv:
    """``env | grep ^HCCL_``"""
    environ = ctx.runner.environ()
    return HcclEnv({name: value for name, value in sorted(environ.items()) if name.startswith("HCCL_")})


@dataclass(frozen=True)
class WhitelistFile:
    """The file ``HCCL_WHITELIST_FILE`` names (``path`` None when the variable is unset)."""

    path: Optional[str]
    text: Optional[str] = None
    error: Optional[str] = None  # "not-found", "permission", "binary", "is-a-directory", ...


@provides("hccl.whitelist_file")
def whitelist_file(ctx: Any) -> WhitelistFile:
    """``cat "$HCCL_WHITELIST_FILE"``"""
    path = ctx.facts("hccl.env").get("HCCL_WHITELIST_FILE")
    if not path:
        return WhitelistFile(None)
    content = ctx.runner.read_text(path, max_bytes=1024 * 1024)
    return WhitelistFile(path, content.text, content.error)


@dataclass(frozen=True)
class HostInterfaces:
    """Host network interfaces: name -> addresses (IPv4 and IPv6, scope suffix removed)."""

    addresses: Mapping[str, Tuple[str, ...]]

    @property
    def names(self) -> List[str]:
        return sorted(self.addresses)

    def describe(self, names: Optional[List[str]] = None) -> str:
        """``lo (127.0.0.1), eth0 (10.0.0.5)``: interfaces with their addresses, for messages."""
        shown = self.names if names is None else names
        return (
            ", ".join(f"{n} ({', '.join(self.addresses.get(n, ())) or 'no address'})" for n in shown)
            or "none"
        )


@provides("hccl.interfaces")
def host_interfaces(ctx: Any) -> HostInterfaces:
    """``ip -o addr``"""
    raw = ctx.runner.net_interfaces()
    return HostInterfaces({name: tuple(addresses) for name, addresses in sorted(raw.items())})


@dataclass(frozen=True)
class HccnQuery:
    """One ``hccn_tool -i N ... -g`` call and what it printed."""

    command: str  # "hccn_tool -i 0 -link -g", for messages
    output: str = ""
    rc: Optional[int] = None
    # None when it ran; "timeout", "permission", ...; "not run: <why>" when npudoctor did not start it.
    error: Optional[str] = None
    duration_s: float = 0.0


@dataclass(frozen=True)
class HccnDevice:
    """What ``hccn_tool`` said about one NPU's RoCE port; a parsed value is None when the query gave none."""

    device_id: int
    queries: Mapping[str, HccnQuery]
    link_status: Optional[str] = None
    net_health: Optional[str] = None
    device_ip: Optional[DeviceIp] = None

    def parsed(self, query: str) -> Optional[object]:
        """The parsed answer of the query named ``query`` (a key of :data:`HCCN_QUERY_ARGS`)."""
        return {"link": self.link_status, "net_health": self.net_health, "ip": self.device_ip}[query]


@dataclass(frozen=True)
class HccnFacts:
    tool: Optional[str]  # resolved path, None when hccn_tool is not installed
    searched: Tuple[str, ...]  # where it was looked for besides PATH
    device_ids: Tuple[int, ...]
    devices_error: Optional[str]  # why /dev could not be listed
    devices: Tuple[HccnDevice, ...]
    timeout_s: float


def _device_ids(ctx: Any) -> Tuple[Tuple[int, ...], Optional[str]]:
    listing = ctx.runner.list_dir("/dev")
    return tuple(number for number, _name in davinci_nodes(listing.entries)), listing.error


@provides("hccl.hccn")
def hccn_tool_queries(ctx: Any) -> HccnFacts:
    """``ls /dev/davinci*``, then ``hccn_tool -i N -link -g``, ``-net_health -g`` and ``-ip -g`` for each NPU.

    Every call has the profile's ``commands.timeout_s``. Once ``hccl.hccn_tool.max_timeouts`` calls timed out,
    or the calls together took ``hccl.hccn_tool.budget_s``, the remaining calls are not started: a hanging
    driver costs one timeout, not one per NPU and query.
    """
    timeout_s = float(setting(ctx.profile, "commands.timeout_s"))
    max_timeouts = int(setting(ctx.profile, "hccl.hccn_tool.max_timeouts"))
    budget_s = float(setting(ctx.profile, "hccl.hccn_tool.budget_s"))
    device_ids, devices_error = _device_ids(ctx)
    tool = ctx.runner.which(HCCN_TOOL, HCCN_TOOL_DIRS)
    devices: List[HccnDevice] = []
    if tool is None or not device_ids:
        return HccnFacts(tool, HCCN_TOOL_DIRS, device_ids, devices_error, (), timeout_s)
    timeouts = 0
    spent_s = 0.0
    stop_reason: Optional[str] = None
    for device_id in device_ids:
        queries: Dict[str, HccnQuery] = {}
        for name, args in HCCN_QUERY_ARGS.items():
            argv = (HCCN_TOOL, "-i", str(device_id), *args)
            shown = " ".join(argv)
            if stop_reason is not None:
                queries[name] = HccnQuery(shown, error=NOT_RUN + stop_reason)
                continue
            result = ctx.runner.run(Command(argv, timeout_s=timeout_s, extra_dirs=HCCN_TOOL_DIRS))
            spent_s += result.duration_s
            queries[name] = HccnQuery(shown, result.output, result.rc, result.error, result.duration_s)
            if result.error == "timeout":
                timeouts += 1
                if timeouts >= max_timeouts:
                    stop_reason = (
                        f"`{shown}` timed out after {timeout_s:g} s, so the later calls were skipped"
                    )
            elif spent_s >= budget_s:
                stop_reason = f"hccn_tool calls took {spent_s:.0f} s in all (budget {budget_s:g} s)"
        devices.append(_parsed(device_id, queries))
    return HccnFacts(tool, HCCN_TOOL_DIRS, device_ids, devices_error, tuple(devices), timeout_s)


def _parsed(device_id: int, queries: Mapping[str, HccnQuery]) -> HccnDevice:
    def text(name: str) -> Optional[str]:
        query = queries[name]
        return query.output if query.error is None else None

    link, health, ip = text("link"), text("net_health"), text("ip")
    return HccnDevice(
        device_id,
        dict(queries),
        parse_link_status(link) if link is not None else None,
        parse_net_health(health) if health is not None else None,
        parse_device_ip(ip) if ip is not None and "ipaddr" in ip.lower() else None,
    )


@dataclass(frozen=True)
class HccnConf:
    """``/etc/hccn.conf``: the RoCE port settings the driver applies at boot, per NPU device id."""

    path: str
    devices: Mapping[int, Mapping[str, str]]
    error: Optional[str] = None


@provides("hccl.hccn_conf")
def hccn_conf(ctx: Any) -> HccnConf:
    """``cat /etc/hccn.conf``"""
    content = ctx.runner.read_text(HCCN_CONF)
    if content.text is None:
        return HccnConf(HCCN_CONF, {}, content.error or "unreadable")
    return HccnConf(HCCN_CONF, parse_hccn_conf(content.text))
