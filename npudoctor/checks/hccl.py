"""Checks of the hccl stage: HCCL environment variables and each NPU's RoCE port (via hccn_tool).

HCCL is Ascend's NCCL. Its host-side settings (which NIC, whitelist, connect timeout) come from ``HCCL_*``
environment variables read when a communicator is created; the NPU-to-NPU traffic between servers runs over
a RoCE port built into every NPU, configured and queried with ``hccn_tool`` and ``/etc/hccn.conf``.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, List, Mapping, Optional, Sequence

from npudoctor.checks.registry import Outcome, by_severity, check, error, fail, passed, setting, skip, warn
from npudoctor.parsers.hccl_env import (
    default_interface_order,
    interfaces_with_address,
    parse_ip,
    parse_socket_ifname,
    parse_whitelist,
)
from npudoctor.probes.hccl import HCCN_QUERY_ARGS, NOT_RUN, HccnDevice, HccnFacts, HccnQuery, HostInterfaces

STAGE = "hccl"
WHITELIST_DISABLE = "HCCL_WHITELIST_DISABLE"
WHITELIST_FILE = "HCCL_WHITELIST_FILE"
IF_IP = "HCCL_IF_IP"
SOCKET_IFNAME = "HCCL_SOCKET_IFNAME"
CONNECT_TIMEOUT = "HCCL_CONNECT_TIMEOUT"


def _env(name: str) -> str:
    return f"env:{name}"


# -- helpers about host interfaces ---------------------------------------------------------------------------
def _usable(interfaces: HostInterfaces, names: Iterable[str]) -> List[str]:
    """Of ``names``, those with an IP address (HCCL takes the host IP from the interface)."""
    return [name for name in names if interfaces.addresses.get(name)]


def _suggested_interface(interfaces: HostInterfaces) -> str:
    """The interface to name in a fix: the first one HCCL's default order would take, not lo or docker."""
    for name in default_interface_order(_usable(interfaces, interfaces.names)):
        if name != "lo" and not name.startswith("docker"):
            return name
    return "<interface that reaches the other nodes>"


def _suggested_address(interfaces: HostInterfaces) -> str:
    name = _suggested_interface(interfaces)
    addresses = interfaces.addresses.get(name, ())
    ipv4 = [a for a in addresses if ":" not in a]
    return (ipv4 or list(addresses) or ["<this host's address on that network>"])[0]


# -- HCCL001 .. HCCL005: environment ----------------------------------------------------------------------
@check("HCCL001", stage=STAGE, needs_npu=True, title="HCCL whitelist switch (HCCL_WHITELIST_DISABLE)")
def whitelist_switch(ctx) -> Iterator[Outcome]:
    """HCCL_WHITELIST_DISABLE is 0 (whitelist on) or 1 (whitelist off); unset means 1.

    With the whitelist on, HCCL lets only the host IPs listed in the file named by HCCL_WHITELIST_FILE take
    part in collective communication; a node missing from the list cannot join the communicator. NCCL has no
    equivalent switch (it trusts the network). Any other value than 0 or 1 is a configuration error.

    Fix: ``export HCCL_WHITELIST_DISABLE=1`` (the default, as the TorchNPU env.sh sets it), or
    ``export HCCL_WHITELIST_DISABLE=0`` together with a valid HCCL_WHITELIST_FILE (see HCCL002).
    """
    value = ctx.facts("hccl.env").get(WHITELIST_DISABLE)
    subject = _env(WHITELIST_DISABLE)
    if value is None:
        yield passed(subject, "not set: HCCL's default is 1, whitelist off (no host IP check)")
    elif value == "1":
        yield passed(subject, "1: whitelist off (no host IP check)", {"value": value})
    elif value == "0":
        yield passed(
            subject,
            f"0: whitelist on: only host IPs listed in {WHITELIST_FILE} may communicate "
            "(the file is checked by HCCL002)",
            {"value": value},
        )
    else:
        yield fail(
            subject,
            f"{value!r} is not a valid value: HCCL accepts 0 (whitelist on) or 1 (off)",
            {"value": value},
            fix=f"export {WHITELIST_DISABLE}=1",
        )


@check("HCCL002", stage=STAGE, needs_npu=True, title="HCCL whitelist file (HCCL_WHITELIST_FILE)")
def whitelist_file(ctx) -> Iterator[Outcome]:
    """With the whitelist on, HCCL_WHITELIST_FILE names a readable JSON ``{"host_ip": [...]}`` of valid IPs.

    HCCL reads this file at communicator creation when HCCL_WHITELIST_DISABLE=0; a missing, unreadable or
    malformed file, or an empty list, stops collective communication. Per the HCCL reference the addresses are
    dotted-decimal IPv4 host IPs of every node; ``device_ip`` is reserved and ignored. This check also warns
    when none of this host's own addresses is listed, since nodes sharing the file would then refuse it.

    Fix: write the file, e.g. ``{"host_ip": ["192.0.2.10", "192.0.2.11"]}``, and
    ``export HCCL_WHITELIST_FILE=/path/to/whitelist.json``; or turn the whitelist off with
    ``export HCCL_WHITELIST_DISABLE=1``.
    """
    env = ctx.facts("hccl.env")
    switch = env.get(WHITELIST_DISABLE)
    path = env.get(WHITELIST_FILE)
    if switch is None or switch == "1":
        state = f"{WHITELIST_DISABLE} is not set (default 1)" if switch is None else f"{WHITELIST_DISABLE}=1"
        note = f"; {WHITELIST_FILE}={path} is not read" if path else ""
        yield skip(f"whitelist is off: {state}{note}", _env(WHITELIST_FILE))
        return
    if switch != "0":
        yield skip(f"{WHITELIST_DISABLE}={switch!r} is invalid (see HCCL001)", _env(WHITELIST_FILE))
        return
    off_fix = f"or turn the whitelist off: export {WHITELIST_DISABLE}=1"
    if not path:
        yield fail(
            _env(WHITELIST_FILE),
            f"the whitelist is on ({WHITELIST_DISABLE}=0) but {WHITELIST_FILE} is "
            "not set, so HCCL has no list of allowed hosts",
            fix=f"export {WHITELIST_FILE}=/path/to/whitelist.json  "
            f'# {{"host_ip": ["<host IP of each node>"]}}; {off_fix}',
        )
        return
    content = ctx.facts("hccl.whitelist_file")
    subject = f"file:{path}"
    if content.text is None:
        reason = {
            "not-found": "does not exist",
            "permission": "is not readable (permission denied)",
            "is-a-directory": "is a directory",
            "binary": "is a binary file",
        }.get(content.error or "", f"cannot be read ({content.error})")
        yield fail(
            subject,
            f"{WHITELIST_FILE}={path} {reason}",
            {"error": content.error},
            fix=f'create {path} with {{"host_ip": ["<host IP of each node>"]}}; {off_fix}',
        )
        return
    try:
        whitelist = parse_whitelist(content.text)
    except ValueError as exc:
        yield fail(
            subject,
            f'{path}: {exc}; HCCL expects {{"host_ip": ["ip1", "ip2"]}}',
            fix=f'rewrite {path} as {{"host_ip": ["<host IP of each node>"]}}; {off_fix}',
        )
        return
    evidence = {"host_ip_count": len(whitelist.host_ips), "host_ips": list(whitelist.host_ips)}
    notes = "".join(f"; {note}" for note in whitelist.notes)
    if whitelist.invalid:
        yield fail(
            subject,
            f"invalid host_ip entries: {', '.join(whitelist.invalid)}{notes}",
            dict(evidence, invalid=list(whitelist.invalid)),
            fix=f"correct or remove those entries in {path}",
        )
        return
    if not whitelist.host_ips:
        yield fail(
            subject,
            f"host_ip is empty: no host may communicate{notes}",
            evidence,
            fix=f'list the host IP of each node in {path}: {{"host_ip": ["<ip1>", "<ip2>"]}}',
        )
        return
    interfaces = ctx.facts("hccl.interfaces")
    own = sorted({a for a in whitelist.host_ips if interfaces_with_address(interfaces.addresses, a)})
    if interfaces.addresses and not own:
        yield warn(
            subject,
            f"{len(whitelist.host_ips)} valid host IPs, but none of them is an address of this "
            f"host ({interfaces.describe()}); nodes using the same list will refuse this one{notes}",
            evidence,
            fix=f"add this host's address ({_suggested_address(interfaces)}) to host_ip in {path}",
        )
        return
    yield passed(
        subject, f"{len(whitelist.host_ips)} valid host IPs{notes}", dict(evidence, this_host_ips=own)
    )


@check("HCCL003", stage=STAGE, needs_npu=True, title="HCCL_IF_IP is an address of this host")
def if_ip(ctx) -> Iterator[Outcome]:
    """HCCL_IF_IP, when set, is one IPv4/IPv6 address that an interface of this host carries.

    HCCL_IF_IP picks the host address HCCL uses to reach the root node when a communicator is created from
    root info (as NCCL does with NCCL_SOCKET_IFNAME, but by address). It takes priority over
    HCCL_SOCKET_IFNAME. A wrong address (copied from another node, or a stale DHCP lease) makes the root rank
    fail to listen on it (EI0019 "listen on ip[...] ... fail") or the other ranks time out (EI0006).
    A loopback address only works when every rank is on this host.

    Fix: ``export HCCL_IF_IP=<this host's address on the network the nodes share>``, or unset it and use
    HCCL_SOCKET_IFNAME.
    """
    value = ctx.facts("hccl.env").get(IF_IP)
    subject = _env(IF_IP)
    if value is None:
        yield skip(
            f"not set: HCCL picks the host interface from {SOCKET_IFNAME}, or by its default order "
            "(see HCCL004)",
            subject,
        )
        return
    interfaces = ctx.facts("hccl.interfaces")
    fix = f"export {IF_IP}={_suggested_address(interfaces)}"
    if len(value.replace(",", " ").split()) > 1:
        yield fail(subject, f"{value!r}: HCCL takes exactly one address", {"value": value}, fix=fix)
        return
    address = parse_ip(value)
    if address is None or "%" in value:
        yield fail(subject, f"{value!r} is not an IPv4 or IPv6 address", {"value": value}, fix=fix)
        return
    if not interfaces.addresses:
        yield skip("the host's interfaces could not be listed, so the address cannot be compared", subject)
        return
    owners = interfaces_with_address(interfaces.addresses, value)
    evidence = {"value": value, "interfaces": owners}
    if not owners:
        yield fail(
            subject,
            f"{value} is not an address of this host; its interfaces: {interfaces.describe()}",
            evidence,
            fix=fix,
        )
    elif owners == ["lo"]:
        yield warn(
            subject,
            f"{value} is on the loopback interface lo: only ranks on this host can reach it",
            evidence,
            fix=fix,
        )
    else:
        yield passed(subject, f"{value} is on {', '.join(owners)}", evidence)


@check("HCCL004", stage=STAGE, needs_npu=True, title="HCCL_SOCKET_IFNAME matches an interface of this host")
def socket_ifname(ctx) -> Iterator[Outcome]:
    """HCCL_SOCKET_IFNAME selects at least one interface of this host that has an IP address.

    This is HCCL's NCCL_SOCKET_IFNAME, with the same grammar: ``eth,enp`` (name prefixes), ``^eth`` (all but
    those prefixes), ``=eth0,enp0`` (exact names; the shell line reads ``HCCL_SOCKET_IFNAME==eth0,enp0``) and
    ``^=eth0`` (all but those names). The ``^``/``=`` markers apply to the whole comma list. HCCL takes the
    first match; if nothing matches it stops at init with EI0001 "set ifname to [...] by HCCL_SOCKET_IFNAME,
    but not found in the environment". HCCL_IF_IP, when set, takes priority and this variable is ignored.

    Unset, HCCL picks an interface by itself: anything but docker/lo by name (ascending), then docker, then
    lo. That choice is reported, and warned about when it is docker or lo (other nodes usually cannot reach
    those).

    Fix: ``export HCCL_SOCKET_IFNAME=<interface that reaches the other nodes>`` (see ``ip -o addr``).
    """
    env = ctx.facts("hccl.env")
    value = env.get(SOCKET_IFNAME)
    subject = _env(SOCKET_IFNAME)
    if env.get(IF_IP) is not None:
        shown = "not set" if value is None else f"{value!r} is ignored"
        yield skip(f"{IF_IP} is set and takes priority; {SOCKET_IFNAME} {shown}", subject)
        return
    interfaces = ctx.facts("hccl.interfaces")
    if not interfaces.addresses:
        yield skip("the host's interfaces could not be listed", subject)
        return
    fix = f"export {SOCKET_IFNAME}={_suggested_interface(interfaces)}"
    if value is None:
        yield from _default_interface(interfaces, subject, fix)
        return
    try:
        pattern = parse_socket_ifname(value)
    except ValueError as exc:
        yield fail(subject, f"{value!r}: {exc}", {"value": value}, fix=fix)
        return
    matched = pattern.select(interfaces.names)
    usable = _usable(interfaces, default_interface_order(matched))
    evidence = {"value": value, "matched": matched, "usable": usable}
    if not matched:
        yield fail(
            subject,
            f"{value!r} ({pattern.form}) matches no interface of this host; HCCL stops with "
            f'EI0001 "set ifname to [{value}] by HCCL_SOCKET_IFNAME, but not found in the '
            f'environment"; interfaces here: {interfaces.describe()}',
            evidence,
            fix=fix,
        )
    elif not usable:
        yield fail(
            subject,
            f"{value!r} matches {', '.join(matched)} but none has an IP address, so HCCL cannot "
            'get a host IP from it ("get host ip fail by socket Ifname")',
            evidence,
            fix=fix,
        )
    elif all(name == "lo" for name in usable):
        yield warn(
            subject, f"{value!r} leaves only lo: only ranks on this host can connect", evidence, fix=fix
        )
    else:
        yield passed(subject, f"{value!r} ({pattern.form}) matches {interfaces.describe(usable)}", evidence)


def _default_interface(interfaces: HostInterfaces, subject: str, fix: str) -> Iterator[Outcome]:
    order = default_interface_order(_usable(interfaces, interfaces.names))
    evidence = {"default_order": order}
    if not order:
        yield fail(
            subject,
            f"not set, and no interface of this host has an IP address ({interfaces.describe()})",
            evidence,
            fix=fix,
        )
        return
    chosen = order[0]
    described = interfaces.describe([chosen])
    if chosen == "lo" or chosen.startswith("docker"):
        yield warn(
            subject,
            f"not set: HCCL will use {described}, since no other interface has an address; "
            "other nodes usually cannot reach it",
            evidence,
            fix=fix,
        )
    else:
        yield passed(
            subject,
            f"not set: HCCL will use {described}, the first interface by name other than "
            f"docker/lo; if the nodes reach each other over another NIC, set {SOCKET_IFNAME}",
            evidence,
        )


@check("HCCL005", stage=STAGE, needs_npu=True, title="HCCL_CONNECT_TIMEOUT within HCCL's range",
       settings=("hccl.connect_timeout_s.min", "hccl.connect_timeout_s.max"))
def connect_timeout(ctx) -> Iterator[Outcome]:
    """HCCL_CONNECT_TIMEOUT, when set, is an integer number of seconds in HCCL's range [120, 7200].

    It bounds how long ranks wait for each other while HCCL sets up its socket links at communicator creation
    (NCCL has no direct equivalent; its bootstrap waits are fixed). HCCL waits the value plus 20 s; the
    default is 120 s. Large clusters whose ranks start seconds apart may need more; a value HCCL rejects stops
    the job at init. The range comes from the profile (``hccl.connect_timeout_s``).

    Fix: ``export HCCL_CONNECT_TIMEOUT=600`` (any integer in the range).
    """
    low = int(setting(ctx, "hccl.connect_timeout_s.min"))
    high = int(setting(ctx, "hccl.connect_timeout_s.max"))
    value = ctx.facts("hccl.env").get(CONNECT_TIMEOUT)
    subject = _env(CONNECT_TIMEOUT)
    range_text = f"[{low}, {high}]"
    if value is None:
        yield passed(
            subject,
            f"not set: HCCL's default is {low} s (it waits {low + 20} s for links)",
            {"connect_timeout_s": low},
        )
        return
    try:
        seconds = int(value.strip())
    except ValueError:
        yield fail(
            subject,
            f"{value!r} is not an integer number of seconds; HCCL accepts an integer in {range_text}",
            {"value": value},
            fix=f"export {CONNECT_TIMEOUT}={low}",
        )
        return
    evidence = {"connect_timeout_s": seconds, "min_s": low, "max_s": high}
    if seconds < low or seconds > high:
        nearest = min(max(seconds, low), high)
        yield fail(
            subject,
            f"{seconds} s is outside HCCL's range {range_text}",
            evidence,
            fix=f"export {CONNECT_TIMEOUT}={nearest}",
        )
    else:
        yield passed(subject, f"{seconds} s (HCCL waits {seconds + 20} s for links)", evidence)


# -- HCCL006, HCCL010 .. HCCL013: hccn_tool per NPU -------------------------------------------------------
def _tool_missing_reason(facts: HccnFacts) -> str:
    return f"hccn_tool not found on PATH nor in {', '.join(facts.searched)}"


@check("HCCL006", stage=STAGE, needs_npu=True, title="hccn_tool is available for the RoCE port checks",
       settings=("commands.timeout_s", "hccl.hccn_tool.max_timeouts", "hccl.hccn_tool.budget_s"))
def hccn_tool_present(ctx) -> Iterator[Outcome]:
    """hccn_tool, the NPU driver's RoCE port tool, is installed, so HCCL010-HCCL013 can query each NPU.

    hccn_tool plays the part of ``ibstat``/``ibv_devinfo``/``ethtool`` for the RoCE NIC inside each NPU, the
    ports HCCL uses between servers. It ships with the driver in /usr/local/Ascend/driver/tools. Without it
    the port checks are SKIPPED (never counted as passed).

    Fix: install the NPU driver package, or run npudoctor on the host; in a container mount
    ``/usr/local/Ascend/driver`` (and ``/etc/hccn.conf``) from the host.
    """
    facts = ctx.facts("hccl.hccn")
    if facts.tool is None:
        # The driver check may have passed: then the driver is there and only its tools folder is not.
        driver_installed = ctx.facts("ascend_driver").driver.present
        yield skip(
            f"{_tool_missing_reason(facts)}: the RoCE port checks (HCCL010-HCCL013) cannot run",
            "hccn_tool",
            fix=("the driver is installed without its tools: mount /usr/local/Ascend/driver/tools (hccn_tool) "
                 "into the container, or run npudoctor on the host" if driver_installed else
                 "install the NPU driver (it ships /usr/local/Ascend/driver/tools/hccn_tool), "
                 "or mount /usr/local/Ascend/driver into the container"),
        )
    else:
        yield passed("hccn_tool", f"found at {facts.tool}", {"path": facts.tool})


def _not_applicable(facts: HccnFacts) -> Optional[Outcome]:
    """A SKIP/ERROR when no NPU can be queried at all, else None."""
    if facts.tool is None:
        return skip(f"{_tool_missing_reason(facts)} (see HCCL006)", "hccn_tool")
    if facts.devices_error not in (None, "not-found") and not facts.device_ids:
        return error(f"cannot list /dev ({facts.devices_error}) to find the NPUs", "/dev")
    if not facts.device_ids:
        return skip(
            "no /dev/davinci<N> device nodes: no NPU is visible here (in a container, pass "
            "--device=/dev/davinci<N>)",
            "/dev",
        )
    return None


def _query_failed(query: HccnQuery, facts: HccnFacts, subject: str, expected: str) -> Outcome:
    """The ERROR for a query that gave no answer to judge."""
    if query.error == "timeout":
        return error(
            f"`{query.command}` timed out after {facts.timeout_s:g} s",
            subject,
            {"timeout_s": facts.timeout_s},
        )
    if query.error:
        return error(f"`{query.command}` could not run: {query.error}", subject)
    shown = " ".join(query.output.split())[:200] or "(no output)"
    return error(
        f"`{query.command}` exited {query.rc} without a '{expected}' line: {shown}", subject, {"rc": query.rc}
    )


def _per_npu(
    ctx,
    query_name: str,
    expected: str,
    judge: Callable[[HccnDevice, str], Optional[Outcome]],
    passed_detail: str,
) -> Iterator[Outcome]:
    """Run ``judge`` on every NPU whose ``query_name`` answered; PASSes are merged into one finding, and so
    are the NPUs whose query was not started (after a timeout), so a hanging driver gives few findings.

    ``judge`` returns None for a passing NPU, or its WARN/FAIL outcome.
    """
    facts = ctx.facts("hccl.hccn")
    blocked = _not_applicable(facts)
    if blocked is not None:
        yield blocked
        return
    good: List[int] = []
    not_run: List[int] = []
    not_run_reason = ""
    for device in facts.devices:
        subject = f"npu:{device.device_id}"
        query = device.queries[query_name]
        if query.error and query.error.startswith(NOT_RUN):
            not_run.append(device.device_id)
            not_run_reason = query.error
            continue
        if device.parsed(query_name) is None:
            yield _query_failed(query, facts, subject, expected)
            continue
        outcome = judge(device, subject)
        if outcome is None:
            good.append(device.device_id)
        else:
            yield outcome
    if not_run:
        command = f"hccn_tool -i N {' '.join(HCCN_QUERY_ARGS[query_name])}"
        yield error(f"`{command}` {not_run_reason}", _npus(not_run), {"npus": not_run})
    if good:
        yield passed(
            _npus(good), f"{passed_detail} on {len(good)} NPU{'s' if len(good) > 1 else ''}", {"npus": good}
        )


def _npus(ids: Sequence[int]) -> str:
    return "npu:" + ",".join(str(i) for i in ids)


@check("HCCL010", stage=STAGE, needs_npu=True, title="NPU RoCE link is UP (hccn_tool -link -g)",
       settings=("commands.timeout_s", "hccl.hccn_tool.max_timeouts", "hccl.hccn_tool.budget_s"))
def roce_link(ctx) -> Iterator[Outcome]:
    """Each NPU's RoCE port reports ``link status: UP`` (``hccn_tool -i N -link -g``).

    A DOWN port is like an InfiniBand HCA port in state Down (``ibstat``): HCCL traffic between servers
    cannot use that NPU, and multi-node jobs hang at link setup (EI0006) or fail. Causes: unplugged or faulty
    cable/optical module, switch port down, port not configured.

    Fix: check the cable and optical module (``hccn_tool -i N -optical -g``), the link history
    (``hccn_tool -i N -link_stat -g``) and the switch port; then re-check ``hccn_tool -i N -link -g``.
    """

    def judge(device: HccnDevice, subject: str) -> Optional[Outcome]:
        if device.link_status == "UP":
            return None
        n = device.device_id
        return fail(
            subject,
            f"link status: {device.link_status} (`hccn_tool -i {n} -link -g`)",
            {"link_status": device.link_status},
            fix=f"check the cable/optical module and switch port: hccn_tool -i {n} -optical -g; "
            f"hccn_tool -i {n} -link_stat -g",
        )

    yield from _per_npu(ctx, "link", "link status", judge, "link status: UP")


@check("HCCL011", stage=STAGE, needs_npu=True, title="NPU network health is Success (hccn_tool -net_health -g)",
       settings=("commands.timeout_s", "hccl.hccn_tool.max_timeouts", "hccl.hccn_tool.budget_s"))
def net_health(ctx) -> Iterator[Outcome]:
    """Each NPU's RoCE port reports ``net health status: Success`` (``hccn_tool -i N -net_health -g``).

    The driver keeps probing a detect address (``netdetect_N`` in /etc/hccn.conf, usually the gateway) from
    each NPU's port; Success means it answers. ``Socket failed``/``Fault`` mean the port cannot reach its
    network; ``Init`` means detection has not produced a result (often: no detect address configured). There
    is no single NCCL equivalent; it is like pinging the fabric from each HCA.

    Fix: check the link (HCCL010), the detect address (``hccn_tool -i N -netdetect -g``), the gateway and the
    switch; after a repair ``hccn_tool -i N -cfg recovery`` resets the state.
    """
    conf = ctx.facts("hccl.hccn_conf")

    def judge(device: HccnDevice, subject: str) -> Optional[Outcome]:
        health = device.net_health or ""
        if health.lower() == "success":
            return None
        n = device.device_id
        detect = conf.devices.get(n, {}).get("netdetect")
        evidence = {"net_health": health, "netdetect": detect}
        if health.lower() == "init":
            return warn(
                subject,
                f"net health status: {health}: detection has no result yet",
                evidence,
                fix=f"hccn_tool -i {n} -netdetect -s address {detect or '<gateway IP>'}",
            )
        target = f"the detect address {detect}" if detect else "its detect address"
        return fail(
            subject,
            f"net health status: {health}: the port cannot reach {target}",
            evidence,
            fix=f"hccn_tool -i {n} -netdetect -g; check link (HCCL010), gateway and switch; "
            f"then hccn_tool -i {n} -net_health -g",
        )

    yield from _per_npu(ctx, "net_health", "net health status", judge, "net health status: Success")


def _set_ip_fix(device_id: int, conf_entry: Mapping[str, str]) -> str:
    address = conf_entry.get("address", "<address>")
    netmask = conf_entry.get("netmask", "<netmask>")
    return f"hccn_tool -i {device_id} -ip -s address {address} netmask {netmask}"


@check("HCCL012", stage=STAGE, needs_npu=True, title="NPU RoCE port has an IP (hccn_tool -ip -g)",
       settings=("hccl.device_ip_missing", "commands.timeout_s", "hccl.hccn_tool.max_timeouts",
                 "hccl.hccn_tool.budget_s"))
def device_ip_set(ctx) -> Iterator[Outcome]:
    """Each NPU's RoCE port has an IP address (``hccn_tool -i N -ip -g`` prints ``ipaddr:<ip>``).

    These are the ``device_ip`` addresses of the HCCL rank table; HCCL between servers needs them, as NCCL
    needs an address on each RoCE HCA. A port without an address cannot carry multi-node traffic (single
    server jobs use HCCS and do not need it). The severity is the profile's ``hccl.device_ip_missing``.

    Fix: ``hccn_tool -i N -ip -s address <ip> netmask <mask>`` (the values from /etc/hccn.conf, when it has
    them); npudoctor prints the command, it never runs it.
    """
    conf = ctx.facts("hccl.hccn_conf")
    report = by_severity(ctx, "hccl.device_ip_missing")

    def judge(device: HccnDevice, subject: str) -> Optional[Outcome]:
        assert device.device_ip is not None
        if device.device_ip.is_set:
            return None
        entry = conf.devices.get(device.device_id, {})
        return report(
            subject,
            "the RoCE port has no IP address (`hccn_tool -i "
            f"{device.device_id} -ip -g` prints an empty ipaddr)",
            {"ipaddr": None},
            fix=_set_ip_fix(device.device_id, entry),
        )

    yield from _per_npu(ctx, "ip", "ipaddr", judge, "RoCE IP set")


@check("HCCL013", stage=STAGE, needs_npu=True, title="NPU RoCE IP matches /etc/hccn.conf",
       settings=("commands.timeout_s", "hccl.hccn_tool.max_timeouts", "hccl.hccn_tool.budget_s"))
def device_ip_matches_conf(ctx) -> Iterator[Outcome]:
    """Each NPU's live RoCE address and netmask equal ``address_N``/``netmask_N`` in /etc/hccn.conf.

    /etc/hccn.conf is where ``hccn_tool -ip -s`` records each port's settings, and rank tables are often
    built from it (``device_ip``). A live address that differs from the file (set by hand, or a stale file
    copied from another node) means peers connect to the wrong address (EI0006 timeouts) and the setting
    changes at the next reboot. SKIPPED when the file is absent (containers often do not mount it).

    Fix: apply the file's values with the printed ``hccn_tool -i N -ip -s address ... netmask ...``, or
    correct the file if the live address is the right one.
    """
    conf = ctx.facts("hccl.hccn_conf")
    facts = ctx.facts("hccl.hccn")
    if _not_applicable(facts) is None and conf.error is not None:
        yield skip(
            f"{conf.path} cannot be read ({conf.error}); in a container mount it from the host",
            f"file:{conf.path}",
        )
        return

    def judge(device: HccnDevice, subject: str) -> Optional[Outcome]:
        assert device.device_ip is not None
        n = device.device_id
        entry = conf.devices.get(n, {})
        live = device.device_ip
        evidence = {
            "ipaddr": live.address,
            "netmask": live.netmask,
            "conf_address": entry.get("address"),
            "conf_netmask": entry.get("netmask"),
        }
        if "address" not in entry:
            return warn(
                subject,
                f"{conf.path} has no address_{n}; the live address {live.address or '(none)'} "
                "is not recorded there",
                evidence,
                fix=f"record it: hccn_tool -i {n} -ip -s address {live.address or '<address>'} "
                f"netmask {live.netmask or '<netmask>'}",
            )
        differences = []
        if not _same_ip(live.address, entry.get("address")):
            differences.append(f"address {live.address or '(none)'} vs address_{n}={entry.get('address')}")
        if "netmask" in entry and not _same_ip(live.netmask, entry.get("netmask")):
            differences.append(f"netmask {live.netmask or '(none)'} vs netmask_{n}={entry.get('netmask')}")
        if not differences:
            return None
        return fail(
            subject,
            f"live RoCE settings differ from {conf.path}: {'; '.join(differences)}",
            evidence,
            fix=f"{_set_ip_fix(n, entry)}  (or correct {conf.path} if the live value is right)",
        )

    yield from _per_npu(ctx, "ip", "ipaddr", judge, f"RoCE IP matches {conf.path}")


def _same_ip(left: Optional[str], right: Optional[str]) -> bool:
    if left is None or right is None:
        return left == right
    a, b = parse_ip(left), parse_ip(right)
    return a == b if a is not None and b is not None else left.strip() == right.strip()
