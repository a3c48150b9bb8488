"""Human output of ``npudoctor train-step`` and ``npudoctor leak analyze``, in the house style of ``check``.

Layout (fits the terminal's width, 80 columns when piped)::

    npudoctor 0.1.0 train-step on node-a2-01, 2026-12-01 10:26 UTC
    tiny CLIP (32 px / patch 8, 2+2 layers), fp32, batch 32, 20 steps on cpu, profile default

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
from npudoctor.report.console import CheckConsole, context_lines, make_console, title_line, wrap
from npudoctor.workload.leak import human_bytes


def _bytes(value: Optional[float]) -> str:
    """``+1.0 MiB``: a per-step change, signed."""
    if value is None:
        return "-"
    return ("+" if value >= 0 else "") + human_bytes(value)


def _started(report: Report, started: Optional[float]) -> float:
    return started if started is not None else report.started or time.time()


def train_header(report: Report, document: Dict[str, Any], width: int, started: Optional[float] = None) -> List[Text]:
    train = document.get("train") or {}
    config = train.get("config") or {}
    if train:
        what = (f"{train.get('model')} CLIP ({config.get('image_resolution')} px / patch "
                f"{config.get('vision_patch_size')}, {config.get('vision_layers')}+{config.get('transformer_layers')} "
                f"layers), {train.get('precision')}, {train.get('steps')} steps on {document.get('device')}")
    else:
        what = f"no training result on {document.get('device') or '?'} (see TRN001)"
    profile = report.tool.get("profile")
    if profile:
        what += f", profile {profile}"
    first = title_line("train-step", str(report.tool.get("version", "?")), report.host.get("hostname") or "?",
                       _started(report, started))
    return [first, *context_lines(what, width)]


def render(report: Report, document: Dict[str, Any], verbose: bool = False,
           console: Optional[Console] = None, started: Optional[float] = None) -> None:
    console = console or make_console()
    out = CheckConsole(console, verbose=verbose)  # the finding lines of `check`: wrapped, fix under the ID
    out.print(train_header(report, document, console.width, started))
    stage = report.findings[0].stage if report.findings else "workload"
    lines = out.stage(stage, report.findings, fold=False)
    log = (document.get("train") or {}).get("log")
    if log:
        lines += [Text(line) for line in wrap(f"memory log: {log} (npudoctor leak analyze {log})", console.width,
                                              "  ", "    ")]
    out.print(lines)
    out.print(out.footer(report, scope=f"training on {document.get('device') or '?'}"))


def render_leak(verdict: Any, path: str, runs: int, records: int, console: Optional[Console] = None,
                tail_only: bool = False, verbose: bool = False, started: Optional[float] = None,
                version: Optional[str] = None) -> None:
    from npudoctor.workload.report import leak_report

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
            ("host RSS", verdict.rss_slope_bytes_per_step))
    lines += [Text(f"  {name:<10} {_bytes(slope)}/step") for name, slope in rows if slope is not None]
    confidence = ">99.9%" if verdict.confidence >= 0.9995 else f"{verdict.confidence * 100:.1f}%"
    lines.append(Text(f"  confidence of a rise in {verdict.series or '-'}: {confidence}"))
    if verdict.projected_oom_step is not None:
        lines.append(Text(f"  out of memory at about step {verdict.projected_oom_step}"))
    out.print(lines)
    out.print(out.stage(report.findings[0].stage, report.findings, fold=False))
    out.print(out.footer(report, scope="in the memory log"))
