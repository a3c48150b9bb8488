"""Chip health in depth (issue 30): npu-smi's per-chip sub-commands read by structure, the MindCluster fault
levels behind each alarm code, the chip identity every chip finding carries, and what each level costs in
npu-smi calls. Real samples where they exist (tests/data/samples, each with its source); the non-OK health,
the edited ECC counters and the 910B3 board/common/-m answers are constructed (tests/data/constructed)."""

from __future__ import annotations

import contextlib
import json
import time

import pytest

from npudoctor import api
from npudoctor.api import findings_by_id
from npudoctor.cli import main
from npudoctor.logs import codes, fault_codes
from npudoctor.model import Status
from npudoctor.parsers.npu_smi import (
    NpuSmiParseError,
    parse_npu_smi_detail,
    parse_npu_smi_mapping,
)
from npudoctor.parsers.npu_smi import (
    fault_codes as smi_fault_codes,
)
from npudoctor.probes.runner import RecordingRunner
from tests.clirunner import cli_runner
from tests.demo_scenarios import ALARM_TABLE, ECC_NPU5, HEALTH_ALARM, HEALTH_WARNING, npu_smi
from tests.nodes import B3_8CARD, WARNING_TABLE
from tests.samples import sample_text, smi

CHIP_KEYS = {"npu_id", "chip_id", "logic_id", "phy_id", "bus_id"}


# -- parsing the sub-commands ------------------------------------------------------------------------------

def test_real_sub_command_outputs_parse_by_structure():
    (ecc,) = parse_npu_smi_detail(smi("t-ecc_mindcluster"))  # card block, then the chip block ending in its Chip ID
    assert (ecc.npu_id, ecc.chip_id) == (1, 0)
    assert ecc.number("hbm double bit isolated pages count") == 0 and len(ecc.fields) == 12
    (common,) = parse_npu_smi_detail(smi("t-common_910x"))  # one block: NPU ID, Chip Count, Chip ID, readings
    assert (common.npu_id, common.chip_id) == (0, 0)
    assert (common.number("aicore freq"), common.number("aicore curfreq"), common.number("temperature"),
            common.number("npu real-time power")) == (900, 900, 41, 71.7)
    (card,) = parse_npu_smi_detail(smi("t-board_card"))  # TAB-indented, no Chip ID: the whole NPU
    assert (card.npu_id, card.chip_id, card.text("firmware version")) == (0, None, "7.1.0.7.220")
    (chip,) = parse_npu_smi_detail(smi("c0_t-board"))
    assert (chip.chip_id, chip.text("chip name"), chip.text("pcie bus info")) == (0, "910A", "0000:61:00.0")
    (usages,) = parse_npu_smi_detail(smi("t-usages"))
    assert usages.number("hbm capacity") == 31129
    # `-t health -i 3 -c 0` names no chip: the command's -i/-c do
    (health,) = parse_npu_smi_detail(smi("t-health_OK"), npu_id=3, chip_id=0)
    assert (health.npu_id, health.chip_id, health.text("error code")) == (3, 0, None)  # NA reads as absent
    # a paste with its shell prompt line
    (memory,) = parse_npu_smi_detail(smi("t-memory"), npu_id=1, chip_id=0)
    assert memory.number("hbm temperature") == 46 and memory.text("hbm manufacturer id") == "0x57"


def test_a_block_without_blank_lines_still_splits_per_chip():
    text = "\n".join(["NPU ID : 0", "Chip Count : 2", "Chip ID : 0", "Aicore Freq(MHZ) : 1000",
                      "Chip ID : 1", "Aicore Freq(MHZ) : 800"])
    chips = parse_npu_smi_detail(text)
    assert [(c.npu_id, c.chip_id, c.number("aicore freq")) for c in chips] == [(0, 0, 1000), (0, 1, 800)]


@pytest.mark.parametrize("text", ["", "no colon here", smi("910B3_8card_24"),
                                  "dcmi model initialized failed, because the device is used. ret is -8020"])
def test_what_is_no_sub_command_output_is_refused(text):
    with pytest.raises(NpuSmiParseError):
        parse_npu_smi_detail(text)


def test_hostile_input_is_bounded():
    started = time.monotonic()
    distinct = "".join(f"Key{index} : {index}\n" for index in range(200_000))  # one block, no key twice
    for text in ("A" * 200_000 + ":", ("x" * 79 + " : 1\n") * 20_000, "\x00\xff" * 50_000, distinct):
        with contextlib.suppress(NpuSmiParseError):
            parse_npu_smi_detail(text)
    assert time.monotonic() - started < 10


def test_chip_logic_ids_from_npu_smi_info_m():
    ids = parse_npu_smi_mapping(smi("-m_910A"))
    assert [(i.npu_id, i.chip_id, i.logic_id) for i in ids] == [(n, 0, n) for n in range(8)]
    assert ids[0].name == "Ascend 910A"
    with_mcu = parse_npu_smi_mapping(smi("-m_910B4"))
    assert [(i.npu_id, i.chip_id, i.logic_id, i.name) for i in with_mcu[:2]] == [
        (0, 0, 0, "Ascend 910B4"), (0, 1, None, "Mcu")]
    with pytest.raises(NpuSmiParseError):
        parse_npu_smi_mapping(smi("910B3_8card_24"))


def test_fault_codes_in_an_error_code_value():
    assert smi_fault_codes("0x80e01801,0x80CB8009 80E01801") == ["80E01801", "80CB8009"]
    assert smi_fault_codes("NA") == [] and smi_fault_codes("12345") == []


# -- the knowledge: MindCluster's table, one lookup ------------------------------------------------------

def test_the_shipped_levels_are_the_device_plugins_table():
    table = json.loads(sample_text("vendor/faultCode.json_device-plugin_mind-cluster.txt"))
    listed = {}
    for key, values in table.items():
        for code in values:
            listed.setdefault(code.upper(), set()).add(key[:-len("Codes")])  # "RestartNPUCodes" -> RestartNPU
    assert set(fault_codes.known_codes()) == set(listed) and len(listed) == 350
    for code, levels in listed.items():
        info = fault_codes.fault(code)
        assert info is not None and info.source.startswith("Ascend/mind-cluster@018a2e0d")
        worst = max(levels, key=lambda level: fault_codes.fault_level_rank(level))
        assert info.level == worst, code
    assert fault_codes.fault("A2301001").level == "SeparateNPU"  # listed twice: the more severe level


def test_explain_knows_every_code_with_its_level_and_source():
    for code in fault_codes.known_codes():
        info = codes.explain(code)
        assert info is not None and info.code == code and info.family == "NPU fault" and info.source
        assert "MindCluster level" in info.meaning and info.fix
    assert codes.canonical("0x80e01801") == "80E01801" and codes.canonical("80818200") == "80818200"
    assert codes.canonical("0x80000001") != "80000001"  # not in the table: read as before


def test_explain_80E01801_on_the_command_line(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = cli_runner().invoke(main, ["explain", "80E01801"])
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert text.startswith("80E01801: HBM multi-bit ECC error (uncorrectable, UCE)")
    assert "MindCluster level RestartBusiness" in text and "restarted" in text
    assert "npu-smi set -t reset -i <npu> -c <chip>" in text and "faultCode.json" in text


# -- the checks on fake nodes -------------------------------------------------------------------------------

class Counting(RecordingRunner):
    """Every command the checks ran, in order."""

    def __init__(self, inner):
        super().__init__(inner)
        self.asked = []

    def run(self, command):
        self.asked.append(" ".join(command.argv))
        return super().run(command)


def run(node, level=1, profile=None):
    runner = Counting(node.runner())
    report = api.run_checks(runner, profile or api.load_profile(), only=("pcie", "npu-smi"), level=level)
    return report, [argv for argv in runner.asked if argv.startswith("npu-smi")]


def test_npu_smi_calls_per_level_on_an_8_chip_node(node):
    node.npu_node(8)
    npu_smi(node)
    report, calls = run(node)
    assert calls == ["npu-smi info", "npu-smi info -m"]  # level 1 on a healthy node: the table and the ids
    assert report.exit_code() == 0
    _, calls = run(node, level=2)
    assert len(calls) == 2 + 3 * 8 + 8  # and each chip's physical id: this -m prints no Chip Phy-ID column
    assert sorted({" ".join(c.split()[:4]) for c in calls[2:]}) == [
        "npu-smi info -t board", "npu-smi info -t common", "npu-smi info -t ecc", "npu-smi info -t phyid-remap"]
    # a chip not OK costs its health, its NPU's ECC report and its physical id at level 1, reused at level 2
    npu_smi(node, WARNING_TABLE)
    _, calls = run(node)
    assert calls == ["npu-smi info", "npu-smi info -m", "npu-smi info -t health -i 3 -c 0",
                     "npu-smi info -t ecc -i 3", "npu-smi info -t phyid-remap -p 3"]
    _, calls = run(node, level=2)
    assert len(calls) == 5 + (3 * 8 - 1) + (8 - 1)
    # where -m prints the physical ids (newer drivers), no phyid-remap call at all
    with_phy = "NPU ID    Chip ID    Chip Logic ID    Chip Phy-ID    Chip Name\n" + "".join(
        f"{n}         0          {n}                {n}              Ascend 910B3\n" for n in range(8))
    npu_smi(node, WARNING_TABLE, {"info -m": with_phy})
    report, calls = run(node, level=2)
    assert len(calls) == 4 + (3 * 8 - 1) and not [c for c in calls if "phyid-remap" in c]
    assert {f.evidence["chip"]["phy_id"] for f in findings_by_id(report, "SMI002")} == set(range(8))


def test_chip_in_warning_says_its_alarm_level_and_fix(node):
    node.npu_node(8)
    npu_smi(node, WARNING_TABLE, {"info -t health -i 3 -c 0": sample_text(HEALTH_WARNING)})
    report, _ = run(node)
    (warning,) = [f for f in findings_by_id(report, "SMI002") if f.status is not Status.PASS]
    assert warning.status is Status.WARN and warning.subject == "npu:3/chip:0"
    assert "80CB8009 AI Vector core bus access error -> restart the request (RestartRequest)" in warning.detail
    assert "npu-smi set -t reset -i 3 -c 0" in warning.fix
    assert warning.evidence["alarms"] == [{"code": "80CB8009", "level": "RestartRequest",
                                           "action": "restart the request",
                                           "title": "AI Vector core bus access error"}]
    assert warning.evidence["chip"] == {"npu_id": 3, "chip_id": 0, "logic_id": 3, "phy_id": 3,
                                        "bus_id": "0000:82:00.0"}  # phy id: `npu-smi info -t phyid-remap -p 3`


def test_hbm_double_bit_with_isolated_pages_near_the_limit(node, tmp_path):
    node.npu_node(8)
    npu_smi(node, ALARM_TABLE, {"info -t health -i 5 -c 0": sample_text(HEALTH_ALARM),
                                "info -t ecc -i 5": sample_text(ECC_NPU5)})
    report, _ = run(node)
    (alarm,) = [f for f in findings_by_id(report, "SMI002") if f.status is not Status.PASS]
    assert alarm.status is Status.FAIL and alarm.subject == "npu:5/chip:0"
    assert "restart the job (RestartBusiness)" in alarm.detail
    assert "HBM 52 isolated pages, near the limit of 64" in alarm.detail
    assert alarm.evidence["ecc"]["HBM"]["double_bit_aggregate"] == 3
    # at level 2 SMI005 judges the same counters; a site whose limit is 52 is told to replace the chip
    site = tmp_path / "site.yaml"
    site.write_text("name: site\nnpu_smi:\n  ecc:\n    isolated_pages_limit: 52\n", encoding="utf-8")
    report, _ = run(node, level=2, profile=api.load_profile(str(site)))
    (memory,) = [f for f in findings_by_id(report, "SMI005") if f.status is not Status.PASS]
    assert memory.status is Status.FAIL and "at the limit of 52: replace the NPU" in memory.detail
    assert "logic id 5 out of ASCEND_RT_VISIBLE_DEVICES" in memory.fix


def test_older_firmware_and_a_throttled_chip_at_level_2(node):
    node.npu_node(8)
    npu_smi(node, firmware={6: "7.1.0.11.220"}, clock={2: 800})
    report, _ = run(node, level=2)
    (firmware,) = [f for f in findings_by_id(report, "SMI006") if f.status is not Status.PASS]
    assert firmware.subject == "npu:6/chip:0" and firmware.status is Status.WARN
    assert firmware.detail == "firmware 7.1.0.11.220, older than the 7.5.0.1.129 of its 7 sibling(s)"
    (clock,) = [f for f in findings_by_id(report, "SMI008") if f.status is not Status.PASS]
    assert clock.subject == "npu:2/chip:0" and "800 of its rated 1800 MHz (44%)" in clock.detail
    assert clock.evidence["chip"]["logic_id"] == 2
    # level 1 makes none of these calls and reports none of these checks
    report, _ = run(node)
    assert not [f for f in report.findings if f.id in ("SMI005", "SMI006", "SMI008")]


def test_every_chip_finding_names_the_chip_for_a_scheduler(node):
    node.npu_node(8)
    npu_smi(node, ALARM_TABLE, {"info -t health -i 5 -c 0": sample_text(HEALTH_ALARM),
                                "info -t ecc -i 5": sample_text(ECC_NPU5)}, firmware={6: "7.1.0.11.220"},
            clock={2: 800})
    report, _ = run(node, level=2)
    chip_findings = [f for f in report.findings if f.subject.startswith("npu:")]
    assert {f.id for f in chip_findings} >= {"SMI002", "SMI006", "SMI008"}
    for finding in chip_findings:
        chip = finding.evidence["chip"]
        assert set(chip) == CHIP_KEYS, finding.id
        assert finding.subject in (f"npu:{chip['npu_id']}/chip:{chip['chip_id']}", f"npu:{chip['npu_id']}")
        assert chip["logic_id"] == chip["npu_id"] and chip["bus_id"]


def test_a_hung_sub_command_is_an_error_and_stops_the_rest(node, tmp_path):
    node.npu_node(8)
    npu_smi(node)
    table = sample_text(B3_8CARD)
    ids = sample_text("npu-smi-info-m_910B3_8card_constructed.txt")
    node.script("npu-smi", f'case "$*" in "info") cat <<"EOF"\n{table}\nEOF\n;; "info -m") cat <<"EOF"\n{ids}\nEOF\n'
                           ';; *) sleep 30;; esac\n')
    site = tmp_path / "site.yaml"
    site.write_text("name: site\ncommands:\n  npu_smi_timeout_s: 1\n", encoding="utf-8")
    started = time.monotonic()
    report, calls = run(node, level=2, profile=api.load_profile(str(site)))
    assert time.monotonic() - started < 15
    assert len(calls) == 3  # the table, the ids, and one sub-command that hung: the rest not started
    errors = [f for f in report.findings if f.status is Status.ERROR]
    assert errors and all(f.id in ("SMI005", "SMI006", "SMI008") for f in errors)
    assert any("did not finish within its time limit" in f.detail for f in errors)


def test_a_healthy_node_passes_every_chip_check_at_level_2(node):
    node.npu_node(8)
    npu_smi(node)
    report, _ = run(node, level=2)
    for check_id in ("SMI002", "SMI005", "SMI006", "SMI007", "SMI008"):
        statuses = {f.status for f in findings_by_id(report, check_id)}
        assert statuses == {Status.PASS}, check_id
    assert findings_by_id(report, "SMI006")[0].detail == "8 NPU(s) on firmware 7.5.0.1.129"


def test_a_hung_npu_smi_info_m_is_an_error_of_its_own(node, tmp_path):
    node.npu_node(8)
    table = sample_text(B3_8CARD)
    node.script("npu-smi", f'case "$*" in "info") cat <<"EOF"\n{table}\nEOF\n;; *) sleep 30;; esac\n')
    site = tmp_path / "site.yaml"
    site.write_text("name: site\ncommands:\n  npu_smi_timeout_s: 1\n", encoding="utf-8")
    report, calls = run(node, profile=api.load_profile(str(site)))
    assert calls == ["npu-smi info", "npu-smi info -m"]
    assert [f.status for f in findings_by_id(report, "SMI001")] == [Status.PASS]
    (hung,) = [f for f in findings_by_id(report, "SMI002") if f.status is Status.ERROR]
    assert hung.subject == "npu-smi" and "`npu-smi info -m`: timeout" in hung.detail
    (chip,) = {tuple(f.evidence["chip"].items()) for f in findings_by_id(report, "SMI002")
               if f.subject == "npu:0/chip:0"}
    assert dict(chip)["logic_id"] is None  # not known without -m, and said so (null)


BUSY_COMMON = "npu-smi-info_t-common_910B3_busy-1800MHz_mcu-block_github-note.txt"
IDLE_COMMON = "npu-smi-info_t-common_1650MHz_idle-curFreq-100_npu-smi-reference.txt"


def test_clock_is_judged_on_real_common_reports_only_under_load(node):
    """Real `-t common` texts: busy 910B3s at their rated 1800 MHz (with the MCU's own block after the chip's),
    and an idle chip at 100 of 1650 MHz, which is how idle chips run, not throttling."""
    node.npu_node(8)
    npu_smi(node, answers={"info -t common -i 1": sample_text(BUSY_COMMON).split("npu-smi info -t common -i 7")[0],
                           "info -t common -i 7": sample_text(BUSY_COMMON).split("npu-smi info -t common -i 7")[1],
                           "info -t common -i 0": sample_text(IDLE_COMMON)})
    report, _ = run(node, level=2)
    clock = findings_by_id(report, "SMI008")
    assert [f.status for f in clock] == [Status.PASS, Status.SKIP]
    assert clock[0].evidence["chips"] == [f"npu:{n}/chip:0" for n in range(1, 8)]
    assert clock[1].evidence["chips"] == ["npu:0/chip:0"] and "idle" in clock[1].detail
    # the same idle text from a chip under load would be throttling
    busy = sample_text(IDLE_COMMON).replace("Aicore Usage Rate(%)           : 0", "Aicore Usage Rate(%)           : 90")
    npu_smi(node, answers={"info -t common -i 0": busy})
    report, _ = run(node, level=2)
    (slow,) = [f for f in findings_by_id(report, "SMI008") if f.status is Status.WARN]
    assert slow.subject == "npu:0/chip:0" and "100 of its rated 1650 MHz (6%) while 90% busy" in slow.detail


def test_real_board_report_gives_the_firmware():
    (board,) = parse_npu_smi_detail(sample_text("npu-smi-info_t-board_910B_IT21HMDC_Bin6x_ansible-docstring.txt"))
    assert (board.npu_id, board.chip_id, board.text("firmware version"), board.text("serial number")) == (
        0, None, "7.5.0.2.220", "1000000000")


def test_inventory_per_chip_view_and_firmware_for_the_fleet(node):
    node.npu_node(8)
    npu_smi(node, WARNING_TABLE, {"info -t health -i 3 -c 0": sample_text(HEALTH_WARNING)},
            firmware={6: "7.1.0.11.220"})
    level1, _ = run(node)
    chips = level1.inventory["chips"]
    assert chips["npu_firmware"] is None  # level 1 never asks for the board reports
    row = chips["devices"][3]
    assert (row["npu"], row["logic_id"], row["health"], row["alarm"], row["firmware"]) == (
        3, 3, "Warning", "80CB8009", None)
    level2, _ = run(node, level=2)
    chips = level2.inventory["chips"]
    assert chips["npu_firmware"] == ["7.1.0.11.220", "7.5.0.1.129"]  # what fleet compares across nodes
    assert [row["firmware"] for row in chips["devices"]].count("7.1.0.11.220") == 1
    from npudoctor.report import html

    page = html.render(level2.to_dict())
    assert "<th>logic_id</th>" in page and "<td>80CB8009</td>" in page and "<td>7.1.0.11.220</td>" in page


def test_a_hung_phyid_remap_is_an_error_and_not_asked_again(node, tmp_path):
    node.npu_node(8)
    answers = {"info": sample_text(WARNING_TABLE), "info -m": sample_text("npu-smi-info-m_910B3_8card_constructed.txt"),
               "info -t health -i 3 -c 0": sample_text(HEALTH_WARNING),
               "info -t ecc -i 3": sample_text("npu-smi-info_t-ecc_mindcluster-doc.txt")}
    cases = "".join(f'"{args}") cat <<"EOF"\n{text}\nEOF\n;; ' for args, text in answers.items())
    node.script("npu-smi", f'case "$*" in {cases}*phyid-remap*) sleep 30;; *) exit 1;; esac\n')
    site = tmp_path / "site.yaml"
    site.write_text("name: site\ncommands:\n  npu_smi_timeout_s: 1\n", encoding="utf-8")
    report, calls = run(node, profile=api.load_profile(str(site)))
    assert calls[-1] == "npu-smi info -t phyid-remap -p 3" and len(calls) == 5
    (hung,) = [f for f in findings_by_id(report, "SMI002") if f.status is Status.ERROR]
    assert "`npu-smi info -t phyid-remap -p 3` did not finish within 1 s" in hung.detail
    (warning,) = [f for f in findings_by_id(report, "SMI002") if f.status is Status.WARN]
    assert warning.evidence["chip"]["phy_id"] is None and "80CB8009" in warning.detail
