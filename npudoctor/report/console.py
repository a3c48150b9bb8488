"""Human output: ordered stages, one line per finding (✓ ! ✗ -), fixes under failures, a summary line."""

from __future__ import annotations

import json
from collections import Counter
from typing import IO, Optional

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from npudoctor.model.finding import STATUS_ORDER, Finding, Report, Status
from npudoctor.report.symbols import STYLE, SYMBOL


def make_console(file: Optional[IO[str]] = None, color: Optional[bool] = None) -> Console:
    return Console(file=file, highlight=False, no_color=(color is False), force_terminal=color or None,
                   soft_wrap=True)


def _line_start(finding: Finding) -> Text:
    """Status symbol, check id and title: how every finding's line begins."""
    text = Text("  ")
    text.append(SYMBOL[finding.status], style=STYLE[finding.status])
    text.append(f" {finding.id:<7} ", style="bold")
    text.append(finding.title)
    return text


def _line(finding: Finding) -> Text:
    text = _line_start(finding)
    if finding.subject:
        text.append(f" [{finding.subject}]", style="cyan")
    if finding.detail:
        text.append(": " + finding.detail, style="dim" if finding.status is Status.PASS else "")
    return text


def _folded_line(finding: Finding, count: int) -> Text:
    """One line for the ``count`` passing findings of ``finding``'s check (``finding`` passed)."""
    text = _line_start(finding)
    text.append(f" [{count} subjects pass]", style="cyan")
    return text


def render(report: Report, console: Console, verbose: bool = False) -> None:
    host = report.host.get("hostname") or "?"
    console.print(Text.assemble(("npudoctor check", "bold"), f" on {host}",
                                (f"  ({report.source})" if report.source and report.source != "live" else "")))
    stage = None
    passes = Counter(f.id for f in report.findings if f.status is Status.PASS)
    folded: set = set()
    for finding in report.findings:
        if finding.stage != stage:
            stage = finding.stage
            console.print(Text(f"\n{stage}", style="bold underline"))
        if not verbose and finding.status is Status.PASS:
            # Without -v, one line says "all N subjects pass" for a check that passed on many subjects.
            if finding.id in folded:
                continue
            if passes[finding.id] > 1:
                folded.add(finding.id)
                console.print(_folded_line(finding, passes[finding.id]))
                continue
        console.print(_line(finding))
        if verbose and finding.evidence:
            evidence = json.dumps(dict(finding.evidence), ensure_ascii=False, default=str)
            console.print(Text("      evidence: " + evidence, style="dim"))
        if finding.fix and finding.status in (Status.FAIL, Status.WARN, Status.ERROR, Status.SKIP):
            for i, fix_line in enumerate(finding.fix.splitlines()):
                prefix = "      fix: " if i == 0 else "           "
                console.print(Text(prefix, style="bold") + Text(fix_line))
    counts = report.summary.counts
    parts = [f"[{STYLE[s]}]{counts[s]} {s.value}[/]" for s in STATUS_ORDER]
    console.print("\n" + escape("summary: ") + ", ".join(parts))
