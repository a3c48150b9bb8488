"""Probes of the npu-smi stage: run ``npu-smi info`` (the Ascend ``nvidia-smi``) once, with a time limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from npudoctor.parsers.npu_smi import (
    NpuSmiFailure,
    NpuSmiParseError,
    NpuSmiTable,
    parse_npu_smi_info,
    recognise_failure,
)
from npudoctor.probes import provides
from npudoctor.probes.sources import Command

# npu-smi lives in /usr/local/sbin on hosts (often not on a user's PATH); some images use /usr/local/bin.
NPU_SMI_DIRS = ("/usr/local/sbin", "/usr/local/bin")
# How much of a failed run's output to keep as evidence.
_HEAD_LINES = 6


@dataclass(frozen=True)
class NpuSmiFacts:
    """What ``npu-smi info`` said: its table, or the recognised way it failed.

    ``error`` is the runner's: "not-found", "timeout", "permission", "os-error: ...", None when it ran.
    """

    found: bool
    path: Optional[str]
    rc: Optional[int]
    error: Optional[str]
    timeout_s: float
    duration_s: float
    table: Optional[NpuSmiTable] = None
    failure: Optional[NpuSmiFailure] = None
    parse_error: Optional[str] = None
    output_head: str = ""


@provides("npu_smi")
def npu_smi_facts(ctx: Any) -> NpuSmiFacts:
    """Equivalent to ``timeout 15 npu-smi info`` (also looked up in /usr/local/sbin and /usr/local/bin)."""
    timeout_s = float(ctx.profile.get("commands.npu_smi_timeout_s", 15))
    result = ctx.runner.run(Command(("npu-smi", "info"), timeout_s=timeout_s, extra_dirs=NPU_SMI_DIRS))
    output = result.output
    head = "\n".join(output.strip().splitlines()[:_HEAD_LINES])
    common = {"path": result.resolved_path, "rc": result.rc, "error": result.error, "timeout_s": timeout_s,
              "duration_s": round(result.duration_s, 3), "output_head": head}
    if result.error is not None:
        return NpuSmiFacts(found=result.error != "not-found", **common)
    try:
        table = parse_npu_smi_info(result.stdout)
    except NpuSmiParseError as exc:
        return NpuSmiFacts(found=True, failure=recognise_failure(output), parse_error=str(exc), **common)
    return NpuSmiFacts(found=True, table=table, **common)
