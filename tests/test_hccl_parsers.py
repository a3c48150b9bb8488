"""HCCL parsers on real text: hccn_tool answers, /etc/hccn.conf, the official HCCL env-variable pages."""

from __future__ import annotations

import re

import pytest

from npudoctor import api
from npudoctor.parsers.hccl_env import (
    IfnamePattern,
    default_interface_order,
    interfaces_with_address,
    parse_socket_ifname,
    parse_whitelist,
)
from npudoctor.parsers.hccn_tool import (
    DeviceIp,
    colon_fields,
    parse_device_ip,
    parse_hccn_conf,
    parse_link_status,
    parse_net_health,
)
from tests.samples import real_samples, sample_text


# -- hccn_tool answers ---------------------------------------------------------------------------------------
def test_link_status_from_real_and_constructed_answers():
    assert parse_link_status(sample_text("hccn_tool_link-g_UP_mindcluster-doc.txt")) == "UP"
    assert parse_link_status(sample_text("hccn_tool_link-g_DOWN.txt")) == "DOWN"
    assert parse_link_status("") is None
    assert parse_link_status("net health status: Success\n") is None


def test_net_health_keeps_the_status_words():
    assert parse_net_health(sample_text("hccn_tool_net_health-g_Success_mindcluster-doc.txt")) == "Success"
    assert (
        parse_net_health(sample_text("hccn_tool_net_health-g_SocketFailed_mindcluster-fixture.txt"))
        == "Socket failed"
    )
    assert parse_net_health("link status: UP\n") is None


def test_device_ip_real_blog_capture_and_empty_answer():
    assert parse_device_ip(sample_text("hccn_tool_ip-g_dev3_910B_arthurchiao-blog.txt")) == DeviceIp(
        "29.1.112.213", "255.255.0.0"
    )
    empty = parse_device_ip(sample_text("hccn_tool_ip-g_empty.txt"))
    assert empty == DeviceIp(None, None)
    assert not empty.is_set


def test_device_prefix_and_spaced_keys_are_read_by_structure():
    fields = colon_fields(sample_text("hccn_tool_link_stat-g_devid0_mindcluster-fixture.txt"))
    assert fields["link up count"] == "2"
    assert fields["current time"] == "Wed Aug  2 03:09:26 2022"


def test_hccn_conf_real_file_with_elided_devices():
    conf = parse_hccn_conf(sample_text("hccn.conf_8npu_elided_910B_arthurchiao-blog.txt"))
    assert sorted(conf) == [0, 7]  # the author elided 1..6 with '...'
    assert conf[0] == {
        "address": "29.1.137.205",
        "netmask": "255.255.0.0",
        "netdetect": "29.1.0.1",
        "gateway": "29.1.0.1",
        "send_arp_status": "1",
    }
    assert conf[7]["address"] == "29.1.170.143"


def test_hccn_conf_ignores_comments_and_junk():
    conf = parse_hccn_conf("# set by ops\naddress_12 = 10.0.0.12\n\ngarbage\naddress=1.2.3.4\n")
    assert conf == {12: {"address": "10.0.0.12"}}


def test_every_real_link_and_net_health_sample_parses():
    from tests.samples import strip_header

    seen = 0
    for path in real_samples("hccn_tool_*"):
        text = strip_header(path.read_text(encoding="utf-8"))
        if "_link-g_" in path.name:
            assert parse_link_status(text) in ("UP", "DOWN"), path.name
            seen += 1
        elif "_net_health-g_" in path.name:
            assert parse_net_health(text), path.name
            seen += 1
    assert seen >= 3


# -- HCCL_SOCKET_IFNAME grammar ------------------------------------------------------------------------------
def _doc_ifname_examples():
    """The ``export HCCL_SOCKET_IFNAME=...`` values quoted on the official HCCL reference page."""
    doc = sample_text("hccl_env-doc_HCCL_SOCKET_IFNAME_hccl.md.txt")
    return re.findall(r"export HCCL_SOCKET_IFNAME=(\S+?)(?:，|\s|$)", doc)


def test_every_example_of_the_official_page_parses_as_documented():
    examples = _doc_ifname_examples()
    # The page: eth,enp = use prefixes; ^eth,enp = exclude prefixes; ==eth0,enp0 (shell line) = use exactly;
    # ^=eth0,enp0 = exclude exactly; ==eth0,endvnic = use exactly.
    expected = {
        "eth,enp": IfnamePattern(False, False, ("eth", "enp")),
        "^eth,enp": IfnamePattern(True, False, ("eth", "enp")),
        "=eth0,enp0": IfnamePattern(False, True, ("eth0", "enp0")),
        "^=eth0,enp0": IfnamePattern(True, True, ("eth0", "enp0")),
        "=eth0,endvnic": IfnamePattern(False, True, ("eth0", "endvnic")),
    }
    assert sorted(examples) == sorted(expected)
    for value in examples:
        assert parse_socket_ifname(value) == expected[value]


@pytest.mark.parametrize(
    "value, interface, selected",
    [
        ("eth", "eth0", True),
        ("eth", "veth0", False),
        ("eth,enp", "enp67s0f5", True),
        ("^eth", "eth1", False),
        ("^eth", "enp1", True),
        ("=eth0", "eth0", True),
        ("=eth0", "eth01", False),
        ("^=eth0", "eth0", False),
        ("^=eth0", "eth01", True),
    ],
)
def test_pattern_forms_select_interfaces(value, interface, selected):
    assert parse_socket_ifname(value).matches(interface) is selected


@pytest.mark.parametrize(
    "value", ["", "  ", "^", "^=", "eth0,,enp", "eth 0", "eth0,^enp", "eth0,=enp", "a" * 16]
)
def test_values_breaking_the_grammar_are_rejected(value):
    with pytest.raises(ValueError):
        parse_socket_ifname(value)


def test_default_order_from_the_interfaces_hccl_listed_in_a_real_error():
    plog = sample_text("hccl_EI0001_HCCL_SOCKET_IFNAME-not-found_plog_hccl-doc.txt")
    interfaces = dict(re.findall(r"name\[(\S+?)\] ip\[([^\]%]+)", plog))
    assert interfaces == {"lo": "127.10.0.1", "enp": "127.10.0.2", "docker0": "172.17.0.1"}
    assert default_interface_order(interfaces) == ["enp", "docker0", "lo"]
    assert interfaces_with_address({k: [v] for k, v in interfaces.items()}, "172.17.0.1") == ["docker0"]


# -- whitelist file ------------------------------------------------------------------------------------------
def test_the_official_format_example_has_placeholder_ips_and_a_reserved_key():
    doc = sample_text("hccl_env-doc_HCCL_WHITELIST_FILE_hccl.md.txt")
    example = re.search(r"```text\n(.*?)\n```", doc, re.DOTALL)
    assert example is not None
    whitelist = parse_whitelist(example.group(1))
    assert whitelist.host_ips == ()
    assert whitelist.invalid == ("ip1 (not an IP address)", "ip2 (not an IP address)")
    assert any("device_ip" in note for note in whitelist.notes)


def test_constructed_whitelist_is_valid():
    whitelist = parse_whitelist(sample_text("hccl_whitelist_2hosts.json.txt"))
    assert whitelist.host_ips == ("192.0.2.10", "192.0.2.11")
    assert whitelist.invalid == () and whitelist.notes == ()


@pytest.mark.parametrize(
    "text, message",
    [
        ('["192.0.2.1"]', "top level must be an object"),
        ('{"device_ip": []}', 'no "host_ip" key'),
        ('{"host_ip": "192.0.2.1"}', "must be a list"),
        ('{"host_ip": ["192.0.2.1",]}', "not valid JSON"),
        ("", "not valid JSON"),
    ],
)
def test_malformed_whitelists_give_one_line_reasons(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_whitelist(text)


def test_whitelist_entries_that_are_not_dotted_ipv4():
    whitelist = parse_whitelist(
        '{"host_ip": ["192.0.2.1", "2001:db8::1", 17, "192.0.2.1%eth0", "300.1.1.1"]}'
    )
    assert whitelist.host_ips == ("192.0.2.1",)
    assert whitelist.invalid == (
        "2001:db8::1 (HCCL expects dotted-decimal IPv4)",
        "17 (not a string)",
        "192.0.2.1%eth0 (not an IP address)",
        "300.1.1.1 (not an IP address)",
    )


# -- profile vs the official reference ----------------------------------------------------------------------
def test_profile_connect_timeout_range_is_the_documented_one():
    doc = sample_text("hccl_env-doc_HCCL_CONNECT_TIMEOUT_hccl.md.txt")
    match = re.search(r"取值范围\\\[(\d+),(\d+)\\\]，默认值为(\d+)", doc)
    assert match is not None
    profile = api.load_profile()
    assert profile.get("hccl.connect_timeout_s.min") == int(match[1]) == int(match[3])
    assert profile.get("hccl.connect_timeout_s.max") == int(match[2])
