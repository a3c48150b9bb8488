"""Human output of ``logs scan``: what was read, then one line per merged cause with its explanation."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from npudoctor.logs.rules import SEVERITY_STATUS
from npudoctor.logs.scanner import LogFinding, ScanResult
from npudoctor.model.finding import Status
from npudoctor.report.symbols import STYLE, SYMBOL


def _finding_lines(finding: LogFinding, verbose: bool) -> Text:
    status = SEVERITY_STATUS[finding.severity]
    text = Text("  ")
    text.append(SYMBOL[status], style=STYLE[status])
    text.append(f" {finding.kind} ", style="bold")
    text.append(finding.subject, style="cyan")
    text.append(f"  ×{finding.count}  ")
    where = str(finding.first) if finding.count == 1 else f"{finding.first} … {finding.last}"
    text.append(where, style="dim")
    if finding.title and finding.kind != "error_code":
        text.append(f"\n      {finding.title}")
    if finding.code is not None:
        kind = "" if finding.code.exact else " (family)"
        text.append(f"\n      {finding.code.title}{kind}: {finding.code.meaning}")
        if finding.code.cause and (verbose or finding.severity == "error"):
            text.append(f"\n      cause: {finding.code.cause}", style="dim")
    if finding.fix and finding.severity != "info":
        text.append("\n      fix: ", style="bold")
        text.append(finding.fix)
    if verbose:
        text.append(f"\n      sample: {finding.sample}", style="dim")
    return text


def render(result: ScanResult, console: Console, verbose: bool = False) -> None:
    lines = sum(f.lines for f in result.files)
    records = sum(f.records for f in result.files)
    console.print(Text.assemble(("npudoctor logs scan", "bold"),
                                f": {len(result.files)} file(s), {lines:,} lines, {records:,} records"))
    if result.levels:
        console.print(Text("  levels: " + ", ".join(f"{k} {v:,}" for k, v in result.levels.most_common()),
                           style="dim"))
    console.print(Text("\nfiles", style="bold underline"))
    for summary in result.files:
        status = Status.ERROR if summary.status == "unreadable" else (
            Status.WARN if summary.status == "partial" else Status.PASS)
        line = Text("  ")
        line.append(SYMBOL[status], style=STYLE[status])
        line.append(f" {summary.path}  ")
        line.append(f"{summary.format}, {summary.records:,} records, {summary.lines:,} lines", style="dim")
        if summary.error:
            line.append(f"  {summary.status}: {summary.error}", style=STYLE[status])
        console.print(line)
    console.print(Text("\nfindings", style="bold underline"))
    if not result.findings:
        console.print(Text("  nothing found that needs attention"))
    for finding in result.findings:
        console.print(_finding_lines(finding, verbose))
    counts = result.severity_counts()
    console.print(Text("\nsummary: " + ", ".join(f"{n} {name}" for name, n in counts.items())))
