"""Human output of ``npudoctor prof``, in the house style of ``check``.

Layout (fits the terminal's width, 80 columns when piped)::

    npudoctor 0.1.0 prof analyze, 2026-12-01 10:26 UTC
    2 ranks from prof, profile default

    rank    data       tasks   device  AI CPU  idle  comm
    rank 0  torch_npu     20  37.4 ms      0%   24%   50%
      note: rank 0 kernel_details.csv: 1 row(s) with the wrong number of cells skipped

    prof
      ! PROF001 Operators on the AI CPU / host CPU [Cast]
                4 task(s) of >= 20 us on the AI CPU, ...
          fix: ...

    17 findings in 11 checks: 8 pass, 5 warn, 4 skip
    No problems found in 2 ranks; 5 warnings; 4 checks could not apply

Every finding is listed (a passing one's detail is the result: the top operators), with the finding lines
of ``check``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, List, Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from npudoctor.model.units import percent
from npudoctor.report.console import CheckConsole, context_lines, plural, title_line, wrap
from npudoctor.untrusted import clean, one_line

if TYPE_CHECKING:
    from npudoctor.prof.model import ProfResult

# Notes about unreadable rows and files shown without -v (the rest are counted).
NOTES_SHOWN = 5


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
        table.add_row(one_line(clean(rank.label)), rank.source.layout, f"{rank.kernel.rows:,}" if rank.kernel else "-",
                      f"{total / 1000:,.1f} ms" if total else "-", percent(aicpu / total, 0) if total else "-",
                      percent(idle, 0), percent(comm, 0))
    return table


def verdict_scope(result: ProfResult) -> str:
    """What the verdict sentence is about: "No problems found in 2 ranks"."""
    return f"in {plural(len(result.ranks), 'rank')}"


def header(result: ProfResult, command: str, version: str, started: Optional[float], width: int,
           profile: str = "") -> List[Text]:
    context = f"{plural(len(result.ranks), 'rank')} from {', '.join(result.paths)}"
    if profile:
        context += f", profile {profile}"
    return [title_line(f"prof {command}", version, started=started), *context_lines(context, width)]


def note_lines(problems: List[str], width: int, verbose: bool) -> List[Text]:
    """What could not be read, under the table; without -v the first few and a count of the rest."""
    shown = problems if verbose else problems[:NOTES_SHOWN]
    lines: List[Text] = []
    for problem in shown:
        wrapped = wrap(one_line(clean(problem)), width, first="  note: ", rest="        ")  # paths: data
        lines.append(Text("  ") + Text("note: ", style="bold") + Text(wrapped[0][len("  note: "):], style="yellow"))
        lines += [Text(line, style="yellow") for line in wrapped[1:]]
    if len(problems) > len(shown):
        lines.append(Text(f"  ... {len(problems) - len(shown)} more notes (-v lists them)", style="dim"))
    return lines


def render(result: ProfResult, console: Console, verbose: bool = False, command: str = "analyze",
           started: Optional[float] = None, version: Optional[str] = None, profile: str = "") -> None:
    """The whole report; ``started`` (default: now) and ``version`` (default: this one) for the header."""
    from npudoctor import __version__

    out = CheckConsole(console, verbose=verbose)
    width = console.width
    when = time.time() if started is None else started
    out.print([*header(result, command, version or __version__, when, width, profile), Text("")])
    console.print(_rank_table(result))
    out.print(note_lines(result.problems, width, verbose))
    report = result.as_report()
    out.print(out.stage("prof", report.findings, fold=False, skips_as_one=True))
    out.print(out.footer(report, scope=verdict_scope(result)))
