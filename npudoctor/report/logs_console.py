"""Human output of ``logs scan``, read like a report: the diagnosis first (the root cause, the
consequences folded one line per kind with their ranks, the independent incidents), then the findings no
incident holds (every finding and incident with ``-v``), one line about the files read (the per-file list
with ``-v``), what was skipped, and a verdict line.

Record counts (how many ERROR records the files hold) and findings (merged causes) are labelled apart.
Text taken from logs is printed without terminal escape sequences (the scanner strips them).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

from rich.console import Console
from rich.text import Text

from npudoctor.logs.failon import finding_fails
from npudoctor.logs.model import SEVERITY_STATUS, LogFinding, ScanResult
from npudoctor.model.finding import Status
from npudoctor.report import terminal
from npudoctor.report.symbols import STYLE
from npudoctor.untrusted import clean

if TYPE_CHECKING:
    from npudoctor.logs.incidents import Incident
    from npudoctor.logs.job import JobScan

# Skipped inputs named per reason before the rest are counted.
SKIPPED_NAMES_SHOWN = 3
# Values shown per detail of a finding (engines, nodes, ranks); the rest are counted.
DETAIL_VALUES_SHOWN = 8


def _finding_lines(finding: LogFinding, verbose: bool, symbols: Mapping[Status, str], ellipsis: str) -> Text:
    status = SEVERITY_STATUS[finding.severity]
    text = Text("  ")
    text.append(symbols[status], style=STYLE[status])
    text.append(f" {finding.kind} ", style="bold")
    text.append(finding.subject, style="cyan")
    text.append(f"  {finding.count:,} line{'s' if finding.count != 1 else ''}  ")
    if finding.count == 1:
        where = str(finding.first)
    elif finding.first.file == finding.last.file:
        where = f"{finding.first} {ellipsis} {finding.last.line}"  # lines 98 … 102 of one file
    else:
        where = f"{finding.first} {ellipsis} {finding.last}"
    text.append(where, style="dim")
    if finding.title and finding.kind != "error_code":
        text.append(f"\n      {finding.title}")
    if finding.code is not None:
        kind = "" if finding.code.exact else " (family)"
        text.append(f"\n      {finding.code.title}{kind}: {finding.code.meaning}")
        if finding.code.cause and (verbose or finding.severity == "error"):
            text.append(f"\n      cause: {finding.code.cause}", style="dim")
    # what the rule read out of the lines: the op type, SeqNum and timeout, the ranks (not the subject again:
    # `op_type` repeats the subject of an operator finding for machine readers)
    details = {name: values for name, values in finding.details.items() if values != {finding.subject}}
    if details:
        shown = "; ".join(f"{name} {', '.join(sorted(values)[:DETAIL_VALUES_SHOWN])}"
                          + (f" (+{len(values) - DETAIL_VALUES_SHOWN})" if len(values) > DETAIL_VALUES_SHOWN else "")
                          for name, values in sorted(details.items()))
        text.append(f"\n      seen: {shown}", style="dim")
    if finding.fix and finding.severity != "info":
        text.append("\n      fix: ", style="bold")
        text.append(finding.fix)
    if verbose:
        text.append(f"\n      sample: {finding.sample}", style="dim")
    return text


def _print_wrapped(console: Console, text: Text) -> None:
    """Each line of ``text`` wrapped to the console's width, styles kept, continuations indented under the
    line's own text (under the text after ``fix:``, ``cause:`` or ``sample:``); a path longer than a line is
    folded, never cut."""
    for piece in text.split("\n"):
        plain = piece.plain
        lead = len(plain) - len(plain.lstrip(" "))
        label = next((f"{word}: " for word in ("fix", "cause", "sample", "seen")
                      if plain.lstrip().startswith(f"{word}: ")), "")
        hang = lead + (len(label) if label else 2 if lead < 4 else 0)
        room = max(console.width - hang, 20)
        for index, line in enumerate(piece.wrap(console, room, overflow="fold")):
            line.rstrip()  # in place: the space a wrap leaves at a line's end
            console.print(line if index == 0 else Text(" " * hang) + line)


def _skipped_lines(skipped: Sequence[Tuple[str, str]], verbose: bool) -> List[str]:
    """One line per reason: "25 files skipped: not logs (a.md, b.yaml, c.ckpt, +22 more)"."""
    by_reason: Dict[str, List[str]] = collections.defaultdict(list)
    for path, reason in skipped:
        by_reason[reason].append(path)
    lines = []
    shown = None if verbose else SKIPPED_NAMES_SHOWN
    for reason, paths in by_reason.items():
        names = ", ".join(clean(p) for p in paths[:shown])
        more = f", +{len(paths) - len(paths[:shown])} more" if len(paths) > len(paths[:shown]) else ""
        noun = "file" if len(paths) == 1 else "files"
        lines.append(f"{len(paths)} {noun} skipped: {reason} ({names}{more})")
    return lines


def _incident_lines(incident: Incident, symbols: Mapping[Status, str], explain: Mapping[str, str]) -> Text:
    from npudoctor.logs.incidents import headline, shown_time, sources_text

    text = Text("  ")
    text.append(symbols[Status.FAIL], style=STYLE[Status.FAIL])
    text.append(f" {incident.id} ", style="bold")
    text.append(clean(headline(incident)))
    facts = [f"at {shown_time(incident.first_time)}" if incident.first_time else "",
             f"codes {', '.join(incident.codes[:6])}" if incident.codes else "",
             f"pid {incident.pid}" if incident.pid is not None else "",
             f"{incident.count:,} line{'s' if incident.count != 1 else ''}" if incident.count else "",
             f"after {incident.caused_by}" if incident.caused_by else ""]
    text.append("\n      " + "; ".join(f for f in facts if f), style="dim")
    if incident.sources:
        text.append(f"\n      {clean(sources_text(incident.sources))}", style="dim")
    for code in incident.codes[:2]:
        if code in explain:
            text.append(f"\n      {code}: {explain[code]}")
    if incident.fix:
        text.append("\n      fix: ", style="bold")
        text.append(clean(incident.fix))
    return text


def _folded_line(label: str, incidents: Sequence[Incident], symbols: Mapping[Status, str]) -> Text:
    from npudoctor.logs.incidents import codes_text, ranks_text, span_text

    text = Text("  ")
    text.append(symbols[Status.WARN], style=STYLE[Status.WARN])
    details = ", ".join(part for part in (codes_text(incidents), span_text(incidents)) if part)
    after = sorted({i.caused_by for i in incidents if i.caused_by})
    text.append(f" {clean(label)}: ", style="bold")
    text.append(clean(ranks_text(incidents)))
    if details:
        text.append(f" ({details})", style="dim")
    if after:
        text.append(f", after {', '.join(after[:3])}", style="dim")
    return text


def _diagnosis(job: JobScan, console: Console, verbose: bool, symbols: Mapping[Status, str],
               explain: Mapping[str, str]) -> None:
    from npudoctor.logs.incidents import fold

    diagnosis = job.diagnosis
    console.print(Text("diagnosis", style="bold underline"))
    _print_wrapped(console, Text("  " + clean(diagnosis.verdict)))
    if job.incidents:
        why = "; ".join(diagnosis.why) if verbose or diagnosis.confidence != "high" else ""
        _print_wrapped(console, Text(f"  confidence: {diagnosis.confidence}" + (f" ({why})" if why else ""),
                                     style="dim"))
    roots = [i for i in job.incidents if i.role == "root"]
    consequences = [i for i in job.incidents if i.role == "consequence"]
    others = [i for i in job.incidents if i.role == "independent"]
    alike: List[Incident] = []
    if diagnosis.common and roots and not verbose:  # the same failure on the other ranks: one line
        alike = [i for i in others if i.label == roots[0].label]
        others = [i for i in others if i.label != roots[0].label]
    for heading, chosen in (("root cause", roots), ("consequences", consequences),
                            ("independent incidents", others)):
        if not chosen:
            continue
        console.print(Text(f"\n{heading}", style="bold underline"))
        if heading == "root cause" and alike:
            for incident in chosen:
                _print_wrapped(console, _incident_lines(incident, symbols, explain))
            _print_wrapped(console, _folded_line(f"the same on {len(alike)} more", alike, symbols))
            continue
        if verbose or heading == "root cause" or (heading == "independent incidents" and len(chosen) <= 3):
            for incident in chosen:
                _print_wrapped(console, _incident_lines(incident, symbols, explain))
        else:
            for label, group in fold(chosen):
                _print_wrapped(console, _folded_line(label, group, symbols))


def render(result: ScanResult, console: Console, verbose: bool = False, fail_on: Sequence[str] = ("error",),
           exit_code: int = 0, job: Optional[JobScan] = None) -> None:
    # What the stream can print: an ASCII terminal (LANG=C, PYTHONIOENCODING=ascii) gets + x and "...".
    symbols = terminal.status_symbols(console.file)
    ellipsis = "…" if terminal.can_encode("…", console.file) else "..."
    if job is None:
        from npudoctor.logs.job import diagnose_result

        job = diagnose_result(result)
    explain = {f.subject: f"{f.code.title}: {f.code.meaning}" for f in result.findings
               if f.kind == "error_code" and f.code is not None}
    _diagnosis(job, console, verbose, symbols, explain)
    held = {key for incident in job.incidents for key in incident.findings}
    shown = result.findings if verbose else [f for f in result.findings if f"{f.kind} {f.subject}" not in held]
    heading = "findings" if verbose or not job.incidents else "other findings (in no incident)"
    if shown or not job.incidents:
        console.print(Text(f"\n{heading}", style="bold underline"))
    if not result.findings:
        console.print(Text("  nothing found that needs attention"))
    for finding in shown:
        _print_wrapped(console, _finding_lines(finding, verbose, symbols, ellipsis))

    readable = result.readable_files
    if verbose:
        console.print(Text("\nfiles", style="bold underline"))
        for summary in result.files:
            status = Status.ERROR if summary.status == "unreadable" else (
                Status.WARN if summary.status == "partial" else Status.PASS)
            line = Text("  ")
            line.append(symbols[status], style=STYLE[status])
            line.append(f" {clean(summary.path)}  ")
            line.append(f"{summary.format}, {summary.records:,} records, {summary.lines:,} lines", style="dim")
            if summary.unexplained_error_lines:  # error lines only a generic finding (or none) covers
                line.append(f", {summary.unexplained_error_lines:,} error lines no rule explains", style="dim")
            if summary.error:
                line.append(f"  {summary.status}: {clean(summary.error)}", style=STYLE[status])
            _print_wrapped(console, line)
    lines = sum(f.lines for f in readable)
    records = sum(f.records for f in readable)
    levels = ", ".join(f"{level} {n:,}" for level, n in result.levels.most_common())
    files_line = f"\nfiles: {len(readable)} read, {lines:,} lines, {records:,} records"
    if levels:
        files_line += f" ({levels})"
    unreadable = [f for f in result.files if f.status == "unreadable"]
    partial = [f for f in result.files if f.status == "partial"]
    if partial:
        files_line += f"; {len(partial)} partial ({', '.join(clean(f.path) for f in partial[:3])})"
    if unreadable:
        files_line += f"; {len(unreadable)} unreadable ({', '.join(clean(f.path) for f in unreadable[:3])})"
    _print_wrapped(console, Text(files_line))
    for skipped_line in _skipped_lines(result.skipped, verbose):
        _print_wrapped(console, Text(skipped_line, style="dim"))

    counts = result.severity_counts()
    failing = sum(1 for f in result.findings if finding_fails(f, fail_on))
    by_severity = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    causes = len(result.findings)
    verdict = f"{causes} cause{'s' if causes != 1 else ''} found" + (f" ({by_severity})" if by_severity else "")
    if job.incidents:
        root = f", root cause {job.diagnosis.root_cause}" if job.diagnosis.root_cause else ""
        verdict = f"{len(job.incidents)} incident{'s' if len(job.incidents) != 1 else ''}{root}; " + verdict
    verdict += f"; {failing} match --fail-on {','.join(fail_on)}: exit {exit_code}"
    _print_wrapped(console, Text("\nsummary: " + verdict))
