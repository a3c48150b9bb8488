"""`npudoctor parse npu-smi FILE|-`: read `npu-smi info` text pasted from another node into a table or JSON.

The file is user input, not a system file: it is read directly here (not through a runner), and anything that
is not an npu-smi table (binary, huge, empty, another format, cut off before the first chip) gets a one-line
error and exit code 2.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Tuple

import click

from npudoctor.cli.common import EXIT_FINDINGS, PATH_OR_STDIN, fail_usage

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
@click.argument("source", metavar="FILE|-", type=PATH_OR_STDIN)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def npu_smi(source: str, fmt: str) -> None:
    """Parse `npu-smi info` output (FILE, or - for stdin) into a table, or JSON with --format json.

    The table is stacked (one block per chip) when it does not fit the terminal (80 columns when piped).
    Also read: `npu-smi info -m` (NPU and chip ids to logic ids) and the key/value reports of
    `npu-smi info -t health|ecc|board|common|memory|usages|temp|power ...`, each fault code of a health report
    explained (level and action, as `npudoctor explain CODE`).

    JSON: {"version": {"tool", "driver"}, "chips": [{"npu_id", "chip_id", "name", "health", "bus_id",
    "power_w", "temp_c", "aicore_pct", "memory_used_mib", "memory_total_mib", "hbm_used_mib",
    "hbm_total_mib"}],
    "processes": [{"npu_id", "chip_id", "pid", "name", "memory_mib"}]}; null where the layout has no value.
    For `-m`: {"ids": [{"npu_id", "chip_id", "logic_id", "phy_id", "name"}]}; for a `-t` report:
    {"blocks": [{"npu_id", "chip_id", "fields": {key: value}, "alarms": [{"code", "level", "action",
    "title"}]}]}.

    \b
    Exit codes:
      0  the table was read
      1  the text is npu-smi failing (a dcmi error, a missing library): explained as `check` does
      2  unreadable input, or not npu-smi output
    """
    from npudoctor.parsers.npu_smi import NpuSmiParseError, parse_npu_smi_info, recognise_failure

    text = read_input(source)
    name = "stdin" if source == "-" else source
    try:
        table = parse_npu_smi_info(text)
    except NpuSmiParseError as exc:
        failure = recognise_failure(text)
        if failure is None:
            document = _sub_command(text)
            if document is None:
                raise fail_usage(f"{name}: {exc}; nor `npu-smi info -m` or `-t ...` output") from None
            _emit_sub_command(document, fmt)
            return
        _explain_failure(name, failure)
        raise click.exceptions.Exit(EXIT_FINDINGS) from None
    from npudoctor.report import terminal
    from npudoctor.report.console import wrap
    from npudoctor.untrusted import clean, clean_value

    for note in table.notes:  # a note, like every line for people, fits the terminal (80 columns piped)
        for line in wrap(clean(note), terminal.width(), "npudoctor: note: ", "  "):
            click.echo(line, err=True)
    if fmt == "json":  # process names are the node's text (arguments, secrets): cleaned as in every report
        from npudoctor.report import json_report

        json_report.emit(clean_value(table.to_dict()))
        return
    _render(table)


def _sub_command(text: str) -> Optional[Dict[str, Any]]:
    """`npu-smi info -m` or a `-t` report as a document, or None when the text is neither."""
    from dataclasses import asdict

    from npudoctor.logs import fault_codes
    from npudoctor.parsers.npu_smi import (
        NpuSmiParseError,
        parse_npu_smi_detail,
        parse_npu_smi_mapping,
    )
    from npudoctor.parsers.npu_smi import (
        fault_codes as codes_in,
    )

    try:
        return {"ids": [asdict(ids) for ids in parse_npu_smi_mapping(text)]}
    except NpuSmiParseError:
        pass
    try:
        blocks = parse_npu_smi_detail(text)
    except NpuSmiParseError:
        return None
    keys = [key for block in blocks for key, _value in block.fields]
    if len(keys) < 2 or not all(key[:1].isupper() for key in keys):  # npu-smi capitalises every key
        return None
    document: List[Dict[str, Any]] = []
    for block in blocks:
        entry = block.to_dict()
        found = [fault_codes.fault(code) for key, value in block.fields if key.lower().startswith("error code")
                 for code in codes_in(value)]
        entry["alarms"] = [{"code": a.code, "level": a.level, "action": a.action, "title": a.title}
                           for a in found if a is not None]
        document.append(entry)
    return {"blocks": document}


def _emit_sub_command(document: Dict[str, Any], fmt: str) -> None:
    from npudoctor.report import terminal
    from npudoctor.report.console import wrap
    from npudoctor.untrusted import clean, clean_value

    if fmt == "json":
        from npudoctor.report import json_report

        json_report.emit(clean_value(document))
        return
    if "ids" in document:
        click.echo(f"{'NPU':>4} {'Chip':>4} {'Logic ID':>8}  Name")
        for ids in document["ids"]:
            click.echo(f"{ids['npu_id']:>4} {ids['chip_id']:>4} {_cell(ids['logic_id']):>8}  "
                       f"{clean(ids['name'])}")
        return
    for block in document["blocks"]:
        click.echo(f"NPU {_cell(block['npu_id'])} chip {_cell(block['chip_id'])}")
        for key, value in block["fields"].items():
            click.echo(clean(f"  {key}: {value}"))
        for alarm in block["alarms"]:
            for line in wrap(f"alarm {alarm['code']}: {alarm['title']} -> {alarm['action']} (MindCluster level "
                             f"{alarm['level']}; npudoctor explain {alarm['code']})", terminal.width(), "  ",
                             "    "):
                click.echo(line)


def _explain_failure(name: str, failure: Any) -> None:
    """What SMI001 says about the same output: the line, its meaning and cause, and the fix."""
    from npudoctor.checks.npu_smi import explain_failure
    from npudoctor.report import terminal
    from npudoctor.report.console import wrap

    explained = explain_failure(failure)
    width = terminal.width()
    from npudoctor.untrusted import clean, one_line

    # the file's own text is data: one line of it, cleaned, wrapped to the width like the rest
    for line in wrap(one_line(clean(f"{name}: npu-smi failed: {failure.line}")), width, "", "  "):
        click.echo(line)
    for label in ("meaning", "cause", "fix"):
        for index, part in enumerate(str(explained.get(label) or "").splitlines()):
            first = f"  {label}: " if index == 0 else "    "
            for line in wrap(part.strip(), width, first, "    ", words_may_break=False):
                click.echo(line)


def _cell(value: Optional[Any]) -> str:
    return "-" if value is None else str(value)


def _pair(used: Optional[int], total: Optional[int]) -> str:
    return "-" if used is None and total is None else f"{_cell(used)} / {_cell(total)}"


CHIP_HEADERS = ("NPU", "Chip", "Name", "Health", "Bus-Id", "Power(W)", "Temp(C)", "AICore(%)", "Memory(MiB)",
                "HBM(MiB)")


def _chip_row(chip: Any) -> Tuple[str, ...]:
    return (str(chip.npu_id), _cell(chip.chip_id), chip.name, chip.health, _cell(chip.bus_id),
            _cell(chip.power_w), _cell(chip.temp_c), _cell(chip.aicore_pct),
            _pair(chip.memory_used_mib, chip.memory_total_mib), _pair(chip.hbm_used_mib, chip.hbm_total_mib))


def _render(table: Any) -> None:
    from rich.table import Table

    from npudoctor.report.console import make_console, wrap

    console = make_console()
    title = f"npu-smi {table.tool_version or '?'}  driver {table.driver_version or '?'}"
    chips = Table(title=title, title_justify="left")
    for header in CHIP_HEADERS:
        chips.add_column(header, no_wrap=True)
    rows = [_chip_row(chip) for chip in table.chips]
    for row in rows:
        chips.add_row(*row)
    if console.measure(chips, options=console.options.update(max_width=10_000)).maximum <= console.width:
        console.print(chips)
    else:
        # Too wide for the terminal: one block per chip, every value labelled, wrapped to the width.
        console.print(title)
        for row in rows:
            cells = dict(zip(CHIP_HEADERS, row))
            console.print(f"\nNPU {cells['NPU']} chip {cells['Chip']}  {cells['Name']}  {cells['Health']}")
            # A field ("HBM(MiB) 3397 / 65536") never breaks across lines: NBSP inside it while wrapping.
            rest = "   ".join(f"{header} {cells[header]}".replace(" ", "\u00a0") for header in CHIP_HEADERS[4:])
            for line in wrap(rest, console.width, "  ", "  ", words_may_break=False):
                console.print(line.replace("\u00a0", " "))
    if not table.has_process_section:
        return
    if not table.processes:
        console.print("no running processes")
        return
    processes = Table(title="processes", title_justify="left")
    for header in ("NPU", "Chip", "PID", "Name", "Memory(MiB)"):
        processes.add_column(header, no_wrap=False)
    for process in table.processes:
        processes.add_row(str(process.npu_id), _cell(process.chip_id), str(process.pid), process.name,
                          _cell(process.memory_mib))
    console.print(processes)
