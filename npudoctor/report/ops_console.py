"""Human output of ``npudoctor ops audit``, in the house style of ``check``.

Layout (fits the terminal's width, 80 columns when piped)::

    npudoctor 0.1.0 ops audit on laptop, 2026-12-01 21:40 UTC
    train.py (torch 2.13.0+cpu) against torch_npu 2.1.0.post6 (shipped list, from torch_npu-2.1.0.post6-...)

    fallback: runs on the CPU
      x aten::isin.Tensor_Tensor_out  x5  float32,float32,bool
          via aten::isin.Tensor_Tensor; train.py:5 (<module>)
    decomposed: torch's composite kernel on the NPU, its parts judged
      - aten::isin.Tensor_Tensor  x5  -> aten::empty.memory_format, aten::isin.Tensor_Tensor_out
    native: 20 operators (-v lists them)

    train.py exited 0 after 3.9 s; 1,234 operator calls recorded
    1 operator of 23 falls back to the CPU on torch_npu 2.1.0.post6: aten::isin.Tensor_Tensor_out (x5)
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional

from rich.console import Console
from rich.text import Text

from npudoctor.model.finding import Status
from npudoctor.ops import oplist
from npudoctor.ops.judge import AuditResult, JudgedOp
from npudoctor.report import terminal
from npudoctor.report.console import context_lines, make_console, print_lines, title_line, wrap

_SECTIONS = (
    ("fallback", "fallback: runs on the CPU (copies in and out of the NPU each call)", Status.FAIL, "red"),
    ("unknown", "unknown: not covered by torch_npu's list", Status.WARN, "yellow"),
    ("decomposed", "decomposed: torch's composite kernel runs on the NPU; its parts are judged", Status.SKIP, ""),
    ("native", "native: an NPU kernel in torch_npu", Status.PASS, "green"),
)
SITES_SHOWN = 2


def _short_site(site: str) -> str:
    """``/home/u/proj/train.py:12 (step)`` -> ``train.py:12 (step)``: the file name is enough beside the header."""
    path, _, rest = site.partition(":")
    return os.path.basename(path) + (":" + rest if rest else "")


def fallback_fix(op: JudgedOp, later: Dict[str, str], newest: str) -> str:
    """What ends a fallback: the oldest shipped torch_npu release with an NPU kernel for it, if any."""
    if op.name in later:
        return (f"torch_npu {later[op.name]} runs it on the NPU (shipped list): upgrade torch_npu (and the torch "
                "it pairs with), or replace the operator")
    return (f"no shipped torch_npu list (up to {newest}) runs it on the NPU: replace it with an NPU-supported "
            "operator, or move it out of the training step")


def op_lines(op: JudgedOp, symbol: str, style: str, width: int, verbose: bool, fix: str = "") -> List[Text]:
    name, count = op.name, op.calls
    dtypes = op.dtypes
    lines = [Text(f"  {symbol} {name}  x{count:,}", style=style)]
    details: List[str] = []
    if dtypes and dtypes[0][0] != "-":
        details.append("dtypes " + "; ".join(d for d, _ in dtypes[:2]) + (" ..." if len(dtypes) > 2 else ""))
    if op.into:
        details.append("-> " + ", ".join(op.into))
    if op.via:
        details.append("via " + ", ".join(op.via))
    sites = op.sites
    if sites:
        shown = "; ".join(_short_site(site) + (f" x{n:,}" if len(sites) > 1 else "")
                          for site, n in sites[:SITES_SHOWN])
        more = f" and {len(sites) - SITES_SHOWN} more" if len(sites) > SITES_SHOWN else ""
        details.append(shown + more)
    if op.backward:
        details.append(f"{op.backward:,} in the backward pass")
    if verbose:
        details.append(op.reason)
    for detail in details:
        lines.extend(Text(line) for line in wrap(detail, width, "      ", "        "))
    if fix:
        lines.extend(Text(line) for line in wrap(f"fix: {fix}", width, "      ", "           "))
    return lines


def render(result: AuditResult, console: Optional[Console] = None, verbose: bool = False, version: str = "?",
           host: Optional[str] = None, what: str = "", started: Optional[float] = None,
           run_line: str = "") -> None:
    console = console or make_console()
    width = console.width
    symbols = terminal.status_symbols(console.file)
    op_list = result.op_list
    lines: List[Text] = [title_line("ops audit", version, host, time.time() if started is None else started)]
    lines += context_lines(f"{what} (torch {result.torch}) against {op_list.describe()}", width)
    fallbacks = result.fallbacks
    later = oplist.native_in_later_release([op.name for op in fallbacks], op_list.release) if fallbacks else {}
    newest = (oplist.shipped_releases() or ["?"])[-1]
    for verdict, title, status, style in _SECTIONS:
        ops = result.by_verdict(verdict)
        if not ops:
            continue
        lines.append(Text(""))
        if verdict in ("native", "decomposed") and not verbose:
            lines.append(Text(f"{verdict}: {len(ops):,} operator{'s' if len(ops) != 1 else ''} "
                              f"(-v lists them)", style=style))
            continue
        lines.append(Text(title, style="bold"))
        for op in ops:
            fix = fallback_fix(op, later, newest) if verdict == "fallback" else ""
            lines += op_lines(op, symbols[status], style, width, verbose, fix)
    notes = result.notes
    if notes:
        lines.append(Text(""))
        for note in notes:
            lines.extend(Text(line) for line in wrap(f"note: {note}", width, "", "  "))
    lines.append(Text(""))
    calls = result.calls
    lines.extend(Text(line) for line in wrap(f"{run_line}; {calls:,} operator calls recorded", width, "", "  "))
    lines.extend(Text(line, style="bold") for line in wrap(result.verdict_line(), width, "", "  "))
    print_lines(lines, console)
