"""``--format prometheus``: the node_exporter textfile-collector format (Prometheus text exposition 0.0.4).

One series per check and status (every status, zeros included, so an alert on ``status="fail"`` sees the value
fall back to 0 instead of the series vanishing), the totals, an ``npudoctor_node_info`` series whose labels
are the inventory, and the run's start time and duration::

    npudoctor_check_findings{check="PCI002",stage="pcie",status="fail"} 1
    npudoctor_chip_findings{npu_id="3",chip_id="0",bus_id="0000:82:00.0",check="SMI002",status="fail"} 1
    npudoctor_chip_ok{npu_id="3",chip_id="0",bus_id="0000:82:00.0"} 0
    npudoctor_node_info{hostname="node-a2-01",chip_model="910B3",driver="23.0.7",...} 1
    npudoctor_last_run_timestamp_seconds 1.7648e+09
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from npudoctor.model.chip import Chip, chip_of, chips_by_bus
from npudoctor.model.finding import STATUS_ORDER, Report, Status, failing
from npudoctor.model.profile import flatten
from npudoctor.untrusted import clean

PREFIX = "npudoctor"
# Inventory fields that become labels of the info series: (label, dotted inventory key).
INFO_LABELS: Tuple[Tuple[str, str], ...] = (
    ("hostname", "hostname"), ("os", "os"), ("kernel", "kernel"), ("arch", "arch"),
    ("chip_model", "chips.model"), ("chip_count", "chips.count"), ("chip_hbm_mib", "chips.hbm_mib"),
    ("driver", "driver"), ("firmware", "firmware"), ("cann_toolkit", "cann_toolkit"), ("nnae", "nnae"),
    ("python", "python"), ("torch", "torch"), ("torch_npu", "torch_npu"),
)


def escape_label(value: Any) -> str:
    r"""A label value as the exposition format wants it: the node's text cleaned as in every report (no
    secret, no control character: :func:`npudoctor.untrusted.clean`), then backslash, double quote and newline
    escaped.

    >>> escape_label('a "b"\\c\nd\x1b]52;c;aGk=\x07')
    'a \\"b\\"\\\\c\\nd'
    """
    text = value if isinstance(value, str) else ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return clean(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Iterable[Tuple[str, Any]]) -> str:
    return "{" + ",".join(f'{name}="{escape_label(value)}"' for name, value in pairs) + "}"


def started_epoch(report: Report) -> Optional[float]:
    return float(report.started) if isinstance(report.started, (int, float)) else None


def chip_labels(chip: Chip) -> Tuple[Tuple[str, Any], ...]:
    """The labels that name a chip in every per-chip series (an unknown value is the empty string)."""
    return (("npu_id", chip.npu_id), ("chip_id", "" if chip.chip_id is None else chip.chip_id),
            ("bus_id", chip.bus_id or ""))


def _chip_order(item: Tuple[Chip, Any]) -> Tuple[int, int]:
    chip = item[0]
    return chip.npu_id, -1 if chip.chip_id is None else chip.chip_id


def render(report: Report, fail_on: str = "fail", age: Optional[Tuple[float, float]] = None) -> str:
    """The textfile for ``report``; ``age`` = (seconds since the report was written, the reader's maximum age)
    when the text is rendered from a report kept on the node rather than from a run just made."""
    lines: List[str] = []

    def family(name: str, kind: str, help_text: str, samples: Iterable[Tuple[str, Any]]) -> None:
        lines.append(f"# HELP {PREFIX}_{name} {help_text}")
        lines.append(f"# TYPE {PREFIX}_{name} {kind}")
        for labels, value in samples:
            lines.append(f"{PREFIX}_{name}{labels} {_number(value)}")

    per_check: Dict[Tuple[str, str], Dict[Status, int]] = {}
    for finding in report.findings:
        counts = per_check.setdefault((finding.id, finding.stage), dict.fromkeys(STATUS_ORDER, 0))
        counts[finding.status] += 1
    family("check_findings", "gauge", "Findings of one check by status in the last run.",
           ((_labels((("check", check_id), ("stage", stage), ("status", status.value))), count)
            for (check_id, stage), counts in per_check.items() for status, count in counts.items()))
    by_bus = chips_by_bus(report.findings)
    per_chip: Dict[Chip, Dict[str, Dict[Status, int]]] = {}
    for finding in report.findings:
        chip = chip_of(finding, by_bus)
        if chip is not None:
            counts = per_chip.setdefault(chip, {}).setdefault(finding.id, dict.fromkeys(STATUS_ORDER, 0))
            counts[finding.status] += 1
    if per_chip:
        family("chip_findings", "gauge", "Findings about one NPU chip by check and status in the last run.",
               ((_labels((*chip_labels(chip), ("check", check_id), ("status", status.value))), count)
                for chip, checks in sorted(per_chip.items(), key=_chip_order) for check_id, counts in checks.items()
                for status, count in counts.items()))
        bad = {Status.ERROR, *failing(fail_on)}
        family("chip_ok", "gauge", "1 when no finding about this NPU chip failed in the last run, else 0.",
               ((_labels(chip_labels(chip)),
                 0 if any(counts[status] for counts in checks.values() for status in bad) else 1)
                for chip, checks in sorted(per_chip.items(), key=_chip_order)))
    summary = report.summary.counts
    family("findings", "gauge", "Findings by status in the last run.",
           ((_labels((("status", status.value),)), summary.get(status, 0)) for status in STATUS_ORDER))
    family("node_ok", "gauge", "1 when the last run found nothing failed (exit code 0), else 0.",
           [("", 1 if report.exit_code(fail_on) == 0 else 0)])
    inventory = flatten(report.inventory or {})  # dotted keys, as the fleet view compares inventories
    info = [(label, inventory.get(key)) for label, key in INFO_LABELS]
    info += [("profile", report.tool.get("profile")), ("version", report.tool.get("version"))]
    family("node_info", "gauge", "The node's inventory as labels (always 1).",
           [(_labels((name, "" if value is None else value) for name, value in info), 1)])
    chips = inventory.get("chips.count")
    if isinstance(chips, int):
        family("chips", "gauge", "NPUs seen (npu-smi, else the PCI bus).", [("", chips)])
    started = started_epoch(report)
    if started is not None:
        family("last_run_timestamp_seconds", "gauge", "When the last run started (Unix time).", [("", started)])
    duration = report.duration_s
    if isinstance(duration, (int, float)):
        family("last_run_duration_seconds", "gauge", "How long the last run took.", [("", duration)])
    if age is not None:
        age_s, max_age_s = age
        family("report_age_seconds", "gauge", "How old the node's last report was when this text was written.",
               [("", round(age_s, 3))])
        family("report_stale", "gauge", "1 when the node's last report is older than the reader's maximum age.",
               [("", 1 if age_s > max_age_s else 0)])
    return "\n".join(lines) + "\n"


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))
