"""What the dashboard shows, as plain functions of the live layer's data (no textual here: unit-testable).

Strings fit 80 columns; styles are rich style names the app applies.
"""

from __future__ import annotations

import textwrap
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from npudoctor.live.devices import DeviceReading, HostReading, Snapshot
from npudoctor.live.history import History, sparkline
from npudoctor.live.poller import PollState
from npudoctor.model.units import confidence_percent, human_bytes, percent, rise_phrase
from npudoctor.untrusted import shorten

# npu-smi's Health words -> (badge, style). Anything else (a new word) shows as itself, in the alarm style.
HEALTH_BADGES: Dict[str, Tuple[str, str]] = {
    "ok": ("OK", "green"), "warning": ("WARN", "bold yellow"), "alarm": ("ALARM", "bold red"),
    "critical": ("CRIT", "bold white on red"), "general warning": ("WARN", "bold yellow"),
}
# Column -> width: the table fits 80 columns with its cell padding.
DEVICE_COLUMNS = {"Chip": 6, "Health": 6, "AICore": 6, "HBM used / total": 21, "Temp": 4, "Power": 5,
                  "Held by": 15}
MEMORY_BAR = 10


def health_badge(health: Optional[str]) -> Tuple[str, str]:
    """>>> health_badge("Warning"), health_badge(None), health_badge("Unknown")
    (('WARN', 'bold yellow'), ('n/a', 'dim'), ('Unknown', 'bold red'))
    """
    if health is None:
        return "n/a", "dim"
    return HEALTH_BADGES.get(health.strip().lower(), (health.strip()[:7] or "?", "bold red"))


def bar(fraction: Optional[float], width: int) -> str:
    """>>> bar(0.5, 8), bar(None, 4), bar(1.7, 3)
    ('████░░░░', '····', '███')
    """
    if fraction is None:
        return "·" * width
    filled = round(min(max(fraction, 0.0), 1.0) * width)
    return "█" * filled + "░" * (width - filled)


def gib(mib: Optional[float]) -> str:
    """>>> gib(51397), gib(None), gib(512)
    ('50.2', '?', '0.5')
    """
    return "?" if mib is None else f"{mib / 1024:.1f}"


def memory_cell(device: DeviceReading, width: int = MEMORY_BAR) -> str:
    """>>> memory_cell(DeviceReading("npu:0", "NPU 0", "910B3", "OK", 90, 32768, 65536, 50, 300), 8)
    '████░░░░ 32.0/64.0G'
    """
    pct = device.mem_pct
    return f"{bar(None if pct is None else pct / 100, width)} {gib(device.mem_used_mib)}/{gib(device.mem_total_mib)}G"


def holders_cell(device: DeviceReading, width: int = 15) -> str:
    """Who holds the chip: ``120460 python3.10`` (the pid whole, the name cut) or ``3 processes``; ``-`` when
    npu-smi listed none."""
    if not device.holders:
        return "-"
    if len(device.holders) == 1:
        holder = device.holders[0]
        # cleaned before it is cut (a cut token no longer looks like one), and said so when cut ("python3.~")
        return shorten(f"{holder.pid} {holder.name or '?'}", width, ellipsis="~")
    return f"{len(device.holders)} processes"


def _num(value: Optional[float], unit: str, digits: int = 0) -> str:
    return "?" if value is None else f"{value:.{digits}f}{unit}"


def device_cells(device: DeviceReading) -> Tuple[str, ...]:
    """One Devices row (plain strings, the Health badge first-styled by the app)."""
    return (device.label, health_badge(device.health)[0], _num(device.util_pct, "%"), memory_cell(device),
            _num(device.temp_c, "C"), _num(device.power_w, "W"), holders_cell(device))


def age_text(state: PollState) -> Tuple[str, str]:
    """How fresh the device data is: (text, style). Stale data says its age and that a poll is late.

    >>> from npudoctor.live.poller import PollState
    >>> age_text(PollState(None, 12.3, 12.5, True, 3))
    ('STALE: data 12s old, npu-smi running for 12s', 'bold white on red')
    >>> age_text(PollState(None, 0.4, None, False, 3))
    ('updated 0s ago', 'green')
    """
    if state.age_s is None:
        if state.in_flight_s is not None:
            style = "bold red" if state.stale else "yellow"
            return f"waiting for the first reading ({state.in_flight_s:.0f}s)", style
        return "no reading yet", "yellow"
    if state.stale:
        late = f", npu-smi running for {state.in_flight_s:.0f}s" if state.in_flight_s is not None else ""
        return f"STALE: data {state.age_s:.0f}s old{late}", "bold white on red"
    return f"updated {state.age_s:.0f}s ago", "green"


def host_text(host: Optional[HostReading]) -> str:
    """>>> host_text(HostReading(12.5, 2048, 8192, 0.75, 4))
    'host: CPU 12% of 4 cores · memory 2.0/8.0 GiB · load 0.75'
    """
    if host is None:
        return "host: not in the recording (a replay shows the recorded chips only)"
    cores = f" of {host.cpus} cores" if host.cpus else ""
    load = f" · load {host.load_1m:.2f}" if host.load_1m is not None else ""
    return (f"host: CPU {_num(host.cpu_pct, '%')}{cores} · memory {gib(host.mem_used_mib)}/{gib(host.mem_total_mib)} "
            f"GiB{load}")


def devices_note(snapshot: Optional[Snapshot]) -> str:
    """Why there are no device rows, or a summary line of the chips' health."""
    if snapshot is None:
        return "polling the node..."
    if snapshot.error:
        return f"no device readings: {snapshot.error}"
    if snapshot.kind == "host":
        return snapshot.note
    unhealthy = [d for d in snapshot.devices if d.health is not None and d.health.strip().lower() != "ok"]
    held = sum(1 for d in snapshot.devices if d.holders)
    summary = f"{len(snapshot.devices)} chips, {held} in use"
    if unhealthy:
        summary += "; NOT OK: " + ", ".join(f"{d.label} {d.health}" for d in unhealthy)
        npus = list(dict.fromkeys(d.key.split(":")[1].split("/")[0] for d in unhealthy if d.key.count(":")))
        if npus:  # the command to run, with the NPU ids it needs
            summary += f" (details: npu-smi info -t health -i {npus[0]}" + (
                f"; likewise -i {', '.join(npus[1:])})" if len(npus) > 1 else ")")
    return summary


def history_lines(history: History, width: int = 80) -> List[str]:
    """One line per chip: AI Core % and HBM % sparklines side by side, with the newest values."""
    spark = max((width - 32) // 2, 4)
    lines = [f"{'chip':<8}{'AI Core %':<{spark + 6}}  HBM %"]
    for key in history.labels:
        util, mem = history.util[key], history.mem[key]
        last_util, last_mem = History.last(util), History.last(mem)
        lines.append(f"{history.labels[key]:<8}{sparkline(util, spark)} {_num(last_util, '%'):>4}  "
                     f"{sparkline(mem, spark)} {_num(last_mem, '%'):>4}")
    if len(lines) == 1:
        lines.append("(no device readings yet)")
    if history.host_cpu:
        lines += ["", f"{'':<8}{'host CPU %':<{spark + 6}}  host memory %",
                  f"{'host':<8}{sparkline(history.host_cpu, spark)} {_num(History.last(history.host_cpu), '%'):>4}  "
                  f"{sparkline(history.host_mem, spark)} {_num(History.last(history.host_mem), '%'):>4}"]
    return lines


def verdict_lines(verdict: Any, at_step: Optional[int], width: int = 80) -> List[Tuple[str, str]]:
    """The leak verdict as (text, style) lines: LEAK in red with the projected OOM step."""
    if verdict is None:
        return [("leak verdict: waiting for steps", "dim")]
    if verdict.kind == "insufficient-data":
        return [(f"leak verdict: not enough steps yet ({verdict.steps_analyzed} after warm-up)", "dim")]
    if verdict.kind == "warm-up":
        return [(f"leak verdict: growing, may still be warm-up ({human_bytes(verdict.slope_bytes_per_step)}/step, "
                 f"slowing) at step {at_step}", "dim")]
    out: List[Tuple[str, str]] = []
    if verdict.leak:
        oom = (f", out of memory at step {verdict.projected_oom_step}" if verdict.projected_oom_step is not None
               else "")
        out.append((f"LEAK ({verdict.kind}): +{human_bytes(verdict.slope_bytes_per_step)}/step, "
                    f"confidence {confidence_percent(verdict.confidence)}{oom}", "bold white on red"))
    else:
        out.append((f"no leak: {human_bytes(verdict.slope_bytes_per_step)}/step "
                    f"({rise_phrase(verdict.confidence)}) at step {at_step}", "green"))
    if verdict.reserved_growth:
        out.append(("reserved grows while allocated is flat: fragmentation or caching", "yellow"))
    if getattr(verdict, "host_fragmentation", False):
        out.append(("host RSS grows through malloc's held bytes, in-use flat: fragmentation", "yellow"))
    for advice in verdict.advice[:2]:
        out.extend((line, "dim") for line in textwrap.wrap(advice, width - 2, initial_indent="  ",
                                                           subsequent_indent="    "))
    return out


def training_lines(view: Any, width: int = 80) -> List[Tuple[str, str]]:
    """The Training panel: newest step, data-wait share, series as sparklines, the leak verdict."""
    state = "" if view.status == "following" else f": {view.status}"  # not "following FILE: following"
    lines: List[Tuple[str, str]] = [(f"following {view.path}{state}", "bold")]
    last = view.last
    if last is None:
        lines.append(("no npudoctor.memlog step yet (written by `npudoctor train-step --log FILE` or "
                      "MemoryMonitor)", "dim"))
        return lines
    wait = "?" if view.data_wait_share is None else percent(view.data_wait_share, 0)
    step_s = "?" if last.get("step_s") is None else f"{last['step_s'] * 1000:.0f} ms"
    loss = "?" if last.get("loss") is None else f"{last['loss']:.4f}"
    lines.append((f"step {last['step']}  step time {step_s}  data wait {wait}  loss {loss}  "
                  f"device {last.get('device') or '?'}", ""))
    spark = max(width - 30, 10)
    total = last.get("device_total_bytes")
    top = max([v for v in view.reserved + view.allocated if v is not None] + [1.0])
    series: Sequence[Tuple[str, List[Optional[float]], float, float, str]] = (
        ("allocated", view.allocated, 0.0, top, human_bytes(last.get("allocated_bytes"))),
        ("reserved", view.reserved, 0.0, top, human_bytes(last.get("reserved_bytes"))),
        ("loss", view.loss, *_range(view.loss), loss),
        ("step time", view.step_s, *_range(view.step_s), step_s),
        ("host RSS", view.rss, *_range(view.rss), human_bytes(last.get("rss_bytes"))),
    )
    for name, values, low, high, now in series:
        if all(v is None for v in values):  # a CPU run records no device memory: no "allocated ?" row
            continue
        lines.append((f"{name:<10}{sparkline(values, spark, low, high)} {now:>12}", ""))
    if total:
        lines.append((f"device memory {human_bytes(total)}", "dim"))
    lines.extend(verdict_lines(view.verdict, view.verdict_at_step, width))
    lines.extend(fallback_lines(getattr(view, "cpu_fallbacks", None) or [], width))
    return lines


def fallback_lines(fallbacks: Sequence[Any], width: int = 80) -> List[Tuple[str, str]]:
    """The CPU-fallback warnings the run printed, newest table: one line, the operators by first step.

    >>> fallback_lines([{"op": "aten::isin.Tensor_Tensor_out", "first_step": 7, "count": 1}])
    [('CPU fallback: aten::isin.Tensor_Tensor_out (from step 7)', 'yellow')]
    """
    if not fallbacks:
        return []
    parts = [f"{f['op']} (from step {f['first_step']}" + (f", x{f['count']}" if f.get("count", 1) > 1 else "") + ")"
             for f in fallbacks]
    # operator names from a file: redacted before the line is cut (a cut token would no longer look like one)
    return [(shorten("CPU fallback: " + ", ".join(parts), max(width, 13)), "yellow")]


def _range(values: Sequence[Optional[float]]) -> Tuple[float, float]:
    present = [v for v in values if v is not None]
    if not present:
        return 0.0, 1.0
    return min(present), max(present) if max(present) > min(present) else min(present) + 1.0


def finding_cells(finding: Any) -> Tuple[str, str, str, str]:
    """(status, id, subject, detail) of a check finding."""
    return finding.status.value.upper(), finding.id, finding.subject or "-", finding.detail.splitlines()[0][:200] \
        if finding.detail else ""


#: The findings table's width: 80 columns less the vertical scrollbar (2).
FINDINGS_WIDTH = 78
SUBJECT_WIDTH = 16
FINDING_COLUMNS = ("Status", "ID", "Subject", "Detail")


def finding_rows(findings: Sequence[Any], width: int = FINDINGS_WIDTH) -> List[Tuple[str, str, str, str]]:
    """The findings table's rows, worst first, the subject and detail cut (``~``) so a row fits ``width`` (each
    of the 4 cells is padded by a space each side): a wider row gave the table a horizontal scrollbar, whose
    thumb, like any scrollbar's, showed as stray block glyphs where the terminal lost its colours (Enter shows
    the whole finding)."""
    rows = [finding_cells(f) for f in ordered_findings(findings)]
    if not rows:
        return []
    status, ident, subject = (max(len(FINDING_COLUMNS[column]), *(len(row[column]) for row in rows))
                              for column in range(3))
    subject = min(subject, SUBJECT_WIDTH)
    detail = max(width - status - ident - subject - 2 * 4, 10)
    return [(row[0], row[1], shorten(row[2], subject, ellipsis="~"), shorten(row[3], detail, ellipsis="~"))
            for row in rows]


def ordered_findings(findings: Sequence[Any]) -> List[Any]:
    """Worst first (FAIL, ERROR, WARN, SKIP, PASS), stable within a status."""
    rank = {"fail": 0, "error": 1, "warn": 2, "skip": 3, "pass": 4}
    return sorted(findings, key=lambda f: rank.get(f.status.value, 5))


def report_summary(report: Any, took_s: float, at: float) -> str:
    counts = report.summary.to_dict()
    parts = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    return f"check at {time.strftime('%H:%M:%S', time.localtime(at))} ({took_s:.1f}s): {parts or 'no findings'}"


def finding_detail(finding: Any) -> str:
    """Everything a finding says, for its detail view."""
    lines = [f"{finding.id} {finding.status.value.upper()}  {finding.title}", f"subject: {finding.subject or '-'}",
             "", finding.detail or "(no detail)"]
    if finding.evidence:
        lines += ["", "evidence:"] + [f"  {key}: {value}" for key, value in finding.evidence.items()]
    if finding.fix:
        lines += ["", "fix:", f"  {finding.fix}"]
    lines += ["", f"more: npudoctor explain {finding.id}"]
    return "\n".join(lines)


def log_finding_line(finding: Any) -> Tuple[str, str]:
    when = "--:--:--" if finding.first_seen is None else time.strftime("%H:%M:%S", time.localtime(finding.first_seen))
    style = {"error": "bold red", "warning": "yellow"}.get(finding.severity, "dim")
    return f"{when} {finding.severity.upper():<7} {finding.title} [{finding.subject}] x{finding.count}", style


HELP = """\
npudoctor dashboard: the node and the job side by side

  1 2 3 4    Devices, History, Training, Findings (also Tab, Shift+Tab,
             or a mouse click on the tab)
  Up/Down    move in the chip and finding tables
  Enter      details of the chip or finding under the cursor; Esc closes
  r          re-run `npudoctor check` in the background (Findings)
  + / -      replay faster / slower (--replay, --demo)
  ?          this help          q  quit

Devices: one row per chip from `npu-smi info` (nvidia-smi on CUDA
nodes), polled in the background. A late poll turns the status line
red with the age of the data: npu-smi can hang on a sick node.
History: AI Core % and HBM % per chip over the last two minutes.
Training: --follow FILE.jsonl (npudoctor.memlog), live leak verdict.
Findings: the check report, and new log findings under --logs DIR.
"""


def detail_lines(device: DeviceReading, history: History, width: int = 76) -> List[str]:
    """The per-chip detail view: every reading, the holders, and longer sparklines."""
    badge = health_badge(device.health)[0]
    said = device.health or "n/a"
    lines = [f"{device.label}  {device.name}  health {said}" + (f" ({badge})" if badge.lower() != said.lower() else ""),
             f"bus id {device.bus_id or '?'}   key {device.key}", "",
             f"AI Core   {_num(device.util_pct, '%')}",
             f"HBM       {memory_cell(device, 30)}"
             + (f"  ({device.mem_pct:.0f}%)" if device.mem_pct is not None else ""),
             f"temp      {_num(device.temp_c, ' C')}",
             f"power     {_num(device.power_w, ' W', 1)}", ""]
    spark = max(width - 14, 10)
    if device.key in history.util:
        lines.append(f"AI Core % {sparkline(history.util[device.key], spark)}")
        lines.append(f"HBM %     {sparkline(history.mem[device.key], spark)}")
        lines.append("")
    if device.holders:
        lines.append("held by:")
        lines.extend(f"  pid {h.pid:<9} {h.name or '(no name)':<24} {_num(h.memory_mib, ' MiB')}"
                     for h in device.holders)
    else:
        lines.append("held by: no process (as npu-smi lists them)")
    if device.health is not None and device.health.strip().lower() != "ok":
        npu = device.key.split(":")[1].split("/")[0]
        lines += ["", f"why: npu-smi info -t health -i {npu}   (error codes: npudoctor logs explain CODE)"]
    return lines
