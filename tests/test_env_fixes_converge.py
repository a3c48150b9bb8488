"""A fix that changes the environment clears its finding (issue 17 point 1): ``source .../set_env.sh`` (run
for real: the real CANN 8.0.0 set_env.sh, in a shell, on the fake node's environment), ``export NAME=VALUE``
for the HCCL variables. After the fix the finding passes and no other finding of the stages it touches
becomes a problem."""

from __future__ import annotations

import re
import subprocess
from typing import Dict, List

import pytest

from npudoctor import api
from npudoctor.model import Status
from tests.nodes import healthy_910b_node
from tests.samples import sample_text
from tests.test_hccl_checks import HOST

PROBLEMS = (Status.WARN, Status.FAIL, Status.ERROR)
SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
STAGES = ("versions", "libraries", "hccl")


def _real_set_env() -> str:
    """The real toolkit 8.0.0 set_env.sh, its `cat` command line removed."""
    text = sample_text("cann_ascend-toolkit_set_env.sh_content_8.0.0_rst-notes.txt")
    return "\n".join(line for line in text.splitlines() if not line.startswith("yyy@xxx")) + "\n"


def _problems(node) -> Dict[str, str]:
    node.interfaces = {name: list(addresses) for name, addresses in HOST.items()}
    report = api.run_checks(node.runner(), api.load_profile(None), only=STAGES)
    return {f"{f.id}:{f.subject}": f.fix for f in report.findings if f.status in PROBLEMS}


def _source(node, script: str) -> None:
    """``source script`` in the node's environment, as the user's shell would (the script is the node's file)."""
    done = subprocess.run(
        ["sh", "-c", '. "$1" >/dev/null && env -0', "sh", str(node.path(script))],
        env={**node.env, "PATH": "/usr/bin:/bin"}, capture_output=True, check=True, timeout=30,
    )
    path = node.env["PATH"]
    node.env = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    node.env["PATH"] = path  # the fake node's commands stay first


ALTERNATIVE = re.compile(r"(?:;|\n)?\s*\bor\b\s+")
EXPORT = re.compile(r"export (\w+)=(\S+)")
SOURCE = re.compile(r"source (\S+set_env\.sh)")


def apply(node, fix: str) -> List[str]:
    """Apply the first alternative of ``fix`` that names concrete values; what was applied."""
    for alternative in ALTERNATIVE.split(fix):
        exports = [(name, value) for name, value in EXPORT.findall(alternative)
                   if "<" not in value and "/path/to" not in value]
        sources = SOURCE.findall(alternative.replace("`", " "))
        if not exports and not sources:
            continue
        for script in sources:
            _source(node, script)
        for name, value in exports:
            node.env[name] = value
        return [*sources, *(f"{n}={v}" for n, v in exports)]
    return []


def _node_without_set_env(node):
    healthy_910b_node(node)
    node.file(SET_ENV, _real_set_env())
    for name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "LD_LIBRARY_PATH"):
        node.env.pop(name, None)
    return node


BROKEN = {
    "set_env.sh not sourced": {},
    "CANN variables at a removed CANN": {"ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/7.0.0",
                                         "ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/ascend-toolkit/7.0.0"},
    "HCCL_IF_IP not of this host": {"HCCL_IF_IP": "203.0.113.9"},
    "HCCL_IF_IP two addresses": {"HCCL_IF_IP": "10.0.0.1,10.0.0.2"},
    "HCCL_SOCKET_IFNAME no such interface": {"HCCL_SOCKET_IFNAME": "ib0"},
    "HCCL_CONNECT_TIMEOUT too low": {"HCCL_CONNECT_TIMEOUT": "5"},
    "HCCL_CONNECT_TIMEOUT too high": {"HCCL_CONNECT_TIMEOUT": "999999"},
    "whitelist on without a file": {"HCCL_WHITELIST_DISABLE": "0"},
    "whitelist switch not 0 or 1": {"HCCL_WHITELIST_DISABLE": "yes"},
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_applying_an_environment_fix_clears_the_finding(node, case):
    _node_without_set_env(node)
    baseline_node_fix = apply(node, _problems(node)["LIB001:cann"])  # a sourced node first
    assert baseline_node_fix == [SET_ENV]
    baseline = set(_problems(node))
    node.env.update(BROKEN[case])
    if case == "set_env.sh not sourced":
        for name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "LD_LIBRARY_PATH"):
            node.env.pop(name, None)
    broken = _problems(node)
    new = {key: fix for key, fix in broken.items() if key not in baseline}
    assert new, f"{case}: no finding"
    for key, fix in new.items():
        applied = apply(node, fix)
        assert applied, f"{key}: nothing to apply in {fix!r}"
        after = set(_problems(node))
        assert key not in after, f"{key} still there after {applied}"
        assert after <= baseline, f"{case}: {sorted(after - baseline)} appeared after {applied}"
