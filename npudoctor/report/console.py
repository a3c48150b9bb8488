"""Human output of ``check``: a header, stages as they finish, a summary that counts what is printed, a verdict.

Layout (fits the terminal's width, 80 columns when piped)::

    npudoctor 0.1.0 check on node-a2-01, 2026-12-01 10:26 UTC
    profile atlas800t-a2-8x910b (expects 8x 910B), level 1, source: --root /mnt/img

    pcie
      ✗ PCI002  NPU bound to the Ascend driver [0000:41:00.0]
                910B NPU is not bound to any driver
          fix: modprobe drv_pcie_host
      - 3 checks could not apply: not an Ascend node (PCI002, PCI003, PCI004)

    39 findings in 9 checks: 37 pass, 1 warn, 1 fail
    1 problem in 1 stage; 1 warning

Without ``-v``, a check that passed on many subjects is one line, and skipped checks that share one cause
(or print the same reason) are one line with their count; ``-v`` lists every finding with its evidence.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import IO, Any, Dict, Iterable, List, Optional, Sequence, Tuple

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from npudoctor.checks.registry import NOT_AN_ASCEND_NODE
from npudoctor.model.finding import STATUS_ORDER, Finding, Report, Status
from npudoctor.report import terminal
from npudoctor.report.symbols import STYLE
from npudoctor.report.terminal import FIX_INDENT, FIX_LABEL, fix_lines
from npudoctor.untrusted import clean, one_line

PROBLEM = (Status.FAIL, Status.ERROR)
# Fixes are shown for these statuses (a passing finding needs none).
FIX_SHOWN = (Status.FAIL, Status.WARN, Status.ERROR, Status.SKIP)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """Rich exits 1 when the reader goes away; every command handles that in one place instead
        (``LazyGroup.invoke``: quiet, exit 0)."""
        self.quiet = True
        raise BrokenPipeError

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        """Every text segment loses its secrets and control characters on its way out (rich's own styles and
        cursor moves are added after this): whatever a renderer forgot to clean still shows no token or URL
        password, and cannot write to the clipboard, retitle or clear the user's terminal. Redaction is a
        property of the way out, not of each renderer (issue 33): ``clean`` is cached and skips a segment with
        no secret's marker at once."""
        return super()._render_buffer(
            segment if segment.control else Segment(clean(segment.text), segment.style, segment.control)
            for segment in buffer)


def make_console(file: Optional[IO[str]] = None, color: Optional[bool] = None, width: Optional[int] = None) -> Console:
    """A rich Console for ``file`` (stdout) that follows the house rules: ``--color``/``NO_COLOR``/
    ``FORCE_COLOR`` unless ``color`` is given, the terminal's width (80 when piped) unless ``width`` is."""
    import sys

    stream = file or sys.stdout
    if color is None:
        color = terminal.use_color(stream)
    return _Console(file=stream, highlight=False, no_color=not color, force_terminal=color,
                   color_system="standard" if color else None, soft_wrap=True,
                   width=width or terminal.width(stream), emoji=False, markup=False)


def wrap(text: str, width: int, first: str = "", rest: str = "", words_may_break: bool = True) -> List[str]:
    """``text`` wrapped to ``width`` columns, each line starting with ``first`` then ``rest``; a word longer
    than a line that is a path breaks after one of its ``/``."""
    return terminal.wrap(text, width, first, rest, words_may_break, breaks="/")


def _id_list(ids: Sequence[str]) -> str:
    """``PCI002, PCI003``; runs of more than two consecutive IDs as ``SMI001-SMI004`` (only IDs that are
    in the list: ``PROF002-PROF003, PROF005``)."""
    runs: List[List[str]] = []
    for check_id in ids:
        if runs and _next_id(runs[-1][-1]) == check_id:
            runs[-1].append(check_id)
        else:
            runs.append([check_id])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(run) for run in runs)


def _next_id(check_id: str) -> str:
    """``PROF009`` -> ``PROF010`` (same width); an ID without a number has no next."""
    match = re.match(r"^(.*?)(\d+)$", check_id)
    return f"{match.group(1)}{int(match.group(2)) + 1:0{len(match.group(2))}d}" if match else ""


def skip_reason(finding: Finding) -> str:
    """What a skipped finding shares with others: its root cause, else its own reason."""
    return finding.cause or finding.detail


class CheckConsole:
    """Renders a check run to a rich Console, stage by stage (a :class:`RunListener` for ``api.run_checks``).

    ``progress`` (a :class:`~npudoctor.report.progress.Progress`) is told which check runs and hidden while a
    stage is printed.
    """

    def __init__(self, console: Console, verbose: bool = False, progress: Any = None) -> None:
        self.console = console
        self.verbose = verbose
        self.progress = progress
        self.width = console.width
        self.symbols = terminal.status_symbols(console.file)
        self._check = ""

    # RunListener
    def started(self, report: Report) -> None:
        self._print_all(self.header(report))

    def checking(self, spec: Any) -> None:
        self._check = f"{spec.id} {spec.title}"
        if self.progress is not None:
            self.progress.update(self._check)

    def running(self, argv: Sequence[str]) -> None:
        if self.progress is not None:
            from npudoctor.report.progress import describe_command

            self.progress.update(f"{self._check}: waiting for {describe_command(argv)}")

    def stage_done(self, stage: str, findings: Sequence[Finding]) -> None:
        if findings:
            self._print_all(self.stage(stage, findings))

    def finished(self, report: Report) -> None:
        self._print_all(self.footer(report))

    # What is printed
    def header(self, report: Report) -> List[Text]:
        first = title_line("check", report.tool.get("version", "?"), report.host.get("hostname") or "?",
                           report.started)
        profile = str(report.tool.get("profile", "default"))
        if report.expects:
            profile += f" (expects {report.expects})"
        source = describe_source(report.source)
        if report.recorded:
            source += f" (recorded {report.recorded.replace('T', ' ')})"
        second = f"profile {profile}, level {report.tool.get('level', 1)}, source: {source}"
        return [first, *context_lines(second, self.width)]

    def stage(self, stage: str, findings: Sequence[Finding], fold: bool = True,
              skips_as_one: bool = False) -> List[Text]:
        """A section: the stage's name, then its findings (``fold=False``: every finding on its own lines, for
        commands whose passing details are the result, such as ``prof``'s top operators; ``skips_as_one``:
        without -v, the checks that could not apply are one line, each one's reason shown by -v)."""
        lines = [Text(""), Text(stage, style="bold underline")]
        skipped = [f for f in findings if f.status is Status.SKIP] if skips_as_one and not self.verbose else []
        if len(skipped) > 1:
            findings = [f for f in findings if f.status is not Status.SKIP]
        for item in (self._fold(findings) if fold else findings):
            if isinstance(item, tuple):
                lines.extend(self._group_lines(*item))
            else:
                lines.extend(self.finding_lines(item))
        if len(skipped) > 1:
            lines.extend(self._group_lines("skip", skipped, reason="-v shows what each needs"))
        return lines

    def footer(self, report: Report, scope: Optional[str] = None) -> List[Text]:
        """The summary line, then the verdict sentence (``scope``: see :func:`verdict`), the last line."""
        return [Text(""), summary(report),
                *[Text(line, style="bold") for line in wrap(verdict(report, scope), self.width)]]

    def print(self, lines: List[Text]) -> None:
        """Print ``lines`` (with the spinner, if any, hidden meanwhile)."""
        self._print_all(lines)

    # Folding
    def _fold(self, findings: Sequence[Finding]) -> Iterable[Any]:
        """Findings to print, in order; without -v, runs of passes of one check and skips of one cause become
        ``(kind, findings)`` groups."""
        if self.verbose:
            yield from findings
            return
        passes = Counter(f.id for f in findings if f.status is Status.PASS)
        skipped_checks: Dict[str, List[str]] = {}
        for finding in findings:
            if finding.status is Status.SKIP:
                ids = skipped_checks.setdefault(skip_reason(finding), [])
                if finding.id not in ids:
                    ids.append(finding.id)
        done: set = set()
        for finding in findings:
            if finding.status is Status.PASS and passes[finding.id] > 1:
                key: Tuple[str, str] = ("pass", finding.id)
                if key not in done:
                    done.add(key)
                    yield "pass", [f for f in findings if f.status is Status.PASS and f.id == finding.id]
                continue
            if finding.status is Status.SKIP and len(skipped_checks[skip_reason(finding)]) > 1:
                key = ("skip", skip_reason(finding))
                if key not in done:
                    done.add(key)
                    yield "skip", [f for f in findings
                                   if f.status is Status.SKIP and skip_reason(f) == skip_reason(finding)]
                continue
            yield finding

    def _group_lines(self, kind: str, group: List[Finding], reason: str = "") -> List[Text]:
        first = group[0]
        if kind == "pass":
            return self.finding_lines(first, detail="", subject=f"{len(group)} subjects pass")
        ids = list(dict.fromkeys(f.id for f in group))
        prefix = self._prefix(Status.SKIP, "")
        listed = ", ".join(ids) if reason else _id_list(ids)  # checks with reasons of their own: each named
        body = f"{len(ids)} checks could not apply ({listed}): {reason or skip_reason(first)}"
        lines = wrap(body, self.width, first=prefix, rest=" " * len(prefix))
        text = [self._styled_prefix(Status.SKIP, "") + Text(lines[0][len(prefix):])]
        text += [Text(line) for line in lines[1:]]
        fixes = {f.fix for f in group}
        if len(fixes) == 1 and first.fix:
            text.extend(self._fix_lines(first.fix))
        return text

    # Lines of one finding
    def _prefix(self, status: Status, check_id: str) -> str:
        return f"  {self.symbols[status]} {check_id:<7} " if check_id else f"  {self.symbols[status]} "

    def _styled_prefix(self, status: Status, check_id: str) -> Text:
        text = Text("  ")
        text.append(self.symbols[status], style=STYLE[status])
        text.append(" ")
        if check_id:
            text.append(f"{check_id:<7} ", style="bold")
        return text

    def finding_lines(self, finding: Finding, detail: Optional[str] = None,
                       subject: Optional[str] = None) -> List[Text]:
        if detail is None and finding.status is Status.SKIP and finding.cause and not self.verbose:
            detail, subject = finding.cause, ""  # the shared cause says enough; -v shows the detail
        detail = finding.detail if detail is None else detail
        subject = finding.subject if subject is None else subject
        prefix = self._prefix(finding.status, finding.id)
        indent = " " * len(prefix)
        head = finding.title + (f" [{subject}]" if subject else "")
        room = self.width - len(prefix)
        detail_style = "dim" if finding.status is Status.PASS else ""
        if len(head) + (len(detail) + 2 if detail else 0) <= room:
            pieces = [(head + (": " if detail else ""), ""), (detail, detail_style)]
            first = self._styled_prefix(finding.status, finding.id)
            for piece, style in pieces:
                first.append(piece, style=style)
            lines = [first]
        else:
            head_lines = wrap(head, room)
            lines = [self._styled_prefix(finding.status, finding.id) + Text(head_lines[0])]
            lines += [Text(indent + line) for line in head_lines[1:]]
            if detail:
                lines += [Text(line, style=detail_style) for line in wrap(detail, self.width, indent, indent)]
        if subject:
            for line in lines:
                line.highlight_words([f"[{subject}]"], style="cyan")
        if self.verbose and finding.evidence:
            evidence = json.dumps(dict(finding.evidence), ensure_ascii=False, default=str)
            rest = FIX_INDENT + " " * len("evidence: ")
            lines += [Text(line, style="dim") for line in wrap("evidence: " + evidence, self.width, FIX_INDENT, rest)]
        if finding.fix and finding.status in FIX_SHOWN:
            lines.extend(self._fix_lines(finding.fix))
        return lines

    def _fix_lines(self, fix: str) -> List[Text]:
        """Each line of the fix wrapped under ``fix:``; words (commands, paths) are never broken."""
        lines = [Text(line) for line in fix_lines(fix, self.width, FIX_INDENT)]
        if lines:
            lines[0].stylize("bold", len(FIX_INDENT), len(FIX_INDENT) + len(FIX_LABEL))
        return lines

    def _print_all(self, lines: List[Text]) -> None:
        if self.progress is not None:
            with self.progress.hidden():
                for line in lines:
                    self.console.print(line)
        else:
            for line in lines:
                self.console.print(line)


def summary(report: Report) -> Text:
    """"39 findings in 8 checks: 37 pass, 1 warn, 1 fail": folded lines stand for several findings, so the
    counts say what they count."""
    findings = report.findings
    checks = len(dict.fromkeys(f.id for f in findings))
    counts = report.summary.counts
    parts = [Text(f"{counts[s]} {s.value}", style=STYLE[s]) for s in STATUS_ORDER if counts[s]]
    line = Text(f"{plural(len(findings), 'finding')} in {plural(checks, 'check')}" + (": " if parts else ""))
    line.append_text(Text(", ").join(parts))
    return line


def title_line(command: str, version: str, host: Optional[str] = None, started: Optional[float] = None) -> Text:
    """The first line of every text report: ``npudoctor 0.1.0 check on node-a2-01, 2026-12-01 10:26 UTC``
    (the host where it matters, the time when ``started`` is given)."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)) if started else ""
    return Text.assemble((f"npudoctor {version} {command}", "bold"), f" on {one_line(clean(host))}" if host else "",
                         f", {when}" if when else "")


def context_lines(text: str, width: int) -> List[Text]:
    """The header's second line (what was run on what: paths, a replayed bundle's host), wrapped with a hanging
    indent; the paths are someone else's names, cleaned as every report's text (npudoctor.untrusted)."""
    return [Text(line) for line in wrap(one_line(clean(text)), width, rest="  ")]


def collect_summary(report: Report, bundle: str) -> List[Text]:
    """What `npudoctor collect` says when the bundle is written: where, what it recorded, how to replay it."""
    return [Text(f"wrote {bundle} (secrets redacted)", style="bold"), summary(report), Text(verdict(report)),
            Text(f"replay it anywhere: npudoctor check --from {bundle}")]


def print_lines(lines: List[Text], console: Console) -> None:
    """``lines`` wrapped to the console's width (continuation lines indented)."""
    for line in lines:
        if len(line.plain) <= console.width:
            console.print(line)
        else:
            for part in wrap(line.plain, console.width, rest="  "):
                console.print(Text(part, style=line.style))


def describe_source(source: Optional[str]) -> str:
    """``live`` -> "this machine"; ``root:/mnt/img`` -> "--root /mnt/img"; ``bundle:x`` -> "bundle x"."""
    if not source or source == "live":
        return "this machine"
    kind, _, where = source.partition(":")
    if kind == "root":
        return f"--root {where}"
    if kind == "bundle":
        return f"bundle {where}"
    return source


def hardware(report: Report) -> str:
    """The NPUs the run saw, for the verdict: "8x Ascend 910B3" (npu-smi names), else the PCI families."""
    names = Counter(str(f.evidence["name"]) for f in report.findings
                    if f.id == "SMI002" and f.evidence.get("name"))
    if len(names) == 1:
        name, count = names.most_common(1)[0]
        return f"{count}x Ascend {name}"
    for finding in report.findings:
        if finding.id == "PCI001" and finding.status is Status.PASS and finding.evidence.get("npus"):
            families = "/".join(finding.evidence.get("families") or ["NPU"])
            return f"{finding.evidence['npus']}x Ascend {families}"
    return str(report.host.get("hostname") or "this node")


def plural(count: int, word: str) -> str:
    """``1 rank``, ``2 ranks``."""
    return f"{count} {word}{'s' * (count != 1)}"


# Most severe first: a check that failed, one that could not run, a warning.
SEVERITY_ORDER = (Status.FAIL, Status.ERROR, Status.WARN)
# The most severe finding is named in the verdict in at most this many characters.
NAMED_CHARS = 72


def named_finding(findings: Sequence[Finding]) -> str:
    """The most severe of ``findings`` in a few words: "SMI002 npu:3/chip:0 910B3: health Warning"."""
    worst = min(findings, key=lambda f: SEVERITY_ORDER.index(f.status) if f.status in SEVERITY_ORDER else 99)
    words = " ".join(part for part in (worst.id, worst.subject, one_line(worst.detail or worst.title)) if part)
    if len(words) <= NAMED_CHARS:
        return words
    cut = words[:NAMED_CHARS - 3]
    return (cut.rsplit(" ", 1)[0] if " " in cut[NAMED_CHARS // 2:] else cut).rstrip(" ,;:") + "..."


def verdict(report: Report, scope: Optional[str] = None) -> str:
    """One sentence: what is wrong where, naming the most severe thing found, or that nothing is; then
    warnings and what could not apply.

    "1 problem in 1 stage: DRV001 driver not installed; 28 checks could not apply (17: not an Ascend node)",
    "1 warning on 8x Ascend 910B3: SMI002 npu:3/chip:0 910B3: health Warning", "No problems found on 8x
    Ascend 910B3". Commands that judge one thing say what in ``scope`` ("on cpu", "in 2 ranks"):
    "1 problem on cpu: ...", "5 warnings in 2 ranks: PROF010 ...".
    """
    findings = report.findings
    problems = [f for f in findings if f.status in PROBLEM]
    warnings = [f for f in findings if f.status is Status.WARN]
    by_check: Dict[str, List[Finding]] = {}
    for finding in findings:
        by_check.setdefault(finding.id, []).append(finding)
    skipped = [group[0] for group in by_check.values() if all(f.status is Status.SKIP for f in group)]
    ran = [check_id for check_id, group in by_check.items() if any(f.status is not Status.SKIP for f in group)]
    # PCI001's FAIL carries this cause on a machine without Ascend NPUs: say so plainly, not "1 problem"
    not_ascend = [f for f in problems if f.cause == NOT_AN_ASCEND_NODE]
    other_problems = [f for f in problems if f.cause != NOT_AN_ASCEND_NODE]
    parts = []
    if not_ascend and scope is None:
        parts.append(f"This is not an Ascend node: {not_ascend[0].detail}")
        problems = other_problems
    if problems:
        stages = len(dict.fromkeys(f.stage for f in problems))
        where = scope or f"in {plural(stages, 'stage')}"
        how_many = plural(len(problems), "problem")
        if parts:
            how_many = how_many.replace(" ", " other ", 1)
        parts.append(f"{how_many} {where}: {named_finding(problems)}")
    elif parts:
        pass  # not an Ascend node, and nothing else wrong
    elif warnings:  # no problem, but something to look at: name it, never "No problems found"
        parts.append(f"{plural(len(warnings), 'warning')} {scope or 'on ' + hardware(report)}: "
                     f"{named_finding(warnings)}")
        warnings = []
    elif findings and not ran:
        parts.append("Nothing was checked")
    elif findings and scope is None and len(ran) < len(skipped):
        # most checks could not apply: say which ran, so that "no problems" is not read as a clean node
        named = f" ({', '.join(ran)})" if len(ran) <= 3 else ""
        ran_text = f"{plural(len(ran), 'check')} that ran" if len(ran) != 1 else "the 1 check that ran"
        parts.append(f"No problems found in {ran_text}{named} on {hardware(report)}")
    elif findings:
        parts.append(f"No problems found {scope or 'on ' + hardware(report)}")
    else:
        parts.append("No checks ran")
    if warnings:
        parts.append(plural(len(warnings), "warning"))
    if skipped:
        reasons = Counter(skip_reason(f) for f in skipped)
        reason, count = reasons.most_common(1)[0]
        could_not = f"{plural(len(skipped), 'check')} could not apply"
        if count == len(skipped):
            could_not += f": {reason}"
        elif any(f.cause == reason for f in skipped):
            could_not += f" ({count}: {reason})"
        parts.append(could_not)
    return "; ".join(parts)


def render(report: Report, console: Console, verbose: bool = False) -> None:
    """The whole report at once (tests, replays); ``check`` streams the same lines stage by stage."""
    out = CheckConsole(console, verbose=verbose)
    out.started(report)
    stage_findings: Dict[str, List[Finding]] = {}
    for finding in report.findings:
        stage_findings.setdefault(finding.stage, []).append(finding)
    for stage, findings in stage_findings.items():
        out.stage_done(stage, findings)
    out.finished(report)

