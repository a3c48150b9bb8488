"""Human output of ``npudoctor prof``: one line per rank, then the findings the way ``check`` prints them."""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from npudoctor.model.finding import STATUS_ORDER, Status
from npudoctor.report.symbols import STYLE, SYMBOL

if TYPE_CHECKING:
    from npudoctor.prof.engine import ProfResult


def _pct(value: object) -> str:
    return f"{float(value) * 100:.0f}%" if isinstance(value, (int, float)) else "-"


def _rank_table(result: ProfResult) -> Table:
    from npudoctor.prof import figures

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for name, justify in (("rank", "left"), ("data", "left"), ("tasks", "right"), ("device", "right"),
                          ("AI CPU", "right"), ("idle", "right"), ("comm", "right")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for rank in result.ranks:
        groups = rank.groups
        total = figures.device_time_us(groups)
        aicpu = sum(v["total_us"] for v in figures.aicpu_ops(groups).values())
        steps = figures.step_shares(rank.step_trace) or []
        idle = sum(s["free_share"] for s in steps) / len(steps) if steps else None
        comm = sum(s["comm_share"] for s in steps) / len(steps) if steps else None
        table.add_row(rank.label, rank.source.layout, f"{rank.kernel.rows:,}" if rank.kernel else "-",
                      f"{total / 1000:,.1f} ms" if total else "-", _pct(aicpu / total) if total else "-",
                      _pct(idle), _pct(comm))
    return table


def _indented(console: Console, text: str, indent: int, style: str = "", lead: str = "") -> None:
    """``lead`` + ``text`` wrapped to the console width (80 columns when not a terminal), indented."""
    width = max(40, min(console.width, 200) - indent)
    lines = textwrap.wrap(lead + text, width=width, break_on_hyphens=False) or [lead]
    for index, line in enumerate(lines):
        out = Text(" " * indent)
        if index == 0 and lead:
            out.append(lead, style="bold")
            line = line[len(lead):]
        out.append(line, style=style)
        console.print(out)


def render(result: ProfResult, console: Console, verbose: bool = False) -> None:
    _indented(console, f"{len(result.ranks)} rank(s) from {', '.join(result.paths)}", 0, lead="npudoctor prof: ")
    console.print(_rank_table(result))
    if result.problems:
        for problem in result.problems[: (None if verbose else 5)]:
            _indented(console, problem, 2, "yellow", lead="note: ")
    console.print(Text("\nfindings", style="bold underline"))
    for finding in result.findings:
        line = Text("  ")
        line.append(SYMBOL[finding.status], style=STYLE[finding.status])
        line.append(f" {finding.id:<7} ", style="bold")
        line.append(finding.title)
        if finding.subject:
            line.append(f" [{finding.subject}]", style="cyan")
        console.print(line)
        # Details and fixes wrap under the finding (80 columns when not a terminal), indented.
        if finding.detail:
            _indented(console, finding.detail, 6, style="dim" if finding.status is Status.PASS else "")
        if verbose and finding.evidence:
            _indented(console, json.dumps(dict(finding.evidence), ensure_ascii=False, default=str), 6, "dim",
                      lead="evidence: ")
        if finding.fix and finding.status in (Status.FAIL, Status.WARN, Status.ERROR):
            for fix_line in finding.fix.splitlines():
                _indented(console, fix_line, 6, lead="fix: ")
    counts = result.summary.counts
    worst = next((s for s in (Status.FAIL, Status.ERROR, Status.WARN) if counts[s]), Status.PASS)
    verdict = {Status.FAIL: "slow: see the FAIL findings", Status.ERROR: "some checks could not run",
               Status.WARN: "room to improve: see the WARN findings", Status.PASS: "nothing to fix found"}[worst]
    console.print(Text("\nsummary: " + ", ".join(f"{counts[s]} {s.value}" for s in STATUS_ORDER)))
    console.print(Text.assemble("verdict: ", (verdict, STYLE[worst])))
