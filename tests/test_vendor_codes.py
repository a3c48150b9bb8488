"""checks/vendor_codes.yaml holds every code the vendor's own definitions hold, entry by entry (read from the
excerpts in tests/data/samples/vendor, each with its source header), and `explain` knows every one of them in
every spelling a log or a user uses."""

from __future__ import annotations

import json
import time

import pytest

from npudoctor import knowledge
from npudoctor.logs import codes
from tests import vendor_codes
from tests.clirunner import cli_runner

SHIPPED = knowledge.load("vendor_codes")


def test_the_yaml_is_what_the_excerpts_define() -> None:
    """Every family, every number and name, every registry title and class: nothing added, nothing lost."""
    expected = vendor_codes.all_families()
    for family in ("acl", "runtime", "ge", "hccl", "dcmi", "driver"):
        assert {str(k): v for k, v in SHIPPED[family].items()} == expected[family], family
    assert {k: [v.partition(" > ")[0], v.partition(" > ")[2]] for k, v in SHIPPED["ts"].items()} == expected["ts"]
    torch_npu = expected["torch_npu"]
    assert SHIPPED["torch_npu"]["submodules"] == torch_npu["submodules"]  # type: ignore[index]
    assert {k: list(v) for k, v in SHIPPED["torch_npu"]["kinds"].items()} == torch_npu["kinds"]  # type: ignore[index]
    registry = {}
    for code, fields in SHIPPED["registry"].items():
        title, component, found_in = (part.strip() for part in fields.split(" | "))
        registry[code] = {"title": title, "in": [int(i) for i in found_in.split()],
                          **({"class": component} if component else {})}
    assert registry == expected["registry"]


def test_the_yaml_cites_the_sources_of_its_excerpts() -> None:
    for family, names in vendor_codes.EXCERPTS.items():
        cited = SHIPPED["sources"][family]
        assert [(s["repository"], s["commit"], s["path"]) for s in cited] == [
            tuple(vendor_codes.source(name).values()) for name in names[:len(cited)]], family


def test_the_yaml_is_written_by_the_extractor() -> None:
    """No hand edit: regenerating it from the excerpts gives the same file."""
    assert (knowledge.data_dir("knowledge") / "vendor_codes.yaml").read_text(encoding="utf-8") == \
        vendor_codes.render_yaml()


def test_the_families_are_complete() -> None:
    """The definitions as known: acl_base.h 69 codes, rt_error_codes.h 125, ge_error_codes.h 38, HcclResult 24,
    DCMI 21, the driver's drvError_t 99, the task scheduler 199, torch_npu 5 sub-modules x 15 kinds, the
    registries 532 E/W codes."""
    families = ("acl", "runtime", "ge", "hccl", "dcmi", "driver", "ts", "registry")
    sizes = {family: len(SHIPPED[family]) for family in families}
    assert sizes == {"acl": 69, "runtime": 125, "ge": 38, "hccl": 24, "dcmi": 21, "driver": 99, "ts": 199,
                     "registry": 532}
    assert len(SHIPPED["torch_npu"]["submodules"]) * len(SHIPPED["torch_npu"]["kinds"]) == 75


def _every_code() -> list:
    out = [str(k) for family in ("acl", "runtime", "ge", "dcmi", "ts", "registry") for k in SHIPPED[family]]
    out += [f"HCCL {k}" for k in SHIPPED["hccl"]]
    out += [f"DRV {k}" for k in SHIPPED["driver"]]
    out += [f"ERR{m}{k}" for m in SHIPPED["torch_npu"]["submodules"] for k in SHIPPED["torch_npu"]["kinds"]]
    return out


def test_explain_knows_every_defined_code_exactly() -> None:
    unknown = [code for code in _every_code() if not ((info := codes.explain(code)) and info.exact)]
    assert unknown == []
    missing_text = [code for code in _every_code() if not (codes.explain(code).meaning and codes.explain(code).fix)]
    assert missing_text == []  # written for the code, or its family's advice


def test_explain_titles_are_the_vendor_names() -> None:
    assert codes.explain("107010").title == "ACL_ERROR_RT_FILE_WRITE"  # once explained as a parameter error
    assert codes.explain("145000").title == "ACL_ERROR_GE_PARAM_INVALID"  # once "GE failure"
    assert codes.explain("507051").title == "ACL_ERROR_RT_SEND_MSG"
    assert codes.explain("E60001").title == "Invalid_Argument_Input_Tensor_Missing"
    assert codes.explain("ERR04012").title == "PROF permission error"
    assert codes.explain("-8020").title == "DCMI_ERR_CODE_RESOURCE_OCCUPIED"


@pytest.mark.parametrize("spelling, code", [
    ("507035", "507035"), ("0x7bc8b", "507019"), ("ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", "507035"),
    ("ez9999", "EZ9999"), ("ERR00100", "ERR00100"), ("-8005", "-8005"), ("8005", "-8005"),
    ("4294959291", "-8005"),  # -8005 printed unsigned
    ("DCMI_ERR_CODE_INNER_ERR", "-8005"), ("error code 7", "HCCL 7"), ("hccl 7", "HCCL 7"),
    ("HCCL_E_UNAVAIL", "HCCL 7"), ("0x26", "0x26"), ("0x0000000005010001", "0x05010001"),
    ("4294967295", "-1"),
])
def test_any_spelling_is_one_code(spelling: str, code: str) -> None:
    assert codes.canonical(spelling) == code
    assert codes.explain(spelling).code == code


def test_minus_one_is_not_an_error_code() -> None:
    """4294967295 is -1 printed unsigned: `explain` says so, and a log never lists it as a code."""
    info = codes.explain("4294967295")
    assert info.severity == "info" and "not" in codes.explain("-1").title + "not"
    assert codes.find_codes("ErrorNo: 4294967295(failed) ge result = 4294967295") == []


def test_a_task_scheduler_code_says_which_acl_code_it_is_reported_as() -> None:
    info = codes.explain("0x31")
    assert info.title == "TS_ERROR_VECTOR_CORE_EXCEPTION" and "507035" in info.meaning
    assert info.fix == codes.explain("507035").fix


def test_explain_says_where_the_definition_comes_from() -> None:
    assert codes.explain("507035").source.startswith("Ascend/pytorch@")
    assert "rt_error_codes.h" in codes.explain("507035").source
    assert codes.explain("EZ9999").source.startswith("hicann/runtime@")
    out = cli_runner().invoke(__import__("npudoctor.cli", fromlist=["main"]).main, ["explain", "507035"]).stdout
    assert "Defined in: Ascend/pytorch@" in out


def test_every_spelling_explains_alike_in_both_commands(monkeypatch) -> None:
    """explain -8005 / 8005 / 4294959291 and logs explain: one text, one layout, wrapped to the terminal."""
    from npudoctor.cli import main

    monkeypatch.setenv("COLUMNS", "60")
    outputs = [cli_runner().invoke(main, args) for args in (
        ["explain", "-8005"], ["explain", "8005"], ["logs", "explain", "-8005"], ["logs", "explain", "4294959291"])]
    assert all(result.exit_code == 0 for result in outputs), [r.stderr for r in outputs]
    assert len({result.stdout for result in outputs}) == 1
    assert max(len(line) for line in outputs[0].stdout.splitlines()) <= 60
    ez = [cli_runner().invoke(main, args).stdout for args in (["explain", "EZ9999"], ["logs", "explain", "ez9999"])]
    assert ez[0] == ez[1] and ez[0].startswith("EZ9999: AclNN_Inner_Error")


def test_explain_is_fast() -> None:
    """The lookup with its knowledge loaded from scratch stays far under `explain`'s 0.2 s budget: CPU time
    of this process (other processes' load does not count), the best of three cold starts."""
    took = []
    for _ in range(3):
        codes._vendor.cache_clear()
        codes._base.cache_clear()
        codes._names.cache_clear()
        knowledge.load.cache_clear()
        start = time.process_time()
        assert codes.explain("507035") is not None
        took.append(time.process_time() - start)
    assert min(took) < 0.2


FAMILY_ROWS = {"AscendCL": "acl", "runtime ACL_ERROR_RT_*": "runtime", "GE ACL_ERROR_GE_*": "ge",
               "HcclResult": "hccl", "DCMI -80xx": "dcmi", "driver drvRetCode": "driver",
               "task scheduler retCode": "ts",
               "torch_npu ERRsscc": "torch_npu", "CANN error registries E/W": "registry"}


def test_the_coverage_table_in_notes_is_current() -> None:
    """NOTES.md's coverage table: defined, known now and fixes written are recomputed here."""
    from tests.samples import DATA

    # the table in NOTES.md, and rows a notes/issue-NN.md adds until the lead folds it into NOTES.md
    repo = DATA.parents[1]
    notes = "\n".join(path.read_text(encoding="utf-8")
                      for path in [repo / "NOTES.md", *sorted((repo / "notes").glob("issue-*.md"))] if path.is_file())
    rows = {}
    for line in notes.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in FAMILY_ROWS:
            rows[FAMILY_ROWS[cells[0]]] = (int(cells[2]), int(cells[4]), int(cells[5]))
    counted = {}
    for code, fact in codes.vendor_codes().items():
        info = codes.explain(code)
        row = counted.setdefault(fact.family, [0, 0, 0])
        row[0] += 1
        row[1] += bool(info and info.exact)
        row[2] += bool(info and info.written and info.fix)
    assert rows == {family: tuple(row) for family, row in counted.items()}


# CANN's own texts on a node: the registry its toolkit installs, read through the runner.

NODE_REGISTRY = json.dumps({"error_info_list": [{
    "errClass": "AclNN Errors", "errTitle": "AclNN_Inner_Error", "ErrCode": "EZ9999", "ErrMessage": "%s",
    "Arglist": "message", "suggestion": {"Possible Cause": "N/A", "Solution": "Check the node's own advice."}}]})
TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"


def _toolkit_with_registry(node) -> None:
    node.file(f"{TOOLKIT}/aarch64-linux/conf/error_manager/error_code.json", NODE_REGISTRY)
    node.file(f"{TOOLKIT}/aarch64-linux/ascend_toolkit_install.info", "package_name=Ascend-cann-toolkit\n"
              "version=8.5.0\n")


def test_explain_prefers_the_installed_registry_and_says_so(node) -> None:
    """(constructed registry: one entry in error_code.json's layout)"""
    from npudoctor.cli import main

    _toolkit_with_registry(node)
    result = cli_runner().invoke(main, ["explain", "EZ9999", "--root", str(node.root)])
    assert result.exit_code == 0, result.stderr
    assert "Check the node's own advice." in result.stdout
    assert f"CANN 8.5.0 as installed: {TOOLKIT}/aarch64-linux/conf/error_manager/error_code.json" in \
        " ".join(result.stdout.split())
    again = cli_runner().invoke(main, ["logs", "explain", "ez9999", "--root", str(node.root)])
    assert again.stdout == result.stdout
    # a code the registry does not have keeps the shipped text and its vendor source
    other = cli_runner().invoke(main, ["explain", "507035", "--root", str(node.root)]).stdout
    assert "Defined in: Ascend/pytorch@" in other


def test_collect_records_the_registry_and_explain_reads_it_from_the_bundle(node, tmp_path) -> None:
    from npudoctor import api
    from npudoctor.cli import main

    _toolkit_with_registry(node)
    bundle = tmp_path / "node.tar.gz"
    api.collect(str(bundle), root=str(node.root), environ=node.env)
    result = cli_runner().invoke(main, ["explain", "EZ9999", "--from", str(bundle)])
    assert result.exit_code == 0 and "Check the node's own advice." in result.stdout


def test_a_broken_registry_is_ignored(node) -> None:
    from npudoctor.probes.cann_codes import parse_registry, read_installed_registry

    for text in ("", "not json", "[1, 2]", '{"error_info_list": 3}', '{"error_info_list": [1, {"ErrCode": 5}]}',
                 "[" * 100000):
        assert parse_registry(text, "x") == {}
    node.file(f"{TOOLKIT}/conf/error_manager/error_code.json", "{broken")
    assert read_installed_registry(node.runner()) is None
    assert codes.explain("EZ9999", {}).title == "AclNN_Inner_Error"


@pytest.mark.parametrize("text, found", [
    ("aclrtSynchronizeStream(stream) failed: 507035 (main.cpp:92)", ["507035"]),  # PTOAS PR 808
    ("NPU function error: AclrtSynchronizeStreamWithTimeOut(stream),error code is 107027", ["107027"]),  # pytorch #77
    ("runtime code=507046 returned", ["507046"]),
    ("aclInit error code is:100000", ["100000"]),
    ("sync failed (507035)", ["507035"]),
    ("stream sync ret=507046", ["507046"]),
    ("Other info[0]:... line=296, error code=0x26", ["0x26"]),  # LlamaFactory #3670
    ("HCCL function error: HcclAllReduce(send, recv), error code is 7", ["HCCL 7"]),
    # not codes: a record's pid, sizes and pids in brackets, AI CPU's own errcode, the device's 64-bit word
    ("[ERROR] RUNTIME(507011,python):2024-07-04-13:26:26.139.276 [a.cc:1] bad", []),
    ("bufLen: 200802, hostPid[100809] (100809)", []),
    ("task_id:1, errcode:135175, msg:aicpu execute failed", []),
    ("there is an exception of aivec error, core id is 14, error code = 0x4000000000000000", []),
    ("ErrorNo: 4294967295(failed)", []),
])
def test_codes_are_read_in_their_contexts_and_nowhere_else(text: str, found: list) -> None:
    assert codes.find_codes(text) == found


EZ9999_LINE = "[ERROR] GE(1,python):2025-01-01-00:00:00.000.001 [error_manager.cc:1]1 EZ9999: Inner Error!\n"


def test_logs_scan_and_log001_read_a_code_as_explain_does_on_the_node(node, tmp_path) -> None:
    """(constructed registry and plog line) One lookup: a code in a log reads as `explain` shows it there."""
    from npudoctor import api
    from npudoctor.checks.logs import LOGS_DIRS_OPTION
    from npudoctor.cli import main
    from npudoctor.probes.cann_codes import texts_on_node

    _toolkit_with_registry(node)
    log = tmp_path / "plog-1_20250101000000000.log"
    log.write_text(EZ9999_LINE)
    on_node = codes.explain("EZ9999", texts_on_node(str(node.root)))
    shipped = codes.explain("EZ9999")
    assert on_node.fix != shipped.fix and "Check the node's own advice." in on_node.fix

    def code_finding(*options):
        result = cli_runner().invoke(main, ["logs", "scan", str(log), "--format", "json", *options])
        assert result.exit_code == 1, result.output
        (found,) = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "error_code"]
        return found

    found = code_finding("--root", str(node.root))
    assert found["explain"] == on_node.to_dict() and found["fix"] == on_node.fix
    assert found["title"] == f"EZ9999 {on_node.title}"
    assert code_finding()["explain"] == shipped.to_dict()  # this machine has no CANN: the shipped text

    node.file("/root/ascend/log/run/plog/plog-1_20250101000000000.log", EZ9999_LINE)
    report = api.run_checks(node.runner(), only=["LOG001"], options={LOGS_DIRS_OPTION: ["/root/ascend/log"]})
    (finding,) = [f for f in report.findings if f.subject == "error_code"]
    assert f"EZ9999: {on_node.meaning}" in finding.detail and finding.fix == on_node.fix, finding
