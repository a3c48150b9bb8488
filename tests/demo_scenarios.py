"""Builds the demo scenario bundles shipped in ``npudoctor/fleet/scenarios/`` (``npudoctor check --demo NAME``).

Each scenario is a fake Atlas 800T A2 node assembled from real captures (the npu-smi tables, version files and
CANN set_env.sh in tests/data/samples, with their source headers there), checked and recorded the way
``npudoctor collect`` records a real node. The fake node's temporary paths are rewritten to the paths a real
node has. (A bundle holds no binaries, so the libraries stage's ELF analysis reads as SKIP in every replay,
as it does for a real node's bundle.)

Regenerate and review the change like code::

    python -m tests.demo_scenarios
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple

from npudoctor import api
from npudoctor.fleet.demo import SCENARIO_DIR
from npudoctor.probes.bundle import build_bundle, write_bundle
from npudoctor.probes.runner import RecordingRunner
from tests.fakenode import FakeNode, FakeNodeRunner
from tests.nodes import (
    B3_8CARD,
    DCMI_8005,
    DRIVER,
    DRIVER_24,
    FIRMWARE,
    FIRMWARE_24,
    PYTHON_FACTS_ARGS,
    VERSION_CFG_800,
    WARNING_TABLE,
    healthy_910b_node,
    install_driver,
    python_report,
)
from tests.samples import sample_text

SET_ENV = "cann_ascend-toolkit_set_env.sh_content_8.0.0_rst-notes.txt"
TOOLKIT = "/usr/local/Ascend/ascend-toolkit"
BASE_SAMPLES = [B3_8CARD, DRIVER_24, FIRMWARE_24, VERSION_CFG_800, SET_ENV]
# A real openEuler 22.03 LTS SP3 /etc/os-release (as the distribution ships it; Atlas nodes commonly run it).
OS_RELEASE = ('NAME="openEuler"\nVERSION="22.03 (LTS-SP3)"\nID="openEuler"\nVERSION_ID="22.03"\n'
              'PRETTY_NAME="openEuler 22.03 (LTS-SP3)"\nANSI_COLOR="0;31"\n\n')


class DemoRunner(FakeNodeRunner):
    """The fake node's runner with a real node's host facts instead of this machine's."""

    def __init__(self, node: FakeNode, hostname: str) -> None:
        super().__init__(str(node.root), dict(node.env), node.interfaces)
        self.hostname = hostname

    def host(self) -> Dict[str, Any]:
        return {"hostname": self.hostname, "kernel": "5.10.0-182.0.0.95.oe2203sp3.x86_64", "arch": "x86_64",
                "root": "/"}


def target_python(node: FakeNode, torch: str) -> None:
    so_files = {"torch_npu": ["torch_npu/lib/libtorch_npu.so"], "torch": ["torch/lib/libtorch_python.so"]}
    report = python_report("3.10.14", so_files=so_files, torch=torch, torch_npu="2.1.0.post10")
    node.command("python3", by_args={PYTHON_FACTS_ARGS: report}, stdout=report)


def demo_node(node: FakeNode, torch: str = "2.1.0") -> FakeNode:
    """The healthy 8x910B3 node of tests/nodes.py with the real CANN 8.0.0 set_env.sh and an /etc/os-release."""
    healthy_910b_node(node)
    node.interfaces = {"lo": ["127.0.0.1"], "enp189s0f0": ["192.0.2.10"]}
    node.file("/etc/os-release", OS_RELEASE)
    script = "\n".join(line for line in sample_text(SET_ENV).splitlines() if not line.startswith("yyy@"))
    node.path(f"{TOOLKIT}/set_env.sh").write_text(script, encoding="utf-8")
    target_python(node, torch)
    return node


def _chip_warning(node: FakeNode) -> None:
    node.command("npu-smi", stdout=sample_text(WARNING_TABLE))


def _version_mismatch(node: FakeNode) -> None:
    target_python(node, "2.2.0")


def _setenv_not_sourced(node: FakeNode) -> None:
    for name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "LD_LIBRARY_PATH"):
        node.env.pop(name, None)


def _unbound_device(node: FakeNode) -> None:
    node.path("/sys/bus/pci/devices/0000:41:00.0/driver").unlink()


def _dcmi_8005(node: FakeNode) -> None:
    node.command("npu-smi", stdout=sample_text(DCMI_8005), rc=255)


def _container_without_devices(node: FakeNode) -> None:
    for path in node.path("/dev").iterdir():
        path.unlink()


def _driver_not_reloaded(node: FakeNode) -> None:
    # the real 23.0.7 driver and firmware files on disk while npu-smi still reports 24.1.0.3: a rollback of
    # the driver package without the reboot that loads it
    install_driver(node)


def _whitelist_without_file(node: FakeNode) -> None:
    node.setenv(HCCL_WHITELIST_DISABLE="0")


class Scenario(NamedTuple):
    description: str
    breaks: Callable[[FakeNode], None]
    samples: List[str]


SCENARIOS: Dict[str, Scenario] = {
    "healthy": Scenario("a healthy Atlas 800T A2 (8x910B3), CANN 8.0.0 sourced, torch 2.1.0 + torch_npu "
                        "2.1.0.post10", lambda node: None, []),
    "chip-warning": Scenario("NPU 3 in Warning in npu-smi info", _chip_warning, [WARNING_TABLE]),
    "version-mismatch": Scenario("torch 2.2.0 beside torch_npu 2.1.0.post10", _version_mismatch, []),
    "setenv-not-sourced": Scenario("CANN's set_env.sh not sourced: libascendcl.so and libhccl.so not found",
                                   _setenv_not_sourced, []),
    "unbound-device": Scenario("one NPU (0000:41:00.0) not bound to devdrv_device_driver", _unbound_device, []),
    "dcmi-8005": Scenario("npu-smi fails with dcmi -8005 (devices cannot be opened)", _dcmi_8005, [DCMI_8005]),
    "no-dev-davinci": Scenario("a container started without /dev/davinci* and the manager devices",
                               _container_without_devices, []),
    "driver-not-reloaded": Scenario("driver package 23.0.7 installed, 24.1.0.3 still loaded: no reboot since",
                                    _driver_not_reloaded, [DRIVER, FIRMWARE]),
    "whitelist-no-file": Scenario("HCCL whitelist switched on without a whitelist file", _whitelist_without_file,
                                  []),
}


def _rewrite(data: bytes, node: FakeNode) -> bytes:
    for fake, real in ((f"{node.root}/", "/"), (str(node.root), "/"), (str(node.bin), "/usr/local/bin"),
                       (str(node.base / "home"), "/root"), (str(node.base), "/opt/demo")):
        data = data.replace(fake.encode(), real.encode())
    return data


def build(name: str, work: Path, output: Path) -> None:
    scenario = SCENARIOS[name]
    node = demo_node(FakeNode(work / name))
    scenario.breaks(node)
    recorder = RecordingRunner(DemoRunner(node, f"atlas-{name}"))
    recorder.environ()
    api.run_checks(recorder, api.load_profile("atlas800t-a2-8x910b"))
    members = build_bundle(recorder.records, recorder.host())
    members = {member: _rewrite(data, node) for member, data in members.items()}
    manifest = json.loads(members["manifest.json"])
    manifest["created"] = "2026-12-01T00:00:00+0000"
    manifest["tool"]["version"] = "demo"
    manifest["demo"] = {
        "scenario": name,
        "description": scenario.description,
        "assembled_from": sorted({*BASE_SAMPLES, *scenario.samples}),
        "note": "assembled from real captures (npu-smi tables, version files, CANN set_env.sh) on a simulated "
                "node by tests/demo_scenarios.py, not recorded on one real machine",
    }
    members["manifest.json"] = json.dumps(manifest, indent=1, sort_keys=True).encode()
    write_bundle(str(output / f"{name}.tar.gz"), members)


README = """# Demo scenarios

Bundles replayed by `npudoctor check --demo NAME` and `npudoctor fleet --demo`. Generated by
`python -m tests.demo_scenarios` from real captures on a simulated node; each manifest's `demo` entry names
the samples it was assembled from. Do not edit by hand.
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if SCENARIO_DIR.exists():
            shutil.rmtree(SCENARIO_DIR)
        SCENARIO_DIR.mkdir(parents=True)
        (SCENARIO_DIR / "README.md").write_text(README, encoding="utf-8")
        for name in SCENARIOS:
            build(name, work, SCENARIO_DIR)
            print(f"wrote {SCENARIO_DIR / name}.tar.gz")


if __name__ == "__main__":
    main()
