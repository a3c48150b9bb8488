"""Builders of whole fake nodes from real samples, shared by the stage tests and the end-to-end scenarios."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

from npudoctor import api
from npudoctor.model.finding import Report
from npudoctor.probes.versions import PYTHON_PACKAGES, PYTHON_SCRIPT
from tests.samples import sample_text

ASCEND = "/usr/local/Ascend"
DRIVER = "driver_version.info_23.0.7_mindcluster-fixture.txt"
FIRMWARE = "firmware_version.info_7.1.0.11.220_mindcluster-fixture.txt"
# The driver the real 8x910B3 npu-smi capture reports (24.1.0.3) with the firmware of its HDK train.
DRIVER_24 = "driver_version.info_24.1.0.3_constructed.txt"
FIRMWARE_24 = "firmware_version.info_7.5.0.1.129_constructed.txt"
VERSION_CFG_800 = "cann_version.cfg_toolkit_8.0.0_rst-notes.txt"
TOOLKIT_81RC1 = "ascend_toolkit_install.info_8.1.RC1_aarch64_vllm-ascend-1047.txt"
TOOLKIT_70T10 = "ascend_toolkit_install.info_7.0.T10_aarch64_mindcluster-fixture.txt"
TOOLKIT_850_NEW_LAYOUT = "ascend_toolkit_install.info_8.5.0_aarch64_cann-path_mindcluster-doc.txt"
NNAE_80RC3 = "ascend_nnae_install.info_8.0.RC3_mindcluster-fixture.txt"


def install_driver(node, firmware: str = FIRMWARE, driver: str = DRIVER) -> None:
    node.file(f"{ASCEND}/driver/version.info", sample_text(driver))
    if firmware:
        node.file(f"{ASCEND}/firmware/version.info", sample_text(firmware))


def install_toolkit(node, version: str, sample: str = "", latest: bool = True) -> str:
    """ascend-toolkit/<version>/aarch64-linux/ascend_toolkit_install.info (or version.cfg), latest -> it."""
    home = f"{ASCEND}/ascend-toolkit/{version}"
    if sample.startswith("cann_version.cfg"):
        node.file(f"{home}/version.cfg", sample_text(sample))
    else:
        node.file(f"{home}/aarch64-linux/ascend_toolkit_install.info", sample_text(sample))
    node.file(f"{ASCEND}/ascend-toolkit/set_env.sh", "export ASCEND_TOOLKIT_HOME=...\n")
    if latest:
        node.symlink(f"{ASCEND}/ascend-toolkit/latest", version)
    return home


# The arguments the python facts probe runs the target interpreter with (FakeNode.command by_args key).
PYTHON_FACTS_ARGS = " ".join(("-c", PYTHON_SCRIPT, *PYTHON_PACKAGES))


def python_report(version: str = "3.10.14", executable: str = "/opt/venv/bin/python3",
                  location: str = "/opt/venv/lib/python3.10/site-packages",
                  so_files: Optional[Dict[str, List[str]]] = None, **packages: str) -> str:
    """The JSON line the python facts probe script prints, for these package versions."""
    report = {
        "python": {"version": version, "executable": executable, "implementation": "CPython"},
        "packages": {
            name: {"version": v, "location": location, "so_files": (so_files or {}).get(name, [])}
            for name, v in packages.items()
        },
        "missing": [n for n in PYTHON_PACKAGES if n not in packages],
        "errors": {},
    }
    return json.dumps(report) + "\n"


def target_python(node, version: str = "3.10.14", **packages: str) -> None:
    """A python3 on PATH printing what the probe script prints for these package versions."""
    so = {"torch_npu": ["torch_npu/lib/libtorch_npu.so", "torch_npu/_C.cpython-310-aarch64-linux-gnu.so"]}
    node.command("python3", stdout=python_report(version, so_files=so, **packages))


B3_8CARD = "npu-smi-info_910B3_8card_24.1.0.3_no-processes_vllm-ascend-4256.txt"
DCMI_8005 = "npu-smi_fail_dcmi-8005_constructed.txt"
WARNING_TABLE = "npu-smi-info_910B3_8card_NPU3-Warning_misaligned_constructed.txt"
# The Bus-Ids of the real 8x910B3 capture, so the PCI side and npu-smi describe the same machine.
B3_BUS_IDS = ("0000:c1:00.0", "0000:c2:00.0", "0000:81:00.0", "0000:82:00.0",
              "0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0")


def healthy_910b_node(node):
    """An Atlas 800T A2 as the real captures show it: 8x910B3 bound and linked, npu-smi all OK, driver 24.1.0.3
    (the one npu-smi reports) with the firmware of its train, CANN toolkit 8.0.0 sourced, torch 2.1.0 with
    torch_npu 2.1.0.post10 (a matrix pair)."""
    for bdf in B3_BUS_IDS:
        node.pci_device(bdf, device_id="d802")
    for index in range(len(B3_BUS_IDS)):
        node.file(f"/dev/davinci{index}")
    for name in ("davinci_manager", "devmm_svm", "hisi_hdc"):
        node.file(f"/dev/{name}")
    node.command("npu-smi", stdout=sample_text(B3_8CARD))
    install_driver(node, FIRMWARE_24, DRIVER_24)  # the driver npu-smi reports: no reboot pending
    install_toolkit(node, "8.0.0", VERSION_CFG_800)
    toolkit = f"{ASCEND}/ascend-toolkit/latest"
    node.setenv(ASCEND_HOME_PATH=toolkit, ASCEND_TOOLKIT_HOME=toolkit, ASCEND_OPP_PATH=f"{toolkit}/opp",
                LD_LIBRARY_PATH=f"{toolkit}/lib64:{ASCEND}/driver/lib64/driver")
    target_python(node, "3.10.14", torch="2.1.0+cpu", torch_npu="2.1.0.post10")
    return node


class Replay(NamedTuple):
    live: Report  # the checks run on the node itself
    collected: Report  # what `npudoctor collect` reported while it recorded the bundle
    replayed: Report  # `npudoctor check --from` the bundle, as on another machine


def collect_and_replay(node, bundle: Path, only: Sequence[str] = (),
                       options: Optional[Mapping[str, Any]] = None) -> Replay:
    """Check the node live, collect it into ``bundle``, and check the bundle: the three reports. The replay
    is given no options: a bundle replays with what `collect` was given (stored in it)."""
    live = api.run_checks(node.runner(), only=only, options=options)
    collected = api.collect(str(bundle), root=str(node.root), environ=node.env, options=options)
    replayed = api.run_checks(api.make_runner(bundle=str(bundle)), only=only)
    return Replay(live, collected, replayed)
