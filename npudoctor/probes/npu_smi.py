"""Probes of the npu-smi stage: run ``npu-smi info`` (the Ascend ``nvidia-smi``) once, with a time limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from npudoctor.knowledge import setting
from npudoctor.parsers.npu_smi import (
    NpuSmiFailure,
    NpuSmiParseError,
    NpuSmiTable,
    parse_colon_sections,
    parse_npu_smi_info,
    recognise_failure,
)
from npudoctor.probes import prefetches, provides
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

    path: Optional[str]
    rc: Optional[int]
    error: Optional[str]
    timeout_s: float
    duration_s: float
    table: Optional[NpuSmiTable] = None
    failure: Optional[NpuSmiFailure] = None
    parse_error: Optional[str] = None
    output_head: str = ""
    # For chips whose Health is not OK: chip subject -> `npu-smi info -t health` keys (Error Code, ...), or
    # {"query_error": why it could not be read}.
    health_details: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@prefetches("npu-smi")
def npu_smi_info_command(ctx: Any) -> Command:
    timeout_s = float(setting(ctx.profile, "commands.npu_smi_timeout_s"))
    return Command(("npu-smi", "info"), timeout_s=timeout_s, extra_dirs=NPU_SMI_DIRS)


@provides("npu_smi")
def npu_smi_facts(ctx: Any) -> NpuSmiFacts:
    """Equivalent to ``timeout 15 npu-smi info`` (also looked up in /usr/local/sbin and /usr/local/bin)."""
    command = npu_smi_info_command(ctx)
    timeout_s = command.timeout_s
    result = ctx.runner.run(command)
    output = result.output
    head = "\n".join(output.strip().splitlines()[:_HEAD_LINES])
    common = {"path": result.resolved_path, "rc": result.rc, "error": result.error, "timeout_s": timeout_s,
              "duration_s": round(result.duration_s, 3), "output_head": head}
    if result.error is not None:
        return NpuSmiFacts(**common)
    try:
        table = parse_npu_smi_info(result.stdout)
    except NpuSmiParseError as exc:
        return NpuSmiFacts(failure=recognise_failure(output), parse_error=str(exc), **common)
    details = _health_details(ctx, table, timeout_s)
    return NpuSmiFacts(table=table, health_details=details, **common)


def _health_details(ctx: Any, table: NpuSmiTable, timeout_s: float) -> Dict[str, Dict[str, str]]:
    """Equivalent to ``npu-smi info -t health -i <npu> -c <chip>`` for each chip that is not OK (at most
    ``npu_smi.health_detail_max_chips`` of them: each call can take seconds): its error codes say why."""
    limit = int(setting(ctx.profile, "npu_smi.health_detail_max_chips"))
    unhealthy = [chip for chip in table.chips if chip.health.strip().lower() != "ok"][:max(limit, 0)]
    details: Dict[str, Dict[str, str]] = {}
    for chip in unhealthy:
        argv = ("npu-smi", "info", "-t", "health", "-i", str(chip.npu_id), "-c", str(chip.chip_id or 0))
        result = ctx.runner.run(Command(argv, timeout_s=timeout_s, extra_dirs=NPU_SMI_DIRS))
        sections = parse_colon_sections(result.stdout) if result.error is None else []
        if result.error is not None or result.rc or not sections:
            reason = result.error or f"exit code {result.rc}, {len(sections)} key/value lines"
            details[chip.subject] = {"query_error": f"`{' '.join(argv)}`: {reason}"}
            continue
        merged: Dict[str, str] = {}
        for section in sections:
            merged.update(section)
        details[chip.subject] = merged
    return details
