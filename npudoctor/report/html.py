"""``report.html``: one self-contained page a person attaches to an acceptance ticket.

Verdict first, then the node (inventory and chip table), then each stage with its findings and fixes, then the
pictures where one says more than a table: bus bandwidth against message size (the collective probe) and
memory over training steps. No scripts, no style sheets or fonts from elsewhere, no images but inline SVG:
the page renders the same offline, years later.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor.report import symbols
from npudoctor.untrusted import printable

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:72em;color:#222}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
.verdict{padding:1em 1.2em;border-radius:6px;color:#fff}.ok{background:#2e7d32}.bad{background:#c62828}
.warnv{background:#ef6c00}table{border-collapse:collapse;width:100%;margin:.5em 0}
td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}th{background:#f3f3f3}
.pass{color:#2e7d32}.warn{color:#ef6c00}.fail,.error{color:#c62828;font-weight:bold}.skip{color:#777}
.fix{font-family:ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;background:#f7f7f7}
details{margin:.3em 0}svg{background:#fff;border:1px solid #ddd;margin:.5em 1em .5em 0}
.muted{color:#777}
"""
SYMBOL = {status.value: symbol for status, symbol in symbols.SYMBOL.items()}  # the house symbols, by name
COLORS = ("#1565c0", "#2e7d32", "#c62828", "#6a1b9a", "#ef6c00", "#00838f")


def _e(value: Any) -> str:
    """Text for the page: no control character (a raw ESC in a report stays out of the document), then
    HTML-escaped."""
    return escape(printable("" if value is None else str(value)))


def render(report: Mapping[str, Any], memory: Optional[Sequence[Mapping[str, Any]]] = None,
           title: str = "npudoctor acceptance report") -> str:
    """The page for a ``npudoctor.report/1`` document (with an optional ``collective`` block) and optional
    memory records (``npudoctor.memlog/1`` lines: ``step`` and ``*_bytes`` keys)."""
    inventory: Mapping[str, Any] = report.get("inventory") or {}
    findings: List[Mapping[str, Any]] = list(report.get("findings") or [])
    summary: Mapping[str, Any] = report.get("summary") or {}
    host = inventory.get("hostname") or (report.get("host") or {}).get("hostname") or "?"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{_e(title)}: {_e(host)}</title><style>{STYLE}</style></head><body>"]
    parts.append(_verdict(host, findings, summary, report))
    parts.append(_node(inventory, report))
    parts.append(_stages(findings))
    plots = _plots(report.get("collective"), memory, findings)
    if plots:
        parts.append("<h2>Pictures</h2>" + plots)
    parts.append(f'<p class="muted">npudoctor {_e((report.get("tool") or {}).get("version"))}, schema '
                 f'{_e(report.get("schema"))}, source {_e(report.get("source"))}.</p></body></html>')
    return "\n".join(parts) + "\n"


def _verdict(host: str, findings: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
             report: Mapping[str, Any]) -> str:
    failed = [f for f in findings if f.get("status") in ("fail", "error")]
    warned = [f for f in findings if f.get("status") == "warn"]
    if failed:
        css, text = "bad", f"NOT ACCEPTED: {len(failed)} finding(s) failed on {host}"
    elif warned:
        css, text = "warnv", f"ACCEPTED WITH WARNINGS: {len(warned)} warning(s) on {host}"
    else:
        css, text = "ok", f"ACCEPTED: nothing failed on {host}"
    counts = ", ".join(f"{summary.get(k, 0)} {k}" for k in ("pass", "warn", "fail", "skip", "error"))
    run = report.get("run") or {}
    tool = report.get("tool") or {}
    lines = [f'<div class="verdict {css}"><h1>{_e(text)}</h1>{_e(counts)}; profile {_e(tool.get("profile"))}, '
             f'checked {_e(run.get("started"))}</div>']
    if failed:
        lines.append("<h2>What to fix first</h2><table><tr><th>check</th><th>subject</th><th>what</th>"
                     "<th>fix</th></tr>")
        for f in failed:
            lines.append(f'<tr><td class="{_e(f.get("status"))}">{_e(f.get("id"))}</td><td>{_e(f.get("subject"))}'
                         f'</td><td>{_e(f.get("detail"))}</td><td class="fix">{_e(f.get("fix"))}</td></tr>')
        lines.append("</table>")
    return "\n".join(lines)


def _node(inventory: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    chips: Mapping[str, Any] = inventory.get("chips") or {}
    rows = [("host", inventory.get("hostname")), ("OS", inventory.get("os")), ("kernel", inventory.get("kernel")),
            ("arch", inventory.get("arch")), ("chips", _chips_line(chips)), ("driver", inventory.get("driver")),
            ("firmware", inventory.get("firmware")), ("CANN toolkit", inventory.get("cann_toolkit")),
            ("nnae", inventory.get("nnae")), ("Python", inventory.get("python")), ("torch", inventory.get("torch")),
            ("torch_npu", inventory.get("torch_npu"))]
    out = ["<h2>The node</h2><table>"]
    out += [f"<tr><th>{_e(k)}</th><td>{_e(v if v is not None else 'unknown')}</td></tr>" for k, v in rows]
    out.append("</table>")
    devices: Sequence[Mapping[str, Any]] = chips.get("devices") or []
    if devices:
        columns = ("npu", "chip", "logic_id", "name", "health", "alarm", "bus_id", "hbm_mib", "temp_c", "power_w",
                   "link_width", "link_speed_gts", "firmware", "serial")
        out.append("<h2>Chips</h2><table><tr>" + "".join(f"<th>{_e(c)}</th>" for c in columns) + "</tr>")
        for device in devices:
            health = str(device.get("health") or "")
            css = "" if health.upper() in ("", "OK") else ' class="fail"'
            out.append("<tr>" + "".join(
                f"<td{css if c == 'health' else ''}>{_e(device.get(c))}</td>" for c in columns) + "</tr>")
        out.append("</table>")
    return "\n".join(out)


def _chips_line(chips: Mapping[str, Any]) -> Optional[str]:
    if not chips.get("count"):
        return None
    hbm = f", {chips['hbm_mib']} MiB HBM each" if chips.get("hbm_mib") else ""
    link = f", PCIe x{chips['link_width']}" if chips.get("link_width") else ""
    return f"{chips['count']} x {chips.get('model') or chips.get('family') or '?'}{hbm}{link}"


def _stages(findings: Sequence[Mapping[str, Any]]) -> str:
    stages: Dict[str, List[Mapping[str, Any]]] = {}
    for finding in findings:
        stages.setdefault(str(finding.get("stage") or "other"), []).append(finding)
    out = ["<h2>Stages</h2>"]
    for stage, items in stages.items():
        bad = [f for f in items if f.get("status") != "pass"]
        good = [f for f in items if f.get("status") == "pass"]
        worst = next((s for s in ("error", "fail", "warn", "skip") if any(f.get("status") == s for f in items)),
                     "pass")
        out.append(f'<h3><span class="{worst}">{SYMBOL[worst]}</span> {_e(stage)} '
                   f'<span class="muted">({len(good)} pass, {len(bad)} other)</span></h3>')
        if bad:
            out.append(_table(bad))
        if good:
            out.append(f"<details><summary>{len(good)} passing finding(s)</summary>{_table(good)}</details>")
    return "\n".join(out)


def _table(findings: Sequence[Mapping[str, Any]]) -> str:
    rows = ["<table><tr><th></th><th>check</th><th>title</th><th>subject</th><th>detail</th><th>fix</th></tr>"]
    for f in findings:
        status = str(f.get("status"))
        rows.append(f'<tr><td class="{_e(status)}">{SYMBOL.get(status, "?")}</td><td>{_e(f.get("id"))}</td>'
                    f'<td>{_e(f.get("title"))}</td><td>{_e(f.get("subject"))}</td><td>{_e(f.get("detail"))}</td>'
                    f'<td class="fix">{_e(f.get("fix"))}</td></tr>')
    rows.append("</table>")
    return "\n".join(rows)


# -- pictures ---------------------------------------------------------------------------------------------
def _plots(collective: Any, memory: Optional[Sequence[Mapping[str, Any]]],
           findings: Sequence[Mapping[str, Any]]) -> str:
    out = []
    results = (collective or {}).get("results") if isinstance(collective, Mapping) else None
    if results:
        series: Dict[str, List[Tuple[float, float]]] = {}
        for r in results:
            series.setdefault(str(r["op"]), []).append((float(r["size_bytes"]), float(r["busbw_gbps"])))
        out.append(line_chart(series, "message size (bytes, log scale)", "bus bandwidth (GB/s)",
                              f"Bus bandwidth against message size ({collective.get('backend')}, "
                              f"{collective.get('world_size')} ranks)", log_x=True))
    memory_series = _memory_series(memory, findings)
    if memory_series:
        # memory's axis spans what was seen: from 0, a rise of a few MiB on GiBs is a flat line
        out.append(line_chart(memory_series, "training step", "MiB", "Memory over training steps", from_zero=False))
    return "\n".join(out)


def _memory_series(memory: Optional[Sequence[Mapping[str, Any]]],
                   findings: Sequence[Mapping[str, Any]]) -> Dict[str, List[Tuple[float, float]]]:
    series: Dict[str, List[Tuple[float, float]]] = {}
    for record in memory or ():
        step = record.get("step")
        if not isinstance(step, (int, float)):
            continue
        for key in ("allocated_bytes", "reserved_bytes", "rss_bytes"):
            value = record.get(key)
            if isinstance(value, (int, float)):
                series.setdefault(key.replace("_bytes", ""), []).append((float(step), value / 2 ** 20))
    for finding in findings:  # a check may carry a series itself: evidence {"allocated_mib_by_step": [...]}
        for key, values in (finding.get("evidence") or {}).items():
            if key.endswith("_by_step") and isinstance(values, list) and all(
                    isinstance(v, (int, float)) for v in values):
                series[key[: -len("_by_step")]] = [(float(i), float(v)) for i, v in enumerate(values)]
    return {k: v for k, v in series.items() if len(v) >= 2}


def line_chart(series: Mapping[str, Sequence[Tuple[float, float]]], x_label: str, y_label: str, title: str,
               log_x: bool = False, width: int = 640, height: int = 320, from_zero: bool = True) -> str:
    """An inline SVG line chart (no script): one polyline and point marks per series, min/max tick labels;
    the y axis starts at 0, or (``from_zero=False``) just below the lowest value."""
    left, right, top, bottom = 64, 150, 30, 44
    points = [(x, y) for values in series.values() for x, y in values]
    xs = [math.log2(x) if log_x else x for x, _ in points if not log_x or x > 0]
    ys = [y for _, y in points]
    x_min, x_max = min(xs), max(xs)
    y_min, y_max = 0.0, max(ys) or 1.0
    if not from_zero and max(ys) > min(ys):
        y_min = max(0.0, min(ys) - (max(ys) - min(ys)) * 0.05)
    x_span, y_span = (x_max - x_min) or 1.0, (y_max - y_min) or 1.0

    def sx(x: float) -> float:
        value = math.log2(x) if log_x else x
        return left + (value - x_min) / x_span * (width - left - right)

    def sy(y: float) -> float:
        return height - bottom - (y - y_min) / y_span * (height - top - bottom)

    def label_x(x: float) -> str:
        if not log_x:
            return f"{x:g}"
        for unit, factor in (("G", 2 ** 30), ("M", 2 ** 20), ("K", 2 ** 10)):
            if x >= factor:
                return f"{x / factor:g}{unit}"
        return f"{x:g}"

    out = [f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{_e(title)}">',
           f'<text x="{left}" y="18" font-size="13" font-weight="bold">{_e(title)}</text>',
           f'<line x1="{left}" y1="{sy(y_min):.1f}" x2="{width - right}" y2="{sy(y_min):.1f}" stroke="#555"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{sy(y_min):.1f}" stroke="#555"/>',
           f'<text x="{left - 6}" y="{sy(y_max) + 4:.1f}" font-size="11" text-anchor="end">{y_max:.4g}</text>',
           f'<text x="{left - 6}" y="{sy(y_min) + 4:.1f}" font-size="11" text-anchor="end">{y_min:.4g}</text>',
           f'<text x="{(left + width - right) / 2:.0f}" y="{height - 8}" font-size="11" text-anchor="middle">'
           f'{_e(x_label)}</text>',
           f'<text x="14" y="{(top + height - bottom) / 2:.0f}" font-size="11" text-anchor="middle" '
           f'transform="rotate(-90 14 {(top + height - bottom) / 2:.0f})">{_e(y_label)}</text>']
    ticks = sorted({x for x, _ in points})
    if len(ticks) > 8:
        ticks = [ticks[0], ticks[len(ticks) // 2], ticks[-1]]
    for x in ticks:
        out.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 14}" font-size="10" text-anchor="middle">'
                   f'{_e(label_x(x))}</text>')
    for index, (name, values) in enumerate(series.items()):
        color = COLORS[index % len(COLORS)]
        ordered = sorted(values)
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in ordered)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        if len(ordered) <= 40:
            out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>' for x, y in ordered]
        out.append(f'<text x="{width - right + 10}" y="{top + 16 * (index + 1)}" font-size="12" fill="{color}">'
                   f'{_e(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)
