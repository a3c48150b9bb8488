"""Human output of ``npudoctor train-step`` and ``npudoctor leak analyze`` (the house style of ``check``)."""

from __future__ import annotations

from typing import Any, Dict, Optional

from rich.console import Console
from rich.text import Text

from npudoctor.model.finding import Report, Status
from npudoctor.report.console import CheckConsole, make_console
from npudoctor.report.symbols import STYLE
from npudoctor.workload.leak import human_bytes


def _bytes(value: Optional[float]) -> str:
    """``+1.0 MiB``: a per-step change, signed."""
    if value is None:
        return "-"
    return ("+" if value >= 0 else "") + human_bytes(value)


def render(report: Report, document: Dict[str, Any], verbose: bool = False,
           console: Optional[Console] = None) -> None:
    console = console or make_console()
    train = document.get("train") or {}
    config = train.get("config") or {}
    if not train:
        console.print(Text.assemble(("npudoctor train-step", "bold"), f" on {document.get('device')}"))
    else:
        console.print(Text.assemble(
            ("npudoctor train-step", "bold"),
            f" {train.get('model')} CLIP ({config.get('image_resolution')} px / patch "
            f"{config.get('vision_patch_size')}, {config.get('vision_layers')}+{config.get('transformer_layers')} "
            f"layers), {train.get('precision')}, {train.get('steps')} steps on {document.get('device')}"))
    findings = CheckConsole(console, verbose=verbose)  # the finding lines of `check`: wrapped, fix under the ID
    for finding in report.findings:
        for line in findings.finding_lines(finding):
            console.print(line)
    if train.get("log"):
        console.print(f"  memory log: {train['log']}  (npudoctor leak analyze {train['log']})", markup=False)
    bad = [f for f in report.findings if f.status in (Status.FAIL, Status.ERROR)]
    warned = [f for f in report.findings if f.status is Status.WARN]
    if bad:
        verdict = Text("verdict: FAIL", style=STYLE[Status.FAIL])
        verdict.append(f": {bad[0].id} {bad[0].title}: {bad[0].detail}", style="")
    else:
        verdict = Text("verdict: OK", style=STYLE[Status.PASS])
        verdict.append(f": trains on {document.get('device')}; loss {train.get('loss_first'):.3f} -> "
                       f"{train.get('loss_last'):.3f}" if train.get("loss_first") is not None else "", style="")
        if warned:
            verdict.append(f"; {len(warned)} warning(s)", style=STYLE[Status.WARN])
        skipped = [f.id for f in report.findings if f.status is Status.SKIP]
        if skipped:
            verdict.append(f"; not judged: {', '.join(skipped)}", style=STYLE[Status.SKIP])
    console.print(verdict)


def render_leak(verdict: Any, path: str, runs: int, records: int, console: Optional[Console] = None,
                tail_only: bool = False) -> None:
    console = console or make_console()
    console.print(Text.assemble(("npudoctor leak analyze", "bold"), f" {path}: {records} steps"
                                f"{' (in its last 64 MiB)' if tail_only else ''}"
                                f"{f' (last of {runs} runs)' if runs > 1 else ''} on {verdict.device or '?'}, "
                                f"{verdict.warmup_steps} warm-up"))
    rows = (("allocated", verdict.slope_bytes_per_step if verdict.series == "allocated_bytes" else None),
            ("reserved", verdict.reserved_slope_bytes_per_step),
            ("host RSS", verdict.rss_slope_bytes_per_step))
    for name, slope in rows:
        if slope is not None:
            console.print(f"  {name:<10} {_bytes(slope)}/step", markup=False)
    confidence = ">99.9%" if verdict.confidence >= 0.9995 else f"{verdict.confidence * 100:.1f}%"
    console.print(f"  confidence of a rise in {verdict.series or '-'}: {confidence}", markup=False)
    if verdict.projected_oom_step is not None:
        console.print(f"  out of memory at about step {verdict.projected_oom_step}", markup=False)
    for i, line in enumerate(verdict.advice):
        console.print(Text("  fix: " if i == 0 else "       ", style="bold") + Text(line))
    style = STYLE[Status.FAIL] if verdict.leak else STYLE[Status.WARN] if verdict.reserved_growth else STYLE[
        Status.PASS]
    console.print(Text("verdict: ", style=style) + Text(verdict.summary))
