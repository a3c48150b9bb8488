"""The npu-smi info parser on every real layout: a walk over all shared samples, and spot checks on copies."""

from __future__ import annotations

import re

import pytest

from npudoctor.parsers.npu_smi import (
    NpuSmiParseError,
    parse_colon_sections,
    parse_npu_smi_info,
    recognise_failure,
)
from tests.samples import real_samples, smi, strip_header

_HEADER = re.compile(r"^\s*\|\s*NPU\s+Name\s*\|\s*Health\s*\|")
_PROCESS_HEADER = re.compile(r"\|\s*Process id\s*\|", re.IGNORECASE)
_INT_ROW = re.compile(r"^\s*\|\s*\d+\s")


def _main_table_samples():
    found = real_samples("npu-smi-info_*") + real_samples("*npu_smi_info*")
    return [path for path in found if any(map(_HEADER.match, path.read_text("utf-8").splitlines()))]


def _expected_chips(text: str) -> int:
    """Chips the table's own rows show: rows starting with `| <int>` between the header and the process
    section, two per chip (a trailing half chip is a cut-off row)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if _HEADER.match(line))
    rows = 0
    for line in lines[start + 1:]:
        if _PROCESS_HEADER.search(line):
            break
        if _INT_ROW.match(line) and line.count("|") >= 3:
            rows += 1
    return rows // 2


MAIN_TABLES = _main_table_samples()


@pytest.mark.parametrize("path", MAIN_TABLES, ids=lambda p: p.name[:60])
def test_every_shared_main_table_parses_with_its_own_chip_count(path):
    text = strip_header(path.read_text("utf-8"))
    table = parse_npu_smi_info(text)
    assert len(table.chips) >= 1
    assert len(table.chips) == _expected_chips(text)
    assert table.tool_version and re.match(r"^\d+\.\d+\.", table.tool_version)
    for chip in table.chips:
        assert chip.health and chip.name
        assert chip.memory_total_mib is None or chip.memory_total_mib >= (chip.memory_used_mib or 0)


def test_the_walk_covers_the_layout_families():
    names = " ".join(p.name for p in MAIN_TABLES)
    for family in ("910B3", "910A", "310P3", "310B4", "310_Atlas200DK", "partial-ellipsis", "with-processes"):
        assert family in names


def test_910b3_eight_cards_values_as_printed():
    table = parse_npu_smi_info(smi("910B3_8card_24"))
    assert (table.tool_version, table.driver_version) == ("24.1.0.3", "24.1.0.3")
    assert [c.npu_id for c in table.chips] == list(range(8))
    first = table.chips[0]
    assert first.to_dict() == {
        "npu_id": 0, "chip_id": 0, "name": "910B3", "health": "OK", "bus_id": "0000:C1:00.0", "power_w": 91.1,
        "temp_c": 32, "aicore_pct": 0, "memory_used_mib": 0, "memory_total_mib": 0, "hbm_used_mib": 3397,
        "hbm_total_mib": 65536,
    }
    assert table.has_process_section and not table.processes and table.idle_npus == tuple(range(8))
    assert not table.partial and not table.notes


def test_a3_two_dies_per_npu_with_phy_id_and_dash_power():
    table = parse_npu_smi_info(smi("A3_Ascend910"))
    assert len(table.chips) == 16 and table.npu_ids == list(range(8))
    second_die = table.chips[1]
    assert (second_die.npu_id, second_die.chip_id, second_die.phy_id) == (0, 1, 1)
    assert second_die.power_w is None and table.chips[0].power_w == 161.8
    assert second_die.bus_id == "0000:9F:00.0" and table.chips[-1].phy_id == 15
    assert len({c.bus_id for c in table.chips}) == 16


def test_310p3_duo_two_chips_share_a_bus_id_and_cut_row_is_noted():
    table = parse_npu_smi_info(smi("310P3-Duo"))
    assert [(c.npu_id, c.chip_id, c.device_id) for c in table.chips] == [(1, 0, 0), (1, 1, 1)]
    assert {c.bus_id for c in table.chips} == {"0000:01:00.0"}
    assert table.chips[1].memory_total_mib == 43693 and table.chips[0].hbm_total_mib is None
    assert table.chips[0].power_w is None  # printed NA
    assert table.partial and any("NPU 2" in note for note in table.notes)


def test_310b4_alarm_soc_without_bus_id():
    (chip,) = parse_npu_smi_info(smi("310B4_Alarm")).chips
    assert (chip.name, chip.health, chip.bus_id) == ("310B4", "Alarm", None)
    assert (chip.power_w, chip.temp_c) == (0.0, 65)
    assert (chip.hugepages_used, chip.hugepages_total, chip.memory_used_mib, chip.memory_total_mib) == (
        15, 15, 3628, 15609)


def test_910a_21_0_2_without_hugepages_column():
    table = parse_npu_smi_info(smi("910A_2card"))
    assert [c.npu_id for c in table.chips] == [1, 4]  # NPU ids are not contiguous
    chip = table.chips[1]
    assert (chip.power_w, chip.temp_c, chip.hugepages_total) == (65.6, 58, None)
    assert (chip.memory_used_mib, chip.memory_total_mib, chip.hbm_used_mib, chip.hbm_total_mib) == (
        1809, 15079, 0, 32768)
    assert not table.has_process_section


def test_310_old_layout_two_fields_per_row():
    (chip,) = parse_npu_smi_info(
        smi("310_Atlas200DK")).chips
    assert (chip.name, chip.power_w, chip.temp_c, chip.aicore_pct) == ("310", 12.8, 58, 0)
    assert (chip.memory_used_mib, chip.memory_total_mib) == (5324, 8192)
    assert chip.hbm_total_mib is None and chip.bus_id is None


def test_misaligned_warning_row_is_read_by_cells_not_columns():
    table = parse_npu_smi_info(smi("NPU3-Warning"))
    warning = table.chips[3]
    assert (warning.health, warning.power_w, warning.temp_c) == ("Warning", 90.6, 33)
    assert [c.health for c in table.chips].count("OK") == 7


def test_partial_ellipsis_table_parses_with_a_note():
    table = parse_npu_smi_info(smi("partial-ellipsis"))
    assert [c.npu_id for c in table.chips] == [7]
    assert table.partial and "partial" in table.notes[0]


def test_processes_including_empty_names_and_missing_space_in_pairs():
    table = parse_npu_smi_info(smi("with-processes"))
    assert len(table.processes) == 8
    assert table.processes[0].to_dict() == {"npu_id": 0, "chip_id": 0, "pid": 139667, "name": "python",
                                            "memory_mib": 30780}
    assert table.chips[0].hbm_used_mib == 30710 and table.chips[0].hugepages_used == 1123  # "30710/ 32768"
    empty = parse_npu_smi_info(smi("empty-process-names"))
    assert [(p.npu_id, p.pid, p.name) for p in empty.processes] == [
        (0, 582939, ""), (1, 695171, ""), (6, 99910, ""), (7, 99976, "")]
    assert empty.idle_npus == (2, 3, 4, 5)


def test_two_pasted_runs_read_the_first_table_only():
    once = smi("910B2C")
    table = parse_npu_smi_info(once + "\n$ npu-smi info\n" + once)
    assert len(table.chips) == 2 and len(table.processes) == 1
    assert table.notes == ("a second table follows the first; only the first is read",)


def test_large_npu_id_and_tool_driver_versions_differ():
    table = parse_npu_smi_info(smi("NPUID2144"))
    assert (table.tool_version, table.driver_version, table.chips[0].npu_id) == ("22.0.2", "22.0.4", 2144)


def test_noise_lines_before_the_table_are_ignored():
    table = parse_npu_smi_info(smi("910ProB"))
    assert len(table.chips) == 8 and table.chips[0].memory_total_mib == 13553


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("   \n\n", "empty"),
    ("Total Count                    : 8\n\nNPU ID                         : 0\n", "not an npu-smi info"),
    ("+-----+\n| npu-smi 24.1.0    Version: 24.1.0 |\n+-----+\n| NPU   Name   | Health   | Power(W) |\n",
     "no chip"),
    ("+-----+\n| npu-smi 24.1.0    Version: 24.1.0 |\n+-----+\n",
     "npu-smi 24.1.0 banner but no table header"),
])
def test_bad_input_is_a_one_line_parse_error(text, reason):
    with pytest.raises(NpuSmiParseError) as caught:
        parse_npu_smi_info(text)
    assert reason in str(caught.value) and "\n" not in str(caught.value)


def test_failure_text_is_recognised_not_parsed():
    text = smi("dcmi-8020_device")
    with pytest.raises(NpuSmiParseError, match="ret is -8020"):
        parse_npu_smi_info(text)
    failure = recognise_failure(text)
    assert failure is not None and (failure.kind, failure.code) == ("dcmi", -8020)
    failure = recognise_failure(smi("dcmi-8005"))
    assert failure is not None and failure.code == -8005
    failure = recognise_failure(smi("libc_sec"))
    assert failure is not None and (failure.kind, failure.library) == ("missing-library", "libc_sec.so")
    failure = recognise_failure(smi("no-such-file"))
    assert failure is not None and failure.kind == "no-such-file"
    assert recognise_failure("everything is fine") is None


def test_key_value_outputs_of_t_board_health_and_l():
    (board,) = parse_colon_sections(smi("t-board_card"))  # TAB-indented
    assert board["PCIe Bus Info"] == "0000:61:00.0" and board["Firmware Version"] == "7.1.0.7.220"
    assert board["PCI Device ID"] == "0xD801" and len(board) == 15
    (health,) = parse_colon_sections(smi("t-health_OK"))
    assert health == {"Health Status": "OK", "Error Code": "NA", "Error Information": "NA"}
    listing = parse_colon_sections(smi("info-l_8card"))  # 8-space indent, blank-line sections
    assert listing[0] == {"Total Count": "8"} and len(listing) == 9
    assert [s["NPU ID"] for s in listing[1:]] == [str(i) for i in range(8)]
    assert parse_colon_sections(smi("910B3_8card_24")) == []  # the main table has no key/value lines


def test_950_layout_with_npu_id_and_name_in_separate_cells():
    table = parse_npu_smi_info(smi("950DT"))
    assert table.tool_version == "25.6.rc1.b218"
    assert [(c.npu_id, c.name, c.health) for c in table.chips] == [
        (0, "Ascend950DT", "OK"), (1, "Ascend950DT", "OK"), (7, "Ascend950DT", "Warning")]
    last = table.chips[2]
    assert (last.chip_id, last.bus_id, last.aicore_pct, last.power_w) == (None, None, 42, 397.5)
    assert (last.hbm_used_mib, last.hbm_total_mib, last.memory_total_mib) == (91000, 98304, 0)
    assert not table.notes


def test_wide_26_layout_and_a_fifth_process_column():
    table = parse_npu_smi_info(smi("26.0.rc1_wide"))
    assert [(c.npu_id, c.chip_id, c.phy_id) for c in table.chips] == [
        (0, 0, 0), (0, 1, 1), (5, 0, 10), (5, 1, 11)]
    assert table.chips[0].hbm_used_mib == 59807 and table.chips[1].aicore_pct == 60
    assert [(p.npu_id, p.chip_id, p.pid, p.name, p.memory_mib) for p in table.processes] == [
        (0, 0, 1774110, "VLLMWorker_PP", 56684), (0, 1, 1777209, "VLLMWorker_PP", 56684)]
    assert table.idle_npus == (5,)


# Pastes that are not whole tables (issue 23): read what is visible, say it is partial.

def _910b3_lines():
    return smi("910B3_8card_24.1.0.3").splitlines()


def test_a_paste_without_header_rows_reads_its_chips_as_partial():
    lines = _910b3_lines()
    first_chip_border = next(i for i, line in enumerate(lines) if line.startswith("+===="))
    table = parse_npu_smi_info("\n".join(lines[first_chip_border:]))
    assert len(table.chips) == 8 and table.partial
    assert (table.chips[0].hbm_used_mib, table.chips[0].hbm_total_mib, table.chips[0].power_w) == (3397, 65536, 91.1)
    assert any("no header rows" in note for note in table.notes)


def test_the_version_banner_outside_the_box_is_read():
    lines = _910b3_lines()
    banner = next(line for line in lines if "npu-smi" in line).strip("| ").strip()  # npu-smi 24.1.0.3  Version:..
    table = parse_npu_smi_info(banner + "\n" + "\n".join(lines[2:]))
    assert (table.tool_version, table.driver_version, len(table.chips)) == ("24.1.0.3", "24.1.0.3", 8)
    assert parse_npu_smi_info("root@node:~# npu-smi info\n" + "\n".join(lines[2:])).tool_version is None


def test_hand_narrowed_cells_read_the_same():
    narrow = "\n".join(re.sub(r" {2,}", " ", line) for line in _910b3_lines())
    assert parse_npu_smi_info(narrow).chips == parse_npu_smi_info(smi("910B3_8card_24.1.0.3")).chips


def test_a_row_cut_mid_way_keeps_what_is_visible():
    lines = _910b3_lines()
    second_chip = next(i for i, line in enumerate(lines) if line.startswith("| 1 "))
    head = "\n".join(lines[:second_chip])
    after_health = parse_npu_smi_info(head + "\n" + lines[second_chip][:40])  # `| 1  910B3  | OK   `
    assert [(c.npu_id, c.health, c.hbm_used_mib) for c in after_health.chips] == [(0, "OK", 3397), (1, "OK", None)]
    assert after_health.partial
    in_health = parse_npu_smi_info(head + "\n" + lines[second_chip][:31] + "O")  # health cut to "O"
    assert [c.npu_id for c in in_health.chips] == [0] and in_health.partial


def test_the_health_words_are_the_ones_the_checks_map():
    from npudoctor import knowledge
    from npudoctor.parsers.npu_smi import HEALTH_WORDS

    assert set(knowledge.load("npu_smi_errors")["health"]) == HEALTH_WORDS
