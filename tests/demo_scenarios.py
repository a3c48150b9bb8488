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
from typing import Any, Callable, Dict, List, NamedTuple, Optional

from npudoctor import api
from npudoctor.fleet.demo import SCENARIO_DIR
from npudoctor.parsers.npu_smi import parse_npu_smi_info
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


# npu-smi's per-chip answers on the demo node (constructed from real layouts: tests/data/constructed, each with
# its source). Level 1 asks `-m` and, for a chip not OK, `-t health` and `-t ecc`; level 2 `-t board|ecc|common`.
IDS = "npu-smi-info-m_910B3_8card_constructed.txt"
BOARD = "npu-smi-info_t-board_910B3_template_constructed.txt"
COMMON = "npu-smi-info_t-common_910B3_template_constructed.txt"
ECC = "npu-smi-info_t-ecc_mindcluster-doc.txt"
PHYID = "npu-smi-info_t-phyid-remap_template_constructed.txt"
HEALTH_WARNING = "npu-smi-info_t-health_80CB8009_Warning_constructed.txt"
HEALTH_ALARM = "npu-smi-info_t-health_80E01801_Alarm_constructed.txt"
ECC_NPU5 = "npu-smi-info_t-ecc_NPU5_HBM-double-bit_52-isolated_constructed.txt"
ALARM_TABLE = "npu-smi-info_910B3_8card_NPU5-Alarm_constructed.txt"
FIRMWARE_VERSION = "7.5.0.1.129"  # the firmware version.info of the demo node (FIRMWARE_24)
OLD_FIRMWARE = "7.1.0.11.220"  # a real older one (firmware_version.info_7.1.0.11.220_mindcluster-fixture.txt)
RATED_MHZ = 1800
BUSY_PCT = 85  # the chips train: an idle chip lowers its clock, and SMI008 judges only busy ones
LEVEL2_SAMPLES = [BOARD, COMMON, ECC, PHYID]
# What the import child prints when torch_npu imports and runs its op (LIB005 at --level 2 on the fake node).
IMPORT_OK = ("NPUDOCTOR-STAGE import torch\nNPUDOCTOR-STAGE import torch_npu\nNPUDOCTOR-STAGE device op\n"
             "NPUDOCTOR-STAGE ok [2.0, 2.0]\n")


def npu_smi(node: FakeNode, table: str = B3_8CARD, answers: Optional[Dict[str, str]] = None,
            firmware: Optional[Dict[int, str]] = None, clock: Optional[Dict[int, int]] = None) -> None:
    """The fake npu-smi: ``table`` for `npu-smi info`, `-m`, and the per-NPU sub-commands of level 2 (healthy
    unless ``firmware``/``clock`` say otherwise for an NPU); ``answers`` (arguments -> text) come first."""
    chips = parse_npu_smi_info(sample_text(table)).chips
    by_args = dict(answers or {})
    by_args.setdefault("info -m", sample_text(IDS))
    ecc = sample_text(ECC)
    for chip in chips:
        npu = chip.npu_id
        # /dev/davinci<npu> on the demo node: physical id = logic id = NPU id
        by_args.setdefault(f"info -t phyid-remap -p {npu}", sample_text(PHYID).format(phy=npu, logic=npu, npu=npu))
        by_args.setdefault(f"info -t board -i {npu}", sample_text(BOARD).format(
            npu=npu, bus=chip.bus_id, firmware=(firmware or {}).get(npu, FIRMWARE_VERSION)))
        by_args.setdefault(f"info -t ecc -i {npu}", ecc.replace("NPU ID                                   : 1",
                                                                f"NPU ID                                   : {npu}"))
        by_args.setdefault(f"info -t common -i {npu}", sample_text(COMMON).format(
            npu=npu, usage=BUSY_PCT, freq=RATED_MHZ, curfreq=(clock or {}).get(npu, RATED_MHZ),
            temp=f"{chip.temp_c:g}", power=f"{chip.power_w:g}"))
    node.command("npu-smi", stdout=sample_text(table), by_args=by_args)


def level2_node(node: FakeNode) -> None:
    """The python3 of the demo node also passes `check --level 2`'s import of torch_npu and one op."""
    report = python_report("3.10.14", so_files={"torch_npu": ["torch_npu/lib/libtorch_npu.so"],
                                                 "torch": ["torch/lib/libtorch_python.so"]},
                           torch="2.1.0", torch_npu="2.1.0.post10")
    node.command("python3", by_args={PYTHON_FACTS_ARGS: report}, stdout=IMPORT_OK)


def _chip_warning(node: FakeNode) -> None:
    npu_smi(node, WARNING_TABLE, {"info -t health -i 3 -c 0": sample_text(HEALTH_WARNING)})


def _hbm_ecc(node: FakeNode) -> None:
    npu_smi(node, ALARM_TABLE, {"info -t health -i 5 -c 0": sample_text(HEALTH_ALARM),
                                "info -t ecc -i 5": sample_text(ECC_NPU5)})


def _old_firmware(node: FakeNode) -> None:
    level2_node(node)
    npu_smi(node, firmware={6: OLD_FIRMWARE})


def _throttled_chip(node: FakeNode) -> None:
    level2_node(node)
    npu_smi(node, clock={2: 800})


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
    level: int = 1  # what `collect --level` the bundle is recorded at (and `check --demo` replays)


SCENARIOS: Dict[str, Scenario] = {
    "healthy": Scenario("a healthy Atlas 800T A2 (8x910B3), CANN 8.0.0 sourced, torch 2.1.0 + torch_npu "
                        "2.1.0.post10", lambda node: None, []),
    "chip-warning": Scenario("NPU 3 in Warning in npu-smi info, fault code 80CB8009 in its health query",
                             _chip_warning, [WARNING_TABLE, HEALTH_WARNING]),
    "hbm-ecc": Scenario("NPU 5 in Alarm: HBM double-bit ECC error (80E01801), 52 isolated pages of 64",
                        _hbm_ecc, [ALARM_TABLE, HEALTH_ALARM, ECC_NPU5]),
    "old-firmware": Scenario("NPU 6 on firmware 7.1.0.11.220, its siblings on 7.5.0.1.129 (collected at --level 2)",
                             _old_firmware, LEVEL2_SAMPLES, level=2),
    "throttled-chip": Scenario("NPU 2's AI Core at 800 of its rated 1800 MHz while 85% busy (collected at --level 2)",
                               _throttled_chip, LEVEL2_SAMPLES, level=2),
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
    npu_smi(node)
    scenario.breaks(node)
    recorder = RecordingRunner(DemoRunner(node, f"atlas-{name}"))
    recorder.environ()
    api.run_checks(recorder, api.load_profile("atlas800t-a2-8x910b"), level=scenario.level)
    members = build_bundle(recorder.records, recorder.host(), collect_options={"level": scenario.level})
    members = {member: _rewrite(data, node) for member, data in members.items()}
    manifest = json.loads(members["manifest.json"])
    manifest["created"] = "2026-12-01T00:00:00+0000"
    manifest["tool"]["version"] = "demo"
    manifest["demo"] = {
        "scenario": name,
        "description": scenario.description,
        "assembled_from": sorted({*BASE_SAMPLES, IDS, PHYID, *scenario.samples}),
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
