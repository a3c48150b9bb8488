"""Human output of ``npudoctor train-step`` and ``npudoctor leak analyze``, in the house style of ``check``.

Layout (fits the terminal's width, 80 columns when piped)::

    npudoctor 0.1.0 train-step on node-a2-01, 2026-12-01 10:26 UTC
    tiny CLIP, fp32, 20 steps on cpu, profile default

    workload
      ✓ TRN001  a CLIP training step runs on the device [cpu]
                20 steps of a tiny CLIP in fp32 (30.7 ms/step); ...
      ✓ TRN002  the training loss falls [cpu]: loss 4.043 -> 0.595 over 20 steps
      memory log: mem.jsonl (npudoctor leak analyze mem.jsonl)

    4 findings in 4 checks: 4 pass
    No problems found training on cpu
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from rich.console import Console
from rich.text import Text

from npudoctor.model.finding import Report
from npudoctor.model.units import rise_phrase, signed_bytes
from npudoctor.report.console import CheckConsole, context_lines, make_console, title_line, wrap


def _started(report: Report, started: Optional[float]) -> float:
    return started if started is not None else report.started or time.time()


def train_header(version: str, host: str, started: Optional[float], model: str, precision: str, steps: int,
                 device: str, profile: str, width: int) -> List[Text]:
    """Printed as soon as the device is chosen (before the first step), like ``check``'s header."""
    what = f"{model} CLIP, {precision}, {steps} steps on {device}" + (f", profile {profile}" if profile else "")
    return [title_line("train-step", version, host, time.time() if started is None else started),
            *context_lines(what, width)]


def render(report: Report, document: Dict[str, Any], verbose: bool = False, console: Optional[Console] = None,
           started: Optional[float] = None, header: bool = True) -> None:
    """The findings, summary and verdict of a run; ``header=False`` when :func:`train_header` was printed
    at its start."""
    console = console or make_console()
    out = CheckConsole(console, verbose=verbose)  # the finding lines of `check`: wrapped, fix under the ID
    device = str(document.get("device") or "?")
    if header:
        train = document.get("train") or {}
        out.print(train_header(str(report.tool.get("version", "?")), str(report.host.get("hostname") or "?"),
                               _started(report, started), str(train.get("model", "?")),
                               str(train.get("precision", "?")), int(train.get("steps") or 0), device,
                               str(report.tool.get("profile") or ""), console.width))
    stage = report.findings[0].stage if report.findings else "workload"
    lines = out.stage(stage, report.findings, fold=False)
    log = (document.get("train") or {}).get("log")
    if log:
        lines += [Text(line) for line in wrap(f"memory log: {log} (npudoctor leak analyze {log})", console.width,
                                              "  ", "    ")]
    out.print(lines)
    out.print(out.footer(report, scope=f"training on {device}"))


def render_leak(verdict: Any, path: str, runs: int, records: int, console: Optional[Console] = None,
                tail_only: bool = False, verbose: bool = False, started: Optional[float] = None,
                version: Optional[str] = None) -> None:
    from npudoctor.workload.findings import leak_report

    console = console or make_console()
    report = leak_report(verdict.to_dict(), verdict.device or "?", path)
    if version is not None:
        report.tool["version"] = version
    out = CheckConsole(console, verbose=verbose)
    what = (f"{path}: {records} steps{' (in its last 64 MiB)' if tail_only else ''}"
            f"{f' (last of {runs} runs)' if runs > 1 else ''} on {verdict.device or '?'}, "
            f"{verdict.warmup_steps} warm-up")
    lines = [title_line("leak analyze", str(report.tool["version"]), started=_started(report, started)),
             *context_lines(what, console.width), Text("")]
    rows = (("allocated", verdict.slope_bytes_per_step if verdict.series == "allocated_bytes" else None),
            ("reserved", verdict.reserved_slope_bytes_per_step),
            ("host RSS", verdict.rss_slope_bytes_per_step),
            ("malloc in-use", verdict.malloc_in_use_slope_bytes_per_step),
            ("malloc held", verdict.malloc_held_slope_bytes_per_step),
            ("workers RSS", verdict.workers_slope_bytes_per_step if verdict.workers_growth else None))
    lines += [Text(f"  {name:<13} {signed_bytes(slope)}/step") for name, slope in rows if slope is not None]
    lines.append(Text(f"  {rise_phrase(verdict.confidence, verdict.series or '-')}"))
    if verdict.projected_oom_step is not None:
        lines.append(Text(f"  out of memory at about step {verdict.projected_oom_step}"))
    for note in verdict.notes:
        lines += [Text(line) for line in wrap(f"note: {note}", console.width, first="  ", rest="        ")]
    out.print(lines)
    out.print(out.stage(report.findings[0].stage, report.findings, fold=False))
    out.print(out.footer(report, scope="in the memory log"))
