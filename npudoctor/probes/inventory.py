"""The node's inventory: chips, versions, kernel, OS and host name, as every report carries it.

It is composed from facts the other probes gathered (npu-smi, PCI, driver/firmware, CANN, the target Python);
the only system access of its own is ``/etc/os-release``, through the runner like every probe. The fleet view
compares inventories across nodes (version drift) and site profiles pin expected values (``inventory:``).

The shape (``None`` where a fact was not gathered or could not be read)::

    {"hostname": "node-a2-01", "os": "Ubuntu 22.04.4 LTS", "kernel": "5.10.0", "arch": "aarch64",
     "chips": {"model": "910B3", "family": "910B", "count": 8, "hbm_mib": 65536, "bus_ids": [...],
               "link_width": 16, "link_speed_gts": 16.0, "source": "npu-smi"},
     "driver": "23.0.7", "firmware": "7.1.0.11.220", "cann_toolkit": "8.0.0", "nnae": None,
     "python": "3.10.14", "torch": "2.1.0+cpu", "torch_npu": "2.1.0.post10"}

``devices`` lists every chip (npu-smi row and PCIe link) for chip tables; it is never compared between
nodes. ``model`` is npu-smi's chip name, ``family`` the PCI device id's; ``hbm_mib``, ``link_width`` and
``link_speed_gts`` are one number when every chip agrees, else the sorted list
of the values seen (a node whose chips disagree is itself worth a look).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional

from npudoctor.model.inventory import CHIP_FIELDS, SOFTWARE_FIELDS
from npudoctor.parsers.keyvalue import parse_key_values
from npudoctor.probes import provides

OS_RELEASE = "/etc/os-release"
# The facts the inventory is built from (gathered by their own probes).
SOURCES = ("npu_smi", "pci", "ascend_driver", "cann", "python")


@provides("os_release")
def os_release(ctx: Any) -> Dict[str, str]:
    """``cat /etc/os-release``: ``NAME``, ``VERSION_ID``, ``PRETTY_NAME``...; empty when it cannot be read."""
    content = ctx.runner.read_text(OS_RELEASE, max_bytes=64 * 1024)
    if content.text is None:
        return {}
    return dict(parse_key_values(content.text).values)


def build_inventory(ctx: Any, gather: bool = False) -> Dict[str, Any]:
    """The inventory from the facts in ``ctx``. With ``gather`` false only facts some check already asked
    for are used (a narrowed ``--only`` run does not start npu-smi for its summary); ``/etc/os-release`` and
    the runner's host facts are always read (cheap)."""

    def facts(name: str) -> Any:
        return ctx.facts_or_none(name) if gather else ctx.gathered(name)

    host: Mapping[str, Any] = {}
    try:
        host = ctx.runner.host() or {}
    except Exception:  # host facts are decoration; never lose a report over them
        host = {}
    release = ctx.facts_or_none("os_release") or {}
    inventory: Dict[str, Any] = {
        "hostname": host.get("hostname"),
        "os": release.get("PRETTY_NAME") or _joined(release.get("NAME"), release.get("VERSION_ID")),
        "kernel": host.get("kernel"),
        "arch": host.get("arch"),
        # the per-NPU reports of --level 2, only where a check already read them (never started for this)
        "chips": chips_inventory(facts("npu_smi"), facts("pci"), ctx.gathered("npu_smi_detail")),
    }
    inventory.update(software_inventory(facts("ascend_driver"), facts("cann"), facts("python")))
    return inventory


def chips_inventory(npu_smi: Any, pci: Any, detail: Any = None) -> Dict[str, Any]:
    """Model, count, HBM and bus ids from the npu-smi table, else from the PCI bus; link width from PCI; the
    NPUs' firmware from ``npu-smi info -t board`` (``detail``, level 2) where it was read."""
    chips: Dict[str, Any] = dict.fromkeys(CHIP_FIELDS)
    chips["source"] = None
    table = getattr(npu_smi, "table", None)
    devices = list(pci.physical_npus) if pci is not None and not pci.error else []
    if table is not None and table.chips:
        chips.update(
            model=_one_or_list(c.name for c in table.chips if c.name),
            count=len(table.npu_ids),
            hbm_mib=_one_or_list(_memory_mib(c) for c in table.chips),
            bus_ids=sorted({_short_bdf(c.bus_id) for c in table.chips if c.bus_id}) or None,
            source="npu-smi",
        )
    elif devices:
        chips.update(count=len(devices), source="pci")
    elif pci is not None and not pci.error:
        chips.update(count=0, source="pci")  # the bus was read and holds no NPU
    boards = _boards_by_npu(detail)
    chips["npu_firmware"] = _one_or_list(board["firmware"] for board in boards.values())
    chips["devices"] = _device_rows(table, devices, npu_smi, boards)
    if devices:
        chips["family"] = _one_or_list(d.family for d in devices)
        chips["bus_ids"] = chips["bus_ids"] or sorted(_short_bdf(d.bdf) for d in devices)
        chips["link_width"] = _one_or_list(d.current_link_width for d in devices)
        chips["link_speed_gts"] = _one_or_list(d.current_link_speed_gts for d in devices)
    return chips


def _boards_by_npu(detail: Any) -> Dict[int, Dict[str, Optional[str]]]:
    """Firmware version and serial number of each NPU, from `npu-smi info -t board -i N` (level 2)."""
    boards: Dict[int, Dict[str, Optional[str]]] = {}
    for query in detail.of_topic("board") if detail is not None else ():
        block = query.for_chip(None) if query.error is None else None
        if block is not None:
            boards[query.npu_id] = {"firmware": block.text("firmware version"),
                                    "serial": block.text("serial number")}
    return boards


def _alarm_codes(npu_smi: Any, subject: str) -> Optional[str]:
    """The fault codes of a chip's `npu-smi info -t health` (read for chips not OK), comma-separated."""
    from npudoctor.parsers.npu_smi import fault_codes

    health = (getattr(npu_smi, "health_details", None) or {}).get(subject) or {}
    codes = [code for key, value in health.items() if key.lower().startswith("error code")
             for code in fault_codes(value)]
    return ",".join(codes) or None


def _device_rows(table: Any, devices: List[Any], npu_smi: Any = None,
                 boards: Optional[Dict[int, Dict[str, Optional[str]]]] = None) -> List[Dict[str, Any]]:
    """One row per chip (npu-smi), with its logic id, PCIe link from sysfs, alarm codes, firmware and serial
    number (level 2), for the chip tables of reports; PCI functions alone when npu-smi gave no table."""
    links = {_short_bdf(d.bdf): d for d in devices}
    rows: List[Dict[str, Any]] = []
    for chip in table.chips if table is not None else ():
        bus = _short_bdf(chip.bus_id) if chip.bus_id else None
        device = links.get(bus) if bus else None
        ids = npu_smi.chip_ids(chip.npu_id, chip.chip_id) if npu_smi is not None else None
        rows.append({"npu": chip.npu_id, "chip": chip.chip_id, "logic_id": ids.logic_id if ids else None,
                     "name": chip.name, "health": chip.health, "alarm": _alarm_codes(npu_smi, chip.subject),
                     "bus_id": bus, "hbm_mib": _memory_mib(chip), "temp_c": chip.temp_c, "power_w": chip.power_w,
                     "link_width": device.current_link_width if device else None,
                     "link_speed_gts": device.current_link_speed_gts if device else None,
                     "firmware": (boards or {}).get(chip.npu_id, {}).get("firmware"),
                     "serial": (boards or {}).get(chip.npu_id, {}).get("serial")})
    if not rows:
        rows = [{"npu": None, "chip": None, "logic_id": None, "name": d.family, "health": None, "alarm": None,
                 "bus_id": _short_bdf(d.bdf), "hbm_mib": None, "temp_c": None, "power_w": None,
                 "link_width": d.current_link_width, "link_speed_gts": d.current_link_speed_gts,
                 "firmware": None, "serial": None} for d in devices]
    return rows


def software_inventory(driver: Any, cann: Any, python: Any) -> Dict[str, Optional[str]]:
    result: Dict[str, Optional[str]] = dict.fromkeys(SOFTWARE_FIELDS)
    if driver is not None:
        result["driver"] = driver.driver_version
        result["firmware"] = driver.firmware_version
    if cann is not None:
        result["cann_toolkit"] = _cann_version(cann, "toolkit")
        result["nnae"] = _cann_version(cann, "nnae")
    if python is not None and not python.error:
        result["python"] = python.version
        for name in ("torch", "torch_npu"):
            package = python.package(name)
            result[name] = package.version if package is not None else None
    return result


def _cann_version(cann: Any, package: str) -> Optional[str]:
    """The version of the install in use when it is this package, else of the first one found."""
    active = cann.active
    if active is not None and active.package == package:
        return str(active.version)
    versions = [i.version for i in cann.installs if i.package == package]
    return str(versions[0]) if versions else None


def _memory_mib(chip: Any) -> Optional[int]:
    return chip.hbm_total_mib if chip.hbm_total_mib is not None else chip.memory_total_mib


def _short_bdf(bus_id: str) -> str:
    """npu-smi prints ``0000:C1:00.0`` (upper case) and sysfs ``0000:c1:00.0``: one spelling."""
    return bus_id.strip().lower()


def _one_or_list(values: Iterable[Any]) -> Any:
    seen: List[Any] = sorted({v for v in values if v is not None},
                             key=lambda v: (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)))
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else seen


def _joined(*parts: Optional[str]) -> Optional[str]:
    text = " ".join(p for p in parts if p)
    return text or None


@provides("inventory")
def inventory_facts(ctx: Any) -> Dict[str, Any]:
    """The whole inventory, gathering every fact it is built from (what the ``site`` checks compare)."""
    return build_inventory(ctx, gather=True)
