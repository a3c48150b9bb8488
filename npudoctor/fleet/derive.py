"""A site profile from a known-good node (``npudoctor profile derive BUNDLE|REPORT -o site.yaml``).

The node's inventory becomes the profile's ``inventory:`` pins (chip model, count, HBM, bus ids, PCIe link
width and speed, driver, firmware, CANN, Python, torch, torch_npu, OS, kernel), each with a comment saying
where the value came from; thresholds stay those of the base profile (``extends:``). ``npudoctor check
--profile site.yaml`` on another node then reports every difference as a SITE001 finding.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npudoctor.errors import InputError
from npudoctor.fleet.reportdoc import MAX_REPORT_BYTES, ReportShapeError, check_report
from npudoctor.model.inventory import CHIP_FIELDS, SOFTWARE_FIELDS, SYSTEM_FIELDS
from npudoctor.parsers import jsondoc
from npudoctor.probes.safe_open import UnsafeFile, read_file
from npudoctor.untrusted import clean, one_line

# Where each inventory value comes from on a node, for the comments of the derived profile.
ORIGIN: Dict[str, str] = {
    "chips.model": "npu-smi info, chip Name",
    "chips.family": "PCI device id (/sys/bus/pci/devices/*/device)",
    "chips.count": "NPUs in npu-smi info (else on the PCI bus)",
    "chips.hbm_mib": "npu-smi info, HBM-Usage total per chip",
    "chips.bus_ids": "npu-smi info Bus-Id / PCI addresses; remove if your nodes' slots differ",
    "chips.link_width": "/sys/bus/pci/devices/*/current_link_width",
    "chips.link_speed_gts": "/sys/bus/pci/devices/*/current_link_speed",
    "chips.npu_firmware": "npu-smi info -t board -i N, Firmware Version (check --level 2)",
    "driver": "/usr/local/Ascend/driver/version.info",
    "firmware": "/usr/local/Ascend/firmware/version.info",
    "cann_toolkit": "ascend_toolkit_install.info (or version.cfg) of the toolkit in use",
    "nnae": "ascend_nnae_install.info",
    "python": "the training interpreter (python3 on PATH, or --python)",
    "torch": "package metadata of the training interpreter",
    "torch_npu": "package metadata of the training interpreter",
    "os": "/etc/os-release PRETTY_NAME",
    "kernel": "uname -r",
    "arch": "uname -m",
}


class DeriveError(InputError):
    """Unreadable input or an output that exists: one line for the user."""


def load_source(path: str, base: Optional[str] = None) -> Tuple[Dict[str, Any], str]:
    """The report document of ``path`` (a report JSON, or a bundle replayed under the ``base`` profile) and
    how to name it in the comments."""
    from npudoctor import api

    if os.path.isdir(path) or path.endswith((".tar.gz", ".tgz", ".tar")):
        try:
            report = api.run_checks(api.make_runner(bundle=path), api.load_profile(base))
        except api.UsageError as exc:
            raise DeriveError(str(exc)) from None
        return report.to_dict(), f"bundle {os.path.basename(path.rstrip('/'))}"
    try:  # the safe opener: a FIFO would block open() forever, /dev/zero would never end
        data = read_file(path, MAX_REPORT_BYTES, whole=True).data
    except UnsafeFile as exc:
        raise DeriveError(str(exc)) from None
    try:
        document = jsondoc.loads(data, path)
    except jsondoc.JsonDocumentError as exc:
        raise DeriveError(f"{exc}: neither a bundle nor an npudoctor.report/1 JSON document") from None
    try:
        check_report(document)
    except ReportShapeError as exc:
        raise DeriveError(f"{path}: {exc}") from None
    if not isinstance(document.get("inventory"), dict) or not document["inventory"]:
        raise DeriveError(f"{path}: the report has no inventory (made by an npudoctor older than 0.1 fleet)")
    return document, f"report {os.path.basename(path)}"


def _scalar(value: Any) -> str:
    """A YAML scalar: numbers as they are, text always double-quoted (versions like 8.0 stay text)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    # A value of the node's is pinned redacted (a token in a version string never reaches a site's repository);
    # printable: no C1 line break (NEL) either
    return json.dumps(clean(str(value)), ensure_ascii=False)


def derive(document: Mapping[str, Any], source: str, base: Optional[str] = None, name: Optional[str] = None) -> str:
    """The site profile's YAML text for the node of ``document``."""
    inventory: Mapping[str, Any] = document.get("inventory") or {}
    chips: Mapping[str, Any] = inventory.get("chips") or {}
    tool: Mapping[str, Any] = document.get("tool") or {}
    # The report is someone else's text: what goes into a comment line stays on that line (a host name with a
    # newline would otherwise add a real key to the profile).
    host = one_line(clean(str(inventory.get("hostname") or (document.get("host") or {}).get("hostname")
                               or "unknown-node")))
    base = base or one_line(clean(str(tool.get("profile") or "default")))
    name = name or f"site-from-{host}"
    started = one_line(clean(str((document.get("run") or {}).get("started") or document.get("recorded")
                                 or "at an unknown time")))
    source = one_line(clean(source))
    summary = document.get("summary") or {}
    failing = int(summary.get("fail", 0) or 0) + int(summary.get("error", 0) or 0)
    lines: List[str] = [
        f"# Site profile derived by `npudoctor profile derive` from {host} ({source}, checked {started}).",
        "# Each pinned value below was seen on that node (the comment says where it was read); "
        "`npudoctor check",
        "# --profile THIS_FILE` reports every difference on another node as a SITE001 finding. "
        "Thresholds",
        f"# are those of the base profile ({base}); add any you want to change. Delete a pin to stop checking it.",
    ]
    if failing:
        lines.append(f"# WARNING: the reference node itself had {failing} FAIL/ERROR finding(s): is it really good?")
    lines += [
        f"name: {_scalar(name)}",
        f"extends: {_scalar(base)}",
        f"description: {_scalar(f'derived from {host} ({source})')}",
        "",
    ]
    node_lines = []
    if isinstance(chips.get("count"), int) and chips["count"]:
        node_lines.append(f"  npu_count: {chips['count']}  # {ORIGIN['chips.count']}")
    if isinstance(chips.get("family"), str):
        node_lines.append(f"  chip_family: {_scalar(chips['family'])}  # {ORIGIN['chips.family']}")
    if node_lines:
        lines += ["node:", *node_lines, ""]
    lines += ["inventory:", "  chips:"]
    for key in CHIP_FIELDS:
        lines.append(_pin(f"chips.{key}", chips.get(key), indent=4))
    for key in (*SOFTWARE_FIELDS, *SYSTEM_FIELDS):
        lines.append(_pin(key, inventory.get(key), indent=2))
    return "\n".join(lines) + "\n"


def _pin(key: str, value: Any, indent: int) -> str:
    leaf = key.rsplit(".", 1)[-1]
    if value is None:
        return f"{' ' * indent}# {leaf}: not known on the reference node ({ORIGIN.get(key, '')}): not pinned"
    return f"{' ' * indent}{leaf}: {_scalar(value)}  # {ORIGIN.get(key, 'seen on the reference node')}"


def failing_findings(document: Mapping[str, Any]) -> List[str]:
    """The IDs of the FAIL/ERROR findings of the reference node's report (a node not accepted), in order."""
    findings = document.get("findings") or []
    return list(dict.fromkeys(str(f.get("id", "?")) for f in findings
                              if isinstance(f, Mapping) and f.get("status") in ("fail", "error")))
