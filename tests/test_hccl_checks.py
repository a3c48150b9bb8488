"""The hccl stage end to end: fake nodes built from real samples, run through ``api.run_checks``."""

from __future__ import annotations

import re
import time
from typing import Dict, List, Mapping, Optional, Sequence

import pytest

from npudoctor import api
from npudoctor.api import findings_by_id
from npudoctor.model.finding import Finding, Report, Status
from npudoctor.model.profile import NodeProfile, deep_merge
from tests.findings import one_finding, statuses_by_subject
from tests.samples import sample_text

PASS, WARN, FAIL, SKIP, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP, Status.ERROR


def _interfaces_from_real_error() -> Dict[str, List[str]]:
    """The host interfaces HCCL itself listed in a real EI0001 error (lo, enp, docker0)."""
    plog = sample_text("hccl_EI0001_HCCL_SOCKET_IFNAME-not-found_plog_hccl-doc.txt")
    return {name: [ip] for name, ip in re.findall(r"name\[(\S+?)\] ip\[([^\]%]+)", plog)}


# This host: the interfaces of the real EI0001 error plus one RoCE-less port without an address, as on the
# 910B node of the blog capture (enp189s0f0 had no IP).
HOST: Dict[str, List[str]] = {**_interfaces_from_real_error(), "enp189s0f0": []}


def run_hccl(
    node,
    interfaces: Optional[Mapping[str, Sequence[str]]] = None,
    profile: Optional[NodeProfile] = None,
) -> Report:
    chosen = HOST if interfaces is None else interfaces
    node.interfaces = {name: list(addresses) for name, addresses in chosen.items()}
    if not node.path("/sys/bus/pci/devices").exists():  # an Ascend node (else every HCCL check skips, as
        node.pci_device("0000:c1:00.0")                 # in the full run: issue 17 point 2)
    return api.run_checks(node.runner(), profile, only=("hccl",))


def profile_with(**overrides) -> NodeProfile:
    base = api.load_profile()
    return NodeProfile("test", deep_merge(base.data, overrides))


# -- environment ---------------------------------------------------------------------------------------------
def test_all_unset_reports_hccl_defaults(node):
    report = run_hccl(node)
    assert one_finding(report, "HCCL001").status is PASS
    assert "default is 1" in one_finding(report, "HCCL001").detail
    assert one_finding(report, "HCCL002").status is SKIP
    assert one_finding(report, "HCCL003").status is SKIP
    chosen = one_finding(report, "HCCL004")
    assert chosen.status is PASS
    assert "HCCL will use enp (127.10.0.2)" in chosen.detail
    timeout = one_finding(report, "HCCL005")
    assert timeout.status is PASS and timeout.evidence["connect_timeout_s"] == 120
    # No hccn_tool on this node: SKIPs that say why, never silently dropped and never PASS.
    for check_id in ("HCCL006", "HCCL010", "HCCL011", "HCCL012", "HCCL013"):
        finding = one_finding(report, check_id)
        assert finding.status is SKIP and "hccn_tool not found" in finding.detail
    assert report.exit_code() == 0


def test_whitelist_switch_from_the_real_torch_npu_env_sh(node):
    script = sample_text("config_torch_npu_env.sh_HCCL_WHITELIST_DISABLE_Ascend-pytorch.txt")
    value = re.search(r"^export HCCL_WHITELIST_DISABLE=(\S+)", script, re.MULTILINE)
    assert value is not None
    node.setenv(HCCL_WHITELIST_DISABLE=value.group(1))
    report = run_hccl(node)
    assert one_finding(report, "HCCL001").status is PASS
    assert "whitelist off" in one_finding(report, "HCCL001").detail
    assert one_finding(report, "HCCL002").status is SKIP


@pytest.mark.parametrize("value", ["2", "true", "", " 1"])
def test_whitelist_switch_other_values_fail(node, value):
    node.setenv(HCCL_WHITELIST_DISABLE=value)
    report = run_hccl(node)
    finding = one_finding(report, "HCCL001")
    assert finding.status is FAIL and finding.fix == "export HCCL_WHITELIST_DISABLE=1"
    assert one_finding(report, "HCCL002").status is SKIP


def test_whitelist_on_without_file(node):
    node.setenv(HCCL_WHITELIST_DISABLE="0")
    report = run_hccl(node)
    finding = one_finding(report, "HCCL002")
    assert finding.status is FAIL
    assert "HCCL_WHITELIST_FILE is not set" in finding.detail
    assert "export HCCL_WHITELIST_DISABLE=1" in finding.fix
    assert report.exit_code() == 1


def test_whitelist_file_missing(node):
    node.setenv(HCCL_WHITELIST_DISABLE="0", HCCL_WHITELIST_FILE="/home/test/whitelist")
    finding = one_finding(run_hccl(node), "HCCL002")
    assert finding.status is FAIL and "does not exist" in finding.detail
    assert finding.subject == "file:/home/test/whitelist"


def test_whitelist_file_invalid_json(node):
    node.file("/etc/hccl/whitelist.json", "{ host_ip: [192.0.2.10] }")
    node.setenv(HCCL_WHITELIST_DISABLE="0", HCCL_WHITELIST_FILE="/etc/hccl/whitelist.json")
    finding = one_finding(run_hccl(node), "HCCL002")
    assert finding.status is FAIL and "not valid JSON" in finding.detail


def test_whitelist_file_bad_ip(node):
    node.file("/etc/hccl/whitelist.json", '{"host_ip": ["127.10.0.2", "192.0.2.300"]}')
    node.setenv(HCCL_WHITELIST_DISABLE="0", HCCL_WHITELIST_FILE="/etc/hccl/whitelist.json")
    finding = one_finding(run_hccl(node), "HCCL002")
    assert finding.status is FAIL
    assert finding.evidence["invalid"] == ["192.0.2.300 (not an IP address)"]


def test_whitelist_file_valid_but_without_this_host(node):
    node.file("/etc/hccl/whitelist.json", sample_text("hccl_whitelist_2hosts.json.txt"))
    node.setenv(HCCL_WHITELIST_DISABLE="0", HCCL_WHITELIST_FILE="/etc/hccl/whitelist.json")
    finding = one_finding(run_hccl(node), "HCCL002")
    assert finding.status is WARN
    assert "add this host's address (127.10.0.2)" in finding.fix
    # The same file on a host that owns one of the listed addresses passes.
    finding = one_finding(run_hccl(node, {**HOST, "eth0": ["192.0.2.11"]}), "HCCL002")
    assert finding.status is PASS and finding.evidence["host_ip_count"] == 2


def test_if_ip_not_on_this_host(node):
    node.setenv(HCCL_IF_IP="10.10.10.1")  # the address of the official example page
    report = run_hccl(node)
    finding = one_finding(report, "HCCL003")
    assert finding.status is FAIL
    assert "not an address of this host" in finding.detail and "enp (127.10.0.2)" in finding.detail
    assert finding.fix == "export HCCL_IF_IP=127.10.0.2"
    # HCCL_IF_IP wins over HCCL_SOCKET_IFNAME, which is then not judged.
    assert one_finding(report, "HCCL004").status is SKIP


@pytest.mark.parametrize(
    "value, status",
    [
        ("127.10.0.2", PASS),
        ("172.17.0.1", PASS),
        ("127.10.0.1", WARN),
        ("10.10.10.300", FAIL),
        ("127.10.0.2,172.17.0.1", FAIL),
        ("127.10.0.2%enp", FAIL),
    ],
)
def test_if_ip_values(node, value, status):
    node.setenv(HCCL_IF_IP=value)
    assert one_finding(run_hccl(node), "HCCL003").status is status


def test_if_ip_ipv6_spelling_is_compared_as_an_address(node):
    node.setenv(HCCL_IF_IP="2001:DB8:0::5")
    finding = one_finding(run_hccl(node, {**HOST, "eth1": ["2001:db8::5"]}), "HCCL003")
    assert finding.status is PASS and finding.evidence["interfaces"] == ["eth1"]


@pytest.mark.parametrize(
    "value, status, matched",
    [
        ("enp", PASS, ["enp", "enp189s0f0"]),  # prefix; enp189s0f0 matches but has no address
        ("enp,docker", PASS, ["docker0", "enp", "enp189s0f0"]),
        ("eth", FAIL, []),  # prefix matching nothing
        ("^enp", PASS, ["docker0", "lo"]),  # exclude prefix
        ("^enp,docker", WARN, ["lo"]),  # only loopback left
        ("=enp", PASS, ["enp"]),  # exact
        ("=en", FAIL, []),  # exact name that does not exist
        ("=enp189s0f0", FAIL, ["enp189s0f0"]),  # exists, but no IP address
        ("^=enp,docker0,lo", FAIL, ["enp189s0f0"]),  # exclude exact: what is left has no address
        ("^=docker0", PASS, ["enp", "enp189s0f0", "lo"]),
    ],
)
def test_socket_ifname_forms(node, value, status, matched):
    node.setenv(HCCL_SOCKET_IFNAME=value)
    finding = one_finding(run_hccl(node), "HCCL004")
    assert finding.status is status, finding.detail
    assert finding.evidence["matched"] == matched


def test_socket_ifname_not_found_speaks_hccls_words(node):
    node.setenv(HCCL_SOCKET_IFNAME="abc")  # the value of the real EI0001 error
    finding = one_finding(run_hccl(node), "HCCL004")
    assert finding.status is FAIL
    assert "set ifname to [abc] by HCCL_SOCKET_IFNAME, but not found in the environment" in finding.detail
    assert "lo (127.10.0.1)" in finding.detail
    assert finding.fix == "export HCCL_SOCKET_IFNAME=enp"


def test_socket_ifname_markers_inside_the_list_fail(node):
    node.setenv(HCCL_SOCKET_IFNAME="enp,^docker0")
    finding = one_finding(run_hccl(node), "HCCL004")
    assert finding.status is FAIL and "must lead the whole list" in finding.detail


def test_unset_ifname_on_a_host_with_only_docker_and_lo_warns(node):
    finding = one_finding(run_hccl(node, {"lo": ["127.0.0.1"], "docker0": ["172.17.0.1"]}), "HCCL004")
    assert finding.status is WARN and "docker0 (172.17.0.1)" in finding.detail


@pytest.mark.parametrize(
    "value, status, fix",
    [
        ("120", PASS, ""),
        ("7200", PASS, ""),
        ("600", PASS, ""),
        ("119", FAIL, "export HCCL_CONNECT_TIMEOUT=120"),
        ("7201", FAIL, "export HCCL_CONNECT_TIMEOUT=7200"),
        ("0", FAIL, "export HCCL_CONNECT_TIMEOUT=120"),
        ("12.5", FAIL, "export HCCL_CONNECT_TIMEOUT=120"),
        ("200s", FAIL, "export HCCL_CONNECT_TIMEOUT=120"),
    ],
)
def test_connect_timeout(node, value, status, fix):
    node.setenv(HCCL_CONNECT_TIMEOUT=value)
    finding = one_finding(run_hccl(node), "HCCL005")
    assert finding.status is status, finding.detail
    assert finding.fix == fix


def test_connect_timeout_range_comes_from_the_profile(node):
    node.setenv(HCCL_CONNECT_TIMEOUT="600")
    profile = profile_with(hccl={"connect_timeout_s": {"min": 120, "max": 300}})
    assert one_finding(run_hccl(node, profile=profile), "HCCL005").status is FAIL


# -- hccn_tool per NPU ---------------------------------------------------------------------------------------
LINK_UP = sample_text("hccn_tool_link-g_UP_mindcluster-doc.txt")
LINK_DOWN = sample_text("hccn_tool_link-g_DOWN.txt")
HEALTH_OK = sample_text("hccn_tool_net_health-g_Success_mindcluster-doc.txt")
HEALTH_SOCKET_FAILED = sample_text("hccn_tool_net_health-g_SocketFailed_mindcluster-fixture.txt")
IP_EMPTY = sample_text("hccn_tool_ip-g_empty.txt")
IP_REAL_DEV3 = sample_text("hccn_tool_ip-g_dev3_910B_arthurchiao-blog.txt")  # 29.1.112.213 / 255.255.0.0
HCCN_CONF = sample_text("hccn.conf_8npu_elided_910B_arthurchiao-blog.txt")  # NPUs 0 and 7


def ip_answer(address: str, netmask: str) -> str:
    """The real -ip -g layout (blog capture) with another NPU's address from the real hccn.conf."""
    return IP_REAL_DEV3.replace("29.1.112.213", address).replace("255.255.0.0", netmask)


def npu_node(
    node,
    answers: Optional[Dict[str, str]] = None,
    conf: Optional[str] = HCCN_CONF,
    **command_options,
):
    """The blog's 910B node as far as the real hccn.conf shows it: NPUs 0 and 7, all healthy by default."""
    for device in ("davinci0", "davinci7", "davinci_manager"):
        node.file(f"/dev/{device}")
    if conf is not None:
        node.file("/etc/hccn.conf", conf)
    by_args = {
        "-i 0 -link -g": LINK_UP,
        "-i 7 -link -g": LINK_UP,
        "-i 0 -net_health -g": HEALTH_OK,
        "-i 7 -net_health -g": HEALTH_OK,
        "-i 0 -ip -g": ip_answer("29.1.137.205", "255.255.0.0"),
        "-i 7 -ip -g": ip_answer("29.1.170.143", "255.255.0.0"),
    }
    by_args.update(answers or {})
    node.command("hccn_tool", by_args=by_args, **command_options)
    return node


def test_healthy_npus_pass_as_one_finding_each(node):
    report = run_hccl(npu_node(node))
    assert one_finding(report, "HCCL006").status is PASS
    for check_id in ("HCCL010", "HCCL011", "HCCL012", "HCCL013"):
        finding = one_finding(report, check_id)
        assert (finding.status, finding.subject) == (PASS, "npu:0,7"), finding
        assert finding.evidence["npus"] == [0, 7]
    assert report.exit_code() == 0


def test_link_down(node):
    report = run_hccl(npu_node(node, {"-i 7 -link -g": LINK_DOWN}))
    assert statuses_by_subject(report, "HCCL010") == {"npu:7": FAIL, "npu:0": PASS}
    down = findings_by_id(report, "HCCL010")[0]
    assert "link status: DOWN" in down.detail and "hccn_tool -i 7 -optical -g" in down.fix


def test_net_health_socket_failed_names_the_detect_address(node):
    report = run_hccl(npu_node(node, {"-i 0 -net_health -g": HEALTH_SOCKET_FAILED}))
    assert statuses_by_subject(report, "HCCL011") == {"npu:0": FAIL, "npu:7": PASS}
    failed = findings_by_id(report, "HCCL011")[0]
    assert "Socket failed" in failed.detail and "29.1.0.1" in failed.detail  # netdetect_0 from hccn.conf
    assert failed.evidence["net_health"] == "Socket failed"


def test_device_ip_missing_prints_the_set_command_from_hccn_conf(node):
    report = run_hccl(npu_node(node, {"-i 7 -ip -g": IP_EMPTY}))
    assert statuses_by_subject(report, "HCCL012") == {"npu:7": FAIL, "npu:0": PASS}
    missing = findings_by_id(report, "HCCL012")[0]
    assert missing.fix == "hccn_tool -i 7 -ip -s address 29.1.170.143 netmask 255.255.0.0"
    assert statuses_by_subject(report, "HCCL013") == {"npu:7": FAIL, "npu:0": PASS}


def test_device_ip_missing_severity_from_the_profile(node):
    profile = profile_with(hccl={"device_ip_missing": "warn"})
    report = run_hccl(npu_node(node, {"-i 7 -ip -g": IP_EMPTY}), profile=profile)
    assert statuses_by_subject(report, "HCCL012")["npu:7"] is WARN


def test_device_ip_differs_from_hccn_conf(node):
    report = run_hccl(npu_node(node, {"-i 0 -ip -g": IP_REAL_DEV3}))
    assert statuses_by_subject(report, "HCCL012") == {"npu:0,7": PASS}
    assert statuses_by_subject(report, "HCCL013") == {"npu:0": FAIL, "npu:7": PASS}
    mismatch = findings_by_id(report, "HCCL013")[0]
    assert "address 29.1.112.213 vs address_0=29.1.137.205" in mismatch.detail
    assert mismatch.fix.startswith("hccn_tool -i 0 -ip -s address 29.1.137.205 netmask 255.255.0.0")


def test_device_missing_from_hccn_conf_warns(node):
    conf = "\n".join(line for line in HCCN_CONF.splitlines() if not line.endswith("_7=29.1.170.143"))
    report = run_hccl(npu_node(node, conf=conf))
    assert statuses_by_subject(report, "HCCL013") == {"npu:7": WARN, "npu:0": PASS}


def test_no_hccn_conf_skips_only_the_comparison(node):
    report = run_hccl(npu_node(node, conf=None))
    finding = one_finding(report, "HCCL013")
    assert finding.status is SKIP and "/etc/hccn.conf cannot be read (not-found)" in finding.detail
    assert one_finding(report, "HCCL012").status is PASS


@pytest.mark.parametrize("dev_exists", [True, False])
def test_no_npu_device_nodes(node, dev_exists):
    if dev_exists:
        node.file("/dev/null")
    node.command("hccn_tool", stdout=LINK_UP)
    report = run_hccl(node)
    assert one_finding(report, "HCCL006").status is PASS
    for check_id in ("HCCL010", "HCCL011", "HCCL012", "HCCL013"):
        finding = one_finding(report, check_id)
        assert finding.status is SKIP and "no /dev/davinci<N> device nodes" in finding.detail


def test_hccn_tool_missing_with_npus_present(node):
    for device in ("davinci0", "davinci_manager"):
        node.file(f"/dev/{device}")
    report = run_hccl(node)
    tool = one_finding(report, "HCCL006")
    assert tool.status is SKIP and "/usr/local/Ascend/driver/tools" in tool.detail and tool.fix
    assert one_finding(report, "HCCL010").status is SKIP


def test_hccn_tool_that_fails_is_an_error_with_its_output(node):
    node.file("/dev/davinci0")
    node.command("hccn_tool", stderr="Command execute failed!\n", rc=255)
    report = run_hccl(node)
    finding = one_finding(report, "HCCL010")
    assert finding.status is ERROR
    assert (
        finding.detail
        == "`hccn_tool -i 0 -link -g` exited 255 without a 'link status' line: Command execute failed!"
    )


def test_hanging_hccn_tool_costs_one_timeout_and_the_rest_still_reports(node):
    for index in range(8):
        node.file(f"/dev/davinci{index}")
    node.command("hccn_tool", stdout=LINK_UP, sleep_s=30)
    node.setenv(HCCL_CONNECT_TIMEOUT="7201")
    started = time.monotonic()
    report = run_hccl(node, profile=profile_with(commands={"timeout_s": 0.5}))
    elapsed = time.monotonic() - started
    assert elapsed < 3, f"took {elapsed:.1f} s: more than one hccn_tool timeout was waited for"
    link = findings_by_id(report, "HCCL010")
    assert [(f.status, f.subject) for f in link] == [(ERROR, "npu:0"), (ERROR, "npu:1,2,3,4,5,6,7")]
    assert link[0].detail == "`hccn_tool -i 0 -link -g` timed out after 0.5 s"
    assert link[1].detail == (
        "`hccn_tool -i N -link -g` not run: `hccn_tool -i 0 -link -g` timed out after 0.5 s, "
        "so the later calls were skipped"
    )
    for check_id in ("HCCL011", "HCCL012"):
        assert [(f.status, f.subject) for f in findings_by_id(report, check_id)] == [(ERROR, "npu:0,1,2,3,4,5,6,7")]
    # The environment checks are unaffected.
    assert one_finding(report, "HCCL005").status is FAIL
    assert one_finding(report, "HCCL001").status is PASS


def test_time_budget_stops_the_remaining_calls(node):
    npu_node(node)
    report = run_hccl(node, profile=profile_with(hccl={"hccn_tool": {"budget_s": 0}}))
    link = findings_by_id(report, "HCCL010")
    assert [(f.status, f.subject) for f in link] == [(ERROR, "npu:7"), (PASS, "npu:0")]
    assert "not run: hccn_tool calls took 0 s in all (budget 0 s)" in link[0].detail


def test_net_health_init_is_a_warning_with_the_netdetect_command(node):
    # "Init" is one of the states INDEX.md lists for -net_health -g; no capture of it exists.
    report = run_hccl(npu_node(node, {"-i 7 -net_health -g": "net health status: Init\n"}))
    init = findings_by_id(report, "HCCL011")[0]
    assert (init.status, init.subject) == (WARN, "npu:7")
    assert init.fix == "hccn_tool -i 7 -netdetect -s address 29.1.0.1"


def test_recorded_bundle_replays_the_same_findings(node, tmp_path):
    from npudoctor.probes.bundle import ReplayRunner, build_bundle, write_bundle
    from npudoctor.probes.runner import RecordingRunner

    npu_node(node, {"-i 7 -link -g": LINK_DOWN})
    node.pci_device("0000:c1:00.0")  # an Ascend node: else the HCCL checks skip (issue 17 point 2)
    node.setenv(HCCL_SOCKET_IFNAME="=enp")
    node.interfaces = dict(HOST)
    recorder = RecordingRunner(node.runner())
    recorder.environ()
    live = api.run_checks(recorder, only=("hccl",))
    bundle = str(tmp_path / "node-bundle")
    write_bundle(bundle, build_bundle(recorder.records, {}))
    replayed = api.run_checks(ReplayRunner(bundle), only=("hccl",))

    def key(f: Finding):
        return f.id, f.status, f.subject, f.detail

    assert [key(f) for f in replayed.findings] == [key(f) for f in live.findings]
    assert statuses_by_subject(replayed, "HCCL010") == {"npu:7": FAIL, "npu:0": PASS}


def test_explain_mentions_the_nccl_equivalent():
    assert "NCCL_SOCKET_IFNAME" in api.find_check("HCCL004").doc
    for check_id in (
        "HCCL001",
        "HCCL002",
        "HCCL003",
        "HCCL004",
        "HCCL005",
        "HCCL006",
        "HCCL010",
        "HCCL011",
        "HCCL012",
        "HCCL013",
    ):
        spec = api.find_check(check_id)
        assert spec is not None and spec.stage == "hccl" and "Fix:" in spec.doc
