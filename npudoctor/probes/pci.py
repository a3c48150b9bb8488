"""PCIe probes: Ascend devices on the bus, their driver binding and link, and the device nodes in /dev."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

from npudoctor import knowledge
from npudoctor.parsers.sysfs import parse_aer_counts, parse_hex, parse_int, parse_link_speed_gts
from npudoctor.probes import provides

PCI_DEVICES = "/sys/bus/pci/devices"


@dataclass(frozen=True)
class PciDevice:
    bdf: str  # "0000:c1:00.0"
    vendor_id: int
    device_id: int
    class_code: Optional[int]
    family: str  # "910B", ... or "unknown"
    product: str
    driver: Optional[str]  # basename of the driver link, None when unbound
    current_link_width: Optional[int]
    max_link_width: Optional[int]
    current_link_speed_gts: Optional[float]
    max_link_speed_gts: Optional[float]
    numa_node: Optional[int]
    is_virtual_function: bool = False
    # PCIe AER counters (aer_dev_correctable / _nonfatal / _fatal, kernel 4.19+): severity -> (total, by name);
    # absent where the kernel or the device keeps none.
    aer: Optional[Dict[str, Tuple[int, Dict[str, int]]]] = None

    @property
    def device_hex(self) -> str:
        return f"0x{self.device_id:04x}"


@dataclass(frozen=True)
class PciFacts:
    """Ascend NPUs found under /sys/bus/pci/devices; ``error`` when sysfs itself could not be read."""

    npus: Tuple[PciDevice, ...]
    scanned: int
    error: Optional[str] = None

    @property
    def physical_npus(self) -> Tuple[PciDevice, ...]:
        """The NPUs themselves: SR-IOV virtual functions share a card with their physical function and are
        not counted again."""
        return tuple(d for d in self.npus if not d.is_virtual_function)


@dataclass(frozen=True)
class DeviceNode:
    path: str
    exists: bool
    kind: str
    readable: bool
    writable: bool


@dataclass(frozen=True)
class DeviceNodeFacts:
    chips: Tuple[DeviceNode, ...]  # /dev/davinci<N>, N ascending
    shared: Tuple[DeviceNode, ...]  # davinci_manager, devmm_svm, hisi_hdc
    error: Optional[str] = None


def _read(runner: Any, path: str) -> Optional[str]:
    return runner.read_text(path, max_bytes=4096).text


def classify(
    vendor_id: int, device_id: int, class_code: Optional[int], ids: Dict[str, Any]
) -> Optional[Dict[str, str]]:
    """The Ascend identity of a PCI function, or None when it is not an Ascend NPU (pure).

    >>> ids = knowledge.load("pci_ids")
    >>> classify(0x19e5, 0xd802, 0x120000, ids)["family"]
    '910B'
    >>> classify(0x19e5, 0x1822, 0x020000, ids) is None   # a Huawei NIC, not an NPU
    True
    >>> classify(0x19e5, 0xd9ff, 0x120000, ids)["family"]  # an accelerator we do not know yet
    'unknown'
    """
    if vendor_id != int(ids["vendor_id"], 16):
        return None
    known = ids["devices"].get(f"0x{device_id:04x}")
    if known is not None:
        return {"family": known["family"], "product": known["product"]}
    prefix = ids["accelerator_class_prefix"]
    if class_code is not None and f"0x{class_code:06x}".startswith(prefix):
        return {"family": "unknown", "product": f"unknown Huawei accelerator 0x{device_id:04x}"}
    return None


@provides("pci")
def pci_facts(ctx: Any) -> PciFacts:
    """Equivalent to ``lspci -d 19e5: -vv`` (vendor, device, class, driver, LnkCap/LnkSta) read from sysfs, and
    the AER error counters of each function (``aer_dev_*``)."""
    runner = ctx.runner
    ids = knowledge.load("pci_ids")
    listing = runner.list_dir(PCI_DEVICES)
    if listing.error:
        return PciFacts((), 0, f"{PCI_DEVICES}: {listing.error}")
    huawei_vendor_id = int(ids["vendor_id"], 16)
    npus = []
    for bdf in listing.entries:
        base = f"{PCI_DEVICES}/{bdf}"
        vendor = parse_hex(_read(runner, f"{base}/vendor"))
        if vendor is None or vendor != huawei_vendor_id:
            continue
        device = parse_hex(_read(runner, f"{base}/device"))
        if device is None:
            continue
        class_code = parse_hex(_read(runner, f"{base}/class"))
        identity = classify(vendor, device, class_code, ids)
        if identity is None:
            continue
        driver_link = runner.path_info(f"{base}/driver")
        driver = driver_link.link_target.rstrip("/").rsplit("/", 1)[-1] if driver_link.link_target else None
        npus.append(PciDevice(
            bdf=bdf, vendor_id=vendor, device_id=device, class_code=class_code,
            family=identity["family"], product=identity["product"], driver=driver,
            current_link_width=parse_int(_read(runner, f"{base}/current_link_width")),
            max_link_width=parse_int(_read(runner, f"{base}/max_link_width")),
            current_link_speed_gts=parse_link_speed_gts(_read(runner, f"{base}/current_link_speed")),
            max_link_speed_gts=parse_link_speed_gts(_read(runner, f"{base}/max_link_speed")),
            numa_node=parse_int(_read(runner, f"{base}/numa_node")),
            is_virtual_function=runner.path_info(f"{base}/physfn").exists,
            aer=_aer_counts(runner, base),
        ))
    return PciFacts(tuple(npus), len(listing.entries))


AER_FILES = {"correctable": "aer_dev_correctable", "nonfatal": "aer_dev_nonfatal", "fatal": "aer_dev_fatal"}


def _aer_counts(runner: Any, base: str) -> Optional[Dict[str, Tuple[int, Dict[str, int]]]]:
    """``cat <device>/aer_dev_{correctable,nonfatal,fatal}``: the PCIe errors the device reported."""
    counts = {kind: parse_aer_counts(_read(runner, f"{base}/{name}")) for kind, name in AER_FILES.items()}
    read = {kind: value for kind, value in counts.items() if value is not None}
    return read or None


# /dev/davinci<N>, one per NPU device id; davinci_manager is the management node, not an NPU.
_DAVINCI = re.compile(r"^davinci(\d+)$")


def davinci_nodes(dev_entries: Iterable[str]) -> List[Tuple[int, str]]:
    """(device number, name) of each ``davinci<N>`` in a ``/dev`` listing, by number (pure).

    >>> davinci_nodes(["davinci_manager", "davinci10", "devmm_svm", "davinci2"])
    [(2, 'davinci2'), (10, 'davinci10')]
    """
    return sorted((int(m.group(1)), name) for name in dev_entries if (m := _DAVINCI.match(name)))


@provides("device_nodes")
def device_node_facts(ctx: Any) -> DeviceNodeFacts:
    """Equivalent to ``ls -l /dev/davinci* /dev/devmm_svm /dev/hisi_hdc`` plus an access test."""
    runner = ctx.runner
    ids = knowledge.load("pci_ids")
    listing = runner.list_dir("/dev")
    numbered = davinci_nodes(listing.entries)

    def node(path: str) -> DeviceNode:
        info = runner.path_info(path)
        return DeviceNode(path, info.exists, info.kind, info.readable, info.writable)

    chips = tuple(node(f"/dev/{name}") for _index, name in numbered)
    shared = tuple(node(path) for path in ids["device_nodes"]["shared"])
    return DeviceNodeFacts(chips, shared, listing.error)
