"""`npudoctor parse npu-smi FILE|-`: read `npu-smi info` text pasted from another node into a table or JSON.

The file is user input, not a system file: it is read directly here (not through a runner), and anything that
is not an npu-smi table (binary, huge, empty, another format, cut off before the first chip) gets a one-line
error and exit code 2.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import click

from npudoctor.cli import fail_usage

# Far above any real `npu-smi info` (a 16-die A3 table is about 10 KiB); larger input is not npu-smi output.
MAX_INPUT_BYTES = 16 * 1024 * 1024


@click.group()
def parse() -> None:
    """Parse command output pasted from another node."""


def read_input(source: str) -> str:
    """The text of FILE (or stdin for ``-``), decoded UTF-8 then GB18030; one-line errors for bad input."""
    from npudoctor.parsers.text import decode_text

    name = "stdin" if source == "-" else source
    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(source, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise fail_usage(f"cannot read {name}: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise fail_usage(f"{name}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB; not npu-smi output")
    if b"\x00" in data:
        raise fail_usage(f"{name}: binary data (NUL bytes); expected the text `npu-smi info` prints")
    return decode_text(data)


@parse.command("npu-smi")
@click.argument("source", metavar="FILE|-")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def npu_smi(source: str, fmt: str) -> None:
    """Parse `npu-smi info` output (FILE, or - for stdin) into a table, or JSON with --format json.

    JSON: {"version": {"tool", "driver"}, "chips": [{"npu_id", "chip_id", "name", "health", "bus_id",
    "power_w", "temp_c", "aicore_pct", "memory_used_mib", "memory_total_mib", "hbm_used_mib",
    "hbm_total_mib"}],
    "processes": [{"npu_id", "chip_id", "pid", "name", "memory_mib"}]}; null where the layout has no value.
    """
    from npudoctor.parsers.npu_smi import NpuSmiParseError, parse_npu_smi_info

    text = read_input(source)
    try:
        table = parse_npu_smi_info(text)
    except NpuSmiParseError as exc:
        raise fail_usage(f"{'stdin' if source == '-' else source}: {exc}") from None
    for note in table.notes:
        click.echo(f"npudoctor: note: {note}", err=True)
    if fmt == "json":
        click.echo(json.dumps(table.to_dict(), indent=2, ensure_ascii=False))
        return
    _render(table)


def _cell(value: Optional[Any]) -> str:
    return "-" if value is None else str(value)


def _pair(used: Optional[int], total: Optional[int]) -> str:
    return "-" if used is None and total is None else f"{_cell(used)} / {_cell(total)}"


def _render(table: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    # Piped output (a file, a ticket) gets the full width instead of rich's 80-column fallback with "…" cells.
    width = None if sys.stdout.isatty() else 200
    console = Console(file=sys.stdout, highlight=False, soft_wrap=True, width=width)
    title = f"npu-smi {table.tool_version or '?'}  driver {table.driver_version or '?'}"
    chips = Table(title=title, title_justify="left")
    for header in ("NPU", "Chip", "Name", "Health", "Bus-Id", "Power(W)", "Temp(C)", "AICore(%)",
                   "Memory(MiB)", "HBM(MiB)"):
        chips.add_column(header, no_wrap=True)
    for chip in table.chips:
        chips.add_row(str(chip.npu_id), _cell(chip.chip_id), chip.name, chip.health, _cell(chip.bus_id),
                      _cell(chip.power_w), _cell(chip.temp_c), _cell(chip.aicore_pct),
                      _pair(chip.memory_used_mib, chip.memory_total_mib),
                      _pair(chip.hbm_used_mib, chip.hbm_total_mib))
    console.print(chips)
    if not table.has_process_section:
        return
    if not table.processes:
        console.print("no running processes")
        return
    processes = Table(title="processes", title_justify="left")
    for header in ("NPU", "Chip", "PID", "Name", "Memory(MiB)"):
        processes.add_column(header, no_wrap=True)
    for process in table.processes:
        processes.add_row(str(process.npu_id), _cell(process.chip_id), str(process.pid), process.name,
                          _cell(process.memory_mib))
    console.print(processes)
