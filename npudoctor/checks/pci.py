"""Checks of the pcie stage: is there an Ascend NPU, is it bound to its driver, is its link whole, and can
this process (or container) open its device nodes."""

from __future__ import annotations

from typing import Callable, Iterable, List

from npudoctor import knowledge
from npudoctor.checks.registry import (
    NOT_AN_ASCEND_NODE,
    CheckContext,
    Outcome,
    by_severity,
    check,
    fail,
    passed,
    setting,
    skip,
    warn,
)
from npudoctor.parsers.sysfs import pcie_generation

CONTAINER_DEVICES_FIX = (
    "give the container every device node and the driver, e.g.\n"
    "docker run --device=/dev/davinci0 ... --device=/dev/davinci_manager --device=/dev/devmm_svm "
    "--device=/dev/hisi_hdc -v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro "
    "-v /usr/local/sbin/npu-smi:/usr/local/sbin/npu-smi:ro ..."
)


@check("PCI001", stage="pcie", title="Ascend NPUs on the PCI bus", settings=("node.npu_count", "node.chip_family"))
def npus_on_pci_bus(ctx: CheckContext) -> Iterable[Outcome]:
    """Finds Huawei Ascend NPUs (vendor 0x19e5, class "Processing accelerators") under /sys/bus/pci/devices.

    Everything else depends on this: no NPU on the bus means no driver, no npu-smi and no training, whatever
    the software says. The chip family comes from the PCI device id (d100 310, d500 310P, d801 910, d802 910B,
    d803 910 A3; the table is data in checks/pci_ids.yaml). When the profile names an expected count
    (``node.npu_count``) the count must match.

    Fix: on a bare-metal node, a missing card is a hardware matter (seating, riser, BIOS "above 4G decoding").
    In a container or VM, /sys may show the host's bus or none at all: run `npudoctor check` on the host.
    """
    facts = ctx.facts("pci")
    if facts.error:
        yield skip(f"cannot read the PCI bus: {facts.error}", subject="sysfs",
                   fix="run on the host, or pass --root with a copy of /sys")
        return
    expected = ctx.profile.expected_chip_count
    physical = facts.physical_npus
    if not physical:
        yield fail("pci", f"no Ascend NPU on the PCI bus ({facts.scanned} PCI functions scanned)",
                   evidence={"pci_functions": facts.scanned, "npus": 0},
                   fix="if this should be an Ascend node: check `lspci -d 19e5:` on the host; in a container or "
                       "VM the NPU must be passed through; otherwise this machine cannot run NPU training",
                   cause=NOT_AN_ASCEND_NODE)
        return
    families = sorted({d.family for d in physical})
    evidence = {"npus": len(physical), "families": families, "bus_ids": [d.bdf for d in physical]}
    detail = f"{len(physical)} x {'/'.join(families)} ({physical[0].product})"
    if expected is not None and len(physical) != expected:
        yield fail("pci", f"{detail}, but the profile {ctx.profile.name} expects {expected}",
                   evidence={**evidence, "expected_npus": expected},
                   fix="a card is missing from the bus: check seating and power, then `dmesg | grep -i pcie`")
        return
    wanted_family = ctx.profile.get("node.chip_family")
    if wanted_family and wanted_family not in families:
        yield fail("pci", f"{detail}, but the profile {ctx.profile.name} expects {wanted_family}",
                   evidence={**evidence, "expected_family": wanted_family})
        return
    for unknown in (d for d in physical if d.family == "unknown"):
        yield warn(unknown.bdf,
                   f"unknown Huawei accelerator {unknown.device_hex}; npudoctor does not know its family",
                   evidence={"device_id": unknown.device_hex},
                   fix="report the `lspci -nn -d 19e5:` line so its family can be added to checks/pci_ids.yaml")
    yield passed("pci", detail, evidence)


@check("PCI002", stage="pcie", title="NPU bound to the Ascend driver", requires=("PCI001",))
def npu_driver_binding(ctx: CheckContext) -> Iterable[Outcome]:
    """Each NPU must be bound to the Ascend driver (``devdrv_device_driver``, from the drv_pcie_host module).

    An unbound NPU is invisible to npu-smi and the runtime: typical after a driver upgrade without reboot, a
    failed DKMS build for a new kernel, or when the device was handed to vfio-pci for a VM.

    Fix (printed, never run by npudoctor): reload the driver (`modprobe drv_pcie_host` or reinstall the
    driver package `Ascend-hdk-*-npu-driver_*.run --full`), or bind the device explicitly:
    `echo 0000:c1:00.0 > /sys/bus/pci/drivers/devdrv_device_driver/bind`. Then reboot if the driver was
    upgraded.
    """
    drivers = knowledge.load("pci_ids")["drivers"]
    for device in ctx.facts("pci").physical_npus:
        evidence = {"driver": device.driver, "device_id": device.device_hex}
        if device.driver is None:
            yield fail(device.bdf, f"{device.family} NPU is not bound to any driver", evidence,
                       fix="modprobe drv_pcie_host   # or reinstall the Ascend driver package, then reboot\n"
                           f"echo {device.bdf} > /sys/bus/pci/drivers/devdrv_device_driver/bind")
            continue
        known = drivers.get(device.driver)
        if known and known["ok"]:
            yield passed(device.bdf, f"bound to {device.driver}", evidence)
        elif known:
            yield warn(device.bdf, f"bound to {device.driver}: {known['meaning']}", evidence,
                       fix=f"echo {device.bdf} > /sys/bus/pci/drivers/{device.driver}/unbind\n"
                           f"echo {device.bdf} > /sys/bus/pci/drivers/devdrv_device_driver/bind")
        else:
            yield warn(device.bdf, f"bound to an unexpected driver {device.driver!r}", evidence,
                       fix="expected devdrv_device_driver; check which package installed this driver")


def _stricter(one: Callable[..., Outcome], other: Callable[..., Outcome]) -> Callable[..., Outcome]:
    return fail if fail in (one, other) else one


@check("PCI003", stage="pcie", title="PCIe link at full width and speed", requires=("PCI001",),
       settings=("pcie.link_width_downgrade", "pcie.link_speed_downgrade"))
def pcie_link(ctx: CheckContext) -> Iterable[Outcome]:
    """Compares each NPU's current PCIe link width and speed with what the device supports.

    A link trained below its capability (x8 instead of x16, or Gen3 instead of Gen4) slows host-device copies
    and data loading without any error. Real 910B cards report LnkCap 32 GT/s; in a Gen4 server slot they
    run at 16 GT/s, which is the platform's limit rather than a fault: a downgrade is a WARN by default, and
    the evidence says by how much. A width downgrade is more often a seating or riser problem. The profile's
    ``pcie.link_width_downgrade`` and ``pcie.link_speed_downgrade`` (warn or fail) choose the severity; with
    both downgrades the stricter one applies.

    Fix: reseat the card or move it to a full x16 slot; check the BIOS PCIe speed setting; compare with
    `lspci -vv -s <bus id> | grep -E "LnkCap|LnkSta"`.
    """
    for device in ctx.facts("pci").physical_npus:
        evidence = {
            "current_link_width": device.current_link_width, "max_link_width": device.max_link_width,
            "current_link_speed_gts": device.current_link_speed_gts, "max_link_speed_gts": device.max_link_speed_gts,
        }
        if device.current_link_width is None or device.max_link_width is None:
            yield skip("link width not readable from sysfs", subject=device.bdf, evidence=evidence)
            continue
        if device.current_link_speed_gts is None:
            yield warn(device.bdf, "PCIe link speed unknown: the link may be down", evidence,
                       fix=f"lspci -vv -s {device.bdf} | grep -E 'LnkCap|LnkSta'")
            continue
        problems: List[str] = []
        report = warn
        if device.current_link_width < device.max_link_width:
            problems.append(f"width x{device.current_link_width} of x{device.max_link_width}")
            report = _stricter(report, by_severity(ctx, "pcie.link_width_downgrade"))
        if device.max_link_speed_gts and device.current_link_speed_gts < device.max_link_speed_gts:
            now, best = pcie_generation(device.current_link_speed_gts), pcie_generation(device.max_link_speed_gts)
            problems.append(f"speed {device.current_link_speed_gts:g} GT/s (Gen{now}) of "
                            f"{device.max_link_speed_gts:g} GT/s (Gen{best})")
            report = _stricter(report, by_severity(ctx, "pcie.link_speed_downgrade"))
        if problems:
            yield report(device.bdf, "link downgraded: " + ", ".join(problems), evidence,
                       fix=f"reseat the card or use a full-speed x16 slot; compare `lspci -vv -s {device.bdf}`")
        else:
            detail = f"x{device.current_link_width} at {device.current_link_speed_gts:g} GT/s"
            yield passed(device.bdf, detail, evidence)


@check("PCI005", stage="pcie", title="No PCIe errors reported by the NPUs (AER)", requires=("PCI001",),
       settings=("pcie.aer_correctable_warn",))
def pcie_errors(ctx: CheckContext) -> Iterable[Outcome]:
    """Reads each NPU function's PCIe Advanced Error Reporting counters from sysfs (``aer_dev_correctable``,
    ``aer_dev_nonfatal``, ``aer_dev_fatal``; kernel 4.19+), counted since boot.

    A fatal error (FAIL) took the link down or corrupted a transaction: the chip dropped off or reset. A
    non-fatal one (WARN) lost a transaction the device noticed (a completion timeout, a malformed packet).
    Correctable errors are repaired by the link itself, but a storm of them (``BadTLP``, ``BadDLLP``,
    ``RxErr``) marks a marginal link (seating, riser, signal) that slows transfers and often precedes a fatal
    one: they WARN from ``pcie.aer_correctable_warn`` (profile; null: not judged). The kernel log rate-limits
    AER messages, so these counters are the true count. The link's partner (the root port) may count what
    the NPU's own counters miss: see `lspci -vv` for both ends.

    Fix: `dmesg | grep -i aer` for when and which error; reseat the card or the riser, check the slot's BIOS
    PCIe settings; a card that keeps reporting fatal errors goes to hardware support. The counters reset at
    boot.
    """
    facts = ctx.facts("pci")
    limit = setting(ctx, "pcie.aer_correctable_warn")
    devices = facts.physical_npus
    counted = [device for device in devices if device.aer]
    if not counted:
        yield skip("no AER counters in sysfs for the NPUs (a kernel before 4.19, AER off, or a container's "
                   "/sys)", subject="pci", evidence={"npus": len(devices)})
        return
    for device in counted:
        totals = {kind: total for kind, (total, _names) in (device.aer or {}).items()}
        nonzero = {kind: {name: count for name, count in names.items() if count}
                   for kind, (_total, names) in (device.aer or {}).items()}
        evidence = {"totals": totals, "counters": {kind: names for kind, names in nonzero.items() if names}}
        words = ", ".join(f"{totals[kind]} {kind}" for kind in ("fatal", "nonfatal", "correctable")
                          if totals.get(kind))
        named = "; ".join(f"{name} {count}" for names in nonzero.values() for name, count in names.items())
        detail = f"AER since boot: {words}" + (f" ({named})" if named else "")
        fix = (f"dmesg | grep -i -E 'aer|{device.bdf}'   # when and which error\n"
               f"lspci -vv -s {device.bdf} | grep -A4 -i 'advanced error'   # and the root port above it\n"
               "reseat the card or riser; a card with repeated fatal errors goes to hardware support")
        if totals.get("fatal"):
            yield fail(device.bdf, detail, evidence, fix=fix)
        elif totals.get("nonfatal"):
            yield warn(device.bdf, detail, evidence, fix=fix)
        elif limit is not None and totals.get("correctable", 0) >= int(limit):
            yield warn(device.bdf, detail + f": at or above {int(limit)} correctable", evidence, fix=fix)
        else:
            yield passed(device.bdf, f"AER since boot: {totals.get('correctable', 0)} correctable, no "
                                     "uncorrectable error", evidence)


@check("PCI004", stage="pcie", title="NPU device nodes present and accessible")
def device_nodes(ctx: CheckContext) -> Iterable[Outcome]:
    """The runtime opens /dev/davinci<N> (one per chip) and /dev/davinci_manager, /dev/devmm_svm and
    /dev/hisi_hdc; all must exist and be readable and writable by the training user.

    The usual container mistake: only /dev/davinci0 is passed with --device, or the three shared nodes are
    forgotten; then `npu-smi` fails with dcmi -8005 and torch_npu cannot initialise. On the host, a missing
    /dev/davinci<N> for a chip on the bus means the driver did not create it (see PCI002).

    Fix: pass every node to the container (`--device=/dev/davinciN --device=/dev/davinci_manager
    --device=/dev/devmm_svm --device=/dev/hisi_hdc`), and run as a user in the driver's group (HwHiAiUser).
    """
    facts = ctx.facts("device_nodes")
    physical = ctx.facts("pci").physical_npus
    if not facts.chips and not physical:
        yield skip("no /dev/davinci* device and no Ascend NPU on the PCI bus: nothing to open", subject="/dev",
                   cause=NOT_AN_ASCEND_NODE)
        return
    if not facts.chips:
        yield fail("/dev", f"no /dev/davinci<N> nodes although {len(physical)} NPU(s) are on the PCI bus",
                   evidence={"npus_on_pci": len(physical)}, fix=CONTAINER_DEVICES_FIX)
    for node in (*facts.chips, *facts.shared):
        evidence = {"exists": node.exists, "kind": node.kind, "readable": node.readable, "writable": node.writable}
        if not node.exists:
            yield fail(node.path, "missing", evidence, fix=CONTAINER_DEVICES_FIX)
        elif not (node.readable and node.writable):
            yield fail(node.path, "present but not readable and writable by this user", evidence,
                       fix=f"run as root or a member of the device's group: `ls -l {node.path}`; "
                           "`usermod -aG HwHiAiUser $USER`")
        else:
            note = "" if node.kind == "char" else f" (a {node.kind}, not a char device)"
            yield passed(node.path, "accessible" + note, evidence)
