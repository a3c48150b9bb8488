"""One rulebook (issue 18): every ID the tool reports is listed, explained, selectable, reads only settings
of the profile schema that it declares, and has a case that makes it fire and one that must not."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Dict, List, Set

import pytest
import yaml

from npudoctor import api
from npudoctor.checks import ordered_specs
from npudoctor.checks.registry import SelectionError, select
from npudoctor.cli import main
from npudoctor.logs.scanner import Scanner
from npudoctor.model.finding import Status
from npudoctor.model.profile import PROFILE_SCHEMA, NodeProfile
from tests.clirunner import cli_runner
from tests.samples import sample_path

CASES = Path(__file__).resolve().parent / "data" / "cases" / "logs"
SPECS = api.rulebook()


def test_list_checks_counts_every_id_the_tool_can_report():
    rooms = collections.Counter(spec.room for spec in SPECS)
    assert rooms["node"] == len(ordered_specs()) and rooms["prof"] >= 11 and rooms["collective"] == 3
    assert rooms["logs"] >= 36 and len(SPECS) >= 87
    assert len({spec.id.lower() for spec in SPECS}) == len(SPECS)


def test_explain_explains_every_id_in_one_run():
    result = cli_runner().invoke(main, ["explain", *(spec.id for spec in SPECS)])
    assert result.exit_code == 0, result.output
    for spec in SPECS:
        assert f"{spec.id}: " in result.stdout and "Fix" in spec.doc


def test_explain_prints_the_value_in_force_for_the_chosen_profile(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("prof:\n  communication_warn_share: 0.2\n")
    shipped = cli_runner().invoke(main, ["explain", "PROF009"]).stdout
    chosen = cli_runner().invoke(main, ["explain", "PROF009", "--profile", str(site)]).stdout
    assert "prof.communication_warn_share = 0.3" in shipped
    assert "prof.communication_warn_share = 0.2" in chosen and "(profile site)" in chosen
    pcie = cli_runner().invoke(main, ["explain", "PCI003"]).stdout
    assert "pcie.link_width_downgrade = warn" in pcie


@pytest.mark.parametrize("option", ["only", "skip"])
def test_only_and_skip_accept_every_id_check_reports_and_refuse_the_others_alike(option):
    """Issue 17 point 2: every ID `check` reports is accepted by --only and by --skip; an unknown one, and
    one that only another command reports, is refused the same way by both."""
    for spec in SPECS:
        if spec.room in ("node", "prof"):
            select(SPECS, **{"only" if option == "only" else "skip_ids": (spec.id,)}, level=1, prof_given=True)
            continue
        with pytest.raises(SelectionError, match=r"not by `check`|is a log rule"):
            select(SPECS, **{"only" if option == "only" else "skip_ids": (spec.id,)}, prof_given=True)
    with pytest.raises(SelectionError, match="NOSUCH matches no check"):
        select(SPECS, **{"only" if option == "only" else "skip_ids": ("NOSUCH",)})


@pytest.mark.parametrize("args, message", [
    (["--only", "LIB005", "--level", "1"], "LIB005 runs at --level 2: add --level 2"),
    (["--only", "workload", "--level", "2"], "TRN001 runs at --level 3: add --level 3"),
    (["--only", "PROF001"], "--only PROF001: PROF001 reads profiler output: add --prof DIR"),
    (["--only", "COL001"], "COL001 is measured by `npudoctor collective`"),
    (["--skip", "hccl-socket-timeout"], "hccl-socket-timeout is a log rule: `npudoctor logs scan DIR` reports it"),
    (["--skip", "NOSUCH"], "--skip NOSUCH matches no check; see `npudoctor list-checks`"),
    (["--only", "PCI001", "--skip", "PCI001"], "--only PCI001 --skip PCI001 leaves no check to run"),
])
def test_a_selection_that_needs_more_is_refused_with_the_one_thing_to_add(node, args, message):
    result = cli_runner().invoke(main, ["check", "--root", str(node.root), *args])
    assert result.exit_code == 2
    assert result.stderr.startswith("npudoctor: error: ")
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_an_exact_id_beyond_the_level_runs_at_the_level_it_needs(node):
    report = api.run_checks(node.runner(), only=("LIB005",))
    assert [f.id for f in report.findings] == ["LIB005"]


# -- settings: one home (schema + shipped profile), declared on the check --------------------------------
# Keys no check reads: the profile's own metadata and the `prof run` command's limits.
NOT_A_CHECK_SETTING = {
    "name": "the profile's name in reports", "description": "for people", "extends": "the profile loader",
    "prof.run_timeout_s": "npudoctor prof run", "prof.export_timeout_s": "npudoctor prof run",
}


def test_every_schema_key_is_claimed_by_a_check_and_every_claim_is_a_schema_key():
    claimed = {key for spec in SPECS for key in spec.settings}
    assert set(PROFILE_SCHEMA) - set(NOT_A_CHECK_SETTING) == claimed
    assert claimed <= set(PROFILE_SCHEMA)


def _schema_key(read: str) -> bool:
    """A key read is in the schema, or names a section of it (``train``, ``inventory``)."""
    return read in PROFILE_SCHEMA or any(key.startswith(read + ".") for key in PROFILE_SCHEMA)


def _requirements(check_id: str) -> Set[str]:
    from npudoctor.checks.registry import ASCEND_NODE_CHECKS, REGISTRY

    spec = REGISTRY[check_id]
    found = set(spec.requires) | (set(ASCEND_NODE_CHECKS) if spec.needs_npu else set())
    for required in list(found):
        found |= _requirements(required) if required != check_id else set()
    return found


def test_a_node_check_reads_only_the_settings_it_declares(node, monkeypatch):
    """Each node check alone (level 2, on a node where the severities and limits matter) reads the profile
    keys it and its requirements declare, and nothing outside the schema."""
    from npudoctor import api as api_module
    from npudoctor.checks import registry
    from tests.nodes import healthy_910b_node
    from tests.samples import sample_text

    read: Dict[str, Set[str]] = collections.defaultdict(set)
    current: List[str] = []
    original_get, original_run = NodeProfile.get, registry.run_check

    def spy(self, dotted, default=None):
        if current:
            read[current[-1]].add(dotted)
        return original_get(self, dotted, default)

    def running(spec, ctx):
        current.append(spec.id)
        try:
            return original_run(spec, ctx)
        finally:
            current.pop()

    monkeypatch.setattr(NodeProfile, "get", spy)
    monkeypatch.setattr(api_module, "run_check", running)
    healthy_910b_node(node)
    node.interfaces = {"lo": ["127.0.0.1"], "enp189s0f0": ["192.0.2.10"]}
    node.file("/sys/bus/pci/devices/0000:c1:00.0/current_link_width", "8\n")
    node.command("npu-smi", stdout=sample_text("npu-smi-info_910B3_8card_NPU3-Warning_misaligned_constructed.txt"))
    node.command("hccn_tool", stdout=sample_text("hccn_tool_ip-g_empty.txt"))
    node.file("/root/ascend/log/debug/plog/plog-1_20250101000000000.log", "[INFO] fine\n")
    profile = api.load_profile("atlas800t-a2-8x910b")
    problems = []
    for spec in ordered_specs():
        if spec.level > 2:
            continue
        api.run_checks(node.runner(), profile, only=(spec.id,), level=2, options={"logs_dirs": ("/root/ascend/log",)})
        allowed = set(spec.settings).union(*(registry.REGISTRY[r].settings for r in _requirements(spec.id)))
        problems += [f"{spec.id} reads {key}" for key in sorted(read[spec.id])
                     if not _schema_key(key) or (key not in allowed and key != "inventory")]
    assert problems == []


def test_a_prof_check_reads_only_the_settings_it_declares(tmp_path, monkeypatch):
    from npudoctor.model import rulebook
    from npudoctor.prof import checks as prof_checks
    from npudoctor.prof.engine import analyze
    from tests import profdirs

    profdirs.torch_npu_rank(tmp_path, rank=0)
    read: Dict[str, Set[str]] = collections.defaultdict(set)
    current: List[str] = []
    original = prof_checks.ProfContext.get

    def spy(self, key, default):
        if current:
            read[current[-1]].add("prof." + key)
        return original(self, key, default)

    monkeypatch.setattr(prof_checks.ProfContext, "get", spy)
    for spec in rulebook.specs("prof"):
        func = spec.func

        def wrapped(ctx, func=func, check_id=spec.id):
            current.append(check_id)
            try:
                return list(func(ctx))
            finally:
                current.pop()

        monkeypatch.setitem(rulebook.REGISTRY, spec.id, rulebook.Spec(**{**spec.__dict__, "func": wrapped}))
    analyze([str(tmp_path)], api.load_profile())
    problems = [f"{check_id} reads {key}" for check_id, keys in read.items() for key in sorted(keys)
                if not _schema_key(key)
                or not any(s == key or s.startswith(key + ".") for s in rulebook.REGISTRY[check_id].settings)]
    assert read and problems == []


# -- a case that fires and one that must not, per ID ------------------------------------------------------
LOG_RULES = [spec.id for spec in SPECS if spec.room == "logs"]


def test_every_log_rule_has_a_case_file_and_every_case_file_a_rule():
    assert sorted(path.stem for path in CASES.glob("*.yml")) == sorted(LOG_RULES)


def _rule_hits(line: str) -> list:
    scanner = Scanner()
    scanner.scan_bytes("case.log", line.encode("utf-8") + b"\n")
    return scanner.result().findings


@pytest.mark.parametrize("rule_id", LOG_RULES)
def test_log_rule_fires_on_its_real_lines_and_not_on_its_near_miss(rule_id):
    case = yaml.safe_load((CASES / f"{rule_id}.yml").read_text(encoding="utf-8"))
    assert case["rule"] == rule_id and case["match"] and case["no_match"]
    for entry in [*case["match"], *case["no_match"]]:
        # The line is quoted from its sample (real, with a source header; or constructed, and marked so).
        lines = sample_path(entry["sample"]).read_text(encoding="utf-8", errors="replace").split("\n# ---\n", 1)[-1]
        assert lines.splitlines()[entry["line"] - 1] == entry["text"], entry
        assert entry.get("constructed", False) == entry["sample"].split(".")[0].endswith("_constructed")
    for entry in case["match"]:
        subjects = [f.subject for f in _rule_hits(entry["text"]) if f.rule == rule_id]
        assert subjects == [entry["subject"]], entry["text"]
    for entry in case["no_match"]:
        assert not [f for f in _rule_hits(entry["text"]) if f.rule == rule_id], entry["text"]


def _collective_document(wrong: bool, slow: bool, bandwidth_gbps: float):
    from npudoctor.fleet import collective as probe

    times = [20000.0] * 7 + [45000.0 if slow else 20100.0]
    correct = [True] * 6 + [not wrong, True]
    rows = [probe.row("all_reduce", 1024 ** 3, 8, times, correct, 5)]
    rows[0]["busbw_gbps"] = bandwidth_gbps
    return {"schema": probe.SCHEMA, "backend": "hccl", "world_size": 8, "hosts": ["node0"] * 8, "results": rows}


COLLECTIVE_CASES = {  # ID: (firing document, quiet document)
    "COL001": (_collective_document(True, False, 150), _collective_document(False, False, 150)),
    "COL002": (_collective_document(False, False, 50), _collective_document(False, False, 150)),
    "COL003": (_collective_document(False, True, 150), _collective_document(False, False, 150)),
}


@pytest.mark.parametrize("check_id", [spec.id for spec in SPECS if spec.room == "collective"])
def test_collective_check_fires_on_its_case_and_not_on_its_quiet_one(check_id):
    from npudoctor.fleet import collective as probe
    from npudoctor.model.profile import deep_merge

    base = api.load_profile()
    profile = NodeProfile("case", deep_merge(base.data, {"fleet": {"collective": {"busbw_gbps": {"all_reduce": 150}}}}))
    firing, quiet = COLLECTIVE_CASES[check_id]
    fired = [f.status for f in probe.findings(firing, profile) if f.id == check_id]
    calm = [f.status for f in probe.findings(quiet, profile) if f.id == check_id]
    assert {Status.WARN, Status.FAIL} & set(fired), fired
    assert calm and all(status is Status.PASS for status in calm), calm


def _rank(root: Path) -> None:
    from tests import profdirs

    profdirs.torch_npu_rank(root, rank=0)


def _pipe(kernel: str):
    def build(root: Path) -> None:
        from tests import profdirs

        profdirs.torch_npu_rank(root, rank=3, kernel=kernel, extras=False)
    return build


def _sample_based(table: str):
    def build(root: Path) -> None:
        from tests import profdirs

        prof = profdirs.msprof_collection(root)
        profdirs.put(prof / "mindstudio_profiler_output", {f"ai_core_utilization_{profdirs.TS}.csv": table})
    return build


PIPE = _pipe("prof_kernel_details_pipeutil_matmul_bf16.csv")
STATIC = _pipe("prof_kernel_details_pipeutil_static_constructed.csv")
ALL_LINKS = ("SDMA", "RDMA", "HCCS", "PCIE", "SIO")
# ID: ((profile data, prof.* settings) that make it fire, (data, settings) where it must not). Mostly the same
# real data on both sides: the threshold in force decides, as a site profile would.
PROF_CASES = {
    "PROF001": ((_rank, {}), (_rank, {"aicpu_fail_share": 1.0, "min_task_us": 1e8})),
    "PROF002": ((PIPE, {"no_bound_warn_share": 0}), (PIPE, {"no_bound_warn_share": 1})),
    "PROF003": ((PIPE, {"cube_utilization_min_pct": 100}), (PIPE, {"cube_utilization_min_pct": 0})),
    "PROF004": ((_rank, {}), (_rank, {"block_dim_warn_share": 1})),
    "PROF005": ((_sample_based("prof_ai_core_utilization_pipeutil_constructed.csv"), {}),
                (_sample_based("prof_ai_core_utilization_balanced_constructed.csv"), {})),
    "PROF006": ((_rank, {}), (_rank, {"free_warn_share": 1, "free_fail_share": 1})),
    "PROF008": ((PIPE, {}), (STATIC, {})),
    "PROF009": ((_rank, {}), (_rank, {"communication_warn_share": 1})),
    "PROF010": ((_rank, {"link_min_bandwidth_gbps": {link: 1e6 for link in ALL_LINKS}}), (_rank, {})),
    "PROF011": ((_rank, {}), (_rank, {"memory_unused_warn_share": 1})),
}
# IDs that inform and never judge (they always PASS when they apply), and why.
INFORMATION_ONLY = {"PROF007": "lists the operators taking the most time; the other PROF checks judge"}


def _prof_statuses(tmp_path: Path, case, check_id: str) -> List[Status]:
    from npudoctor.model.profile import deep_merge
    from npudoctor.prof.engine import analyze

    build, settings = case
    root = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
    build(root)
    profile = NodeProfile("case", deep_merge(api.load_profile().data, {"prof": settings}))
    return [f.status for f in analyze([str(root)], profile).findings if f.id == check_id]


@pytest.mark.parametrize("check_id", [spec.id for spec in SPECS if spec.room == "prof"])
def test_prof_check_fires_on_its_case_and_not_on_its_quiet_one(tmp_path, check_id):
    if check_id in INFORMATION_ONLY:
        assert check_id not in PROF_CASES
        assert set(_prof_statuses(tmp_path, (PIPE, {}), check_id)) == {Status.PASS}
        return
    firing, quiet = PROF_CASES[check_id]
    fired = _prof_statuses(tmp_path, firing, check_id)
    calm = _prof_statuses(tmp_path, quiet, check_id)
    assert {Status.WARN, Status.FAIL} & set(fired), fired
    assert calm and set(calm) == {Status.PASS}, calm
