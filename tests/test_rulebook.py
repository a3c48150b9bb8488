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


def test_every_setting_a_check_reads_has_its_value_in_the_shipped_profile():
    """Code writes no default of its own (issue 18 point 2): what a check reads when the profile leaves a key
    out is ``profiles/default.yaml``'s, so each claimed key must be there (null where "not judged")."""
    from npudoctor.knowledge import shipped_defaults

    claimed = {key for spec in SPECS for key in spec.settings}
    assert claimed - set(shipped_defaults()) == set()


def test_a_prof_check_given_a_bare_profile_reads_the_shipped_values(tmp_path):
    """A profile built in code without a ``prof`` section judges by the shipped thresholds, not by none."""
    from npudoctor.prof.engine import analyze
    from tests import profdirs

    profdirs.torch_npu_rank(tmp_path, rank=0)
    bare = analyze([str(tmp_path)], NodeProfile("bare"))
    shipped = analyze([str(tmp_path)], api.load_profile())
    assert [(f.id, f.status, f.detail) for f in bare.findings] == [(f.id, f.status, f.detail) for f in shipped.findings]
    assert not [f for f in bare.findings if f.status == Status.ERROR]


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
    monkeypatch.setattr(registry, "run_check", running)  # api.run_checks looks it up when it runs
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
    original = prof_checks.ProfContext.setting

    def spy(self, key):
        if current:
            read[current[-1]].add(key)
        return original(self, key)

    monkeypatch.setattr(prof_checks.ProfContext, "setting", spy)
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


def _families(kind: str):
    """The host-timeline and cluster families' cases (tests/test_prof_families.py builds the same data)."""
    def build(root: Path) -> None:
        import json as _json

        from tests import profdirs
        from tests.samples import sample_data
        from tests.test_prof_families import TS0, db_rank, host_event, trace_rank

        if kind == "dataloader":
            trace_rank(root, [host_event("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", TS0,
                                         35_400.0)])
        elif kind == "compile":
            trace_rank(root, [host_event("AscendCL@aclopCompileAndExecute", TS0 + i * 5000, 3100.0, "cpu_op")
                              for i in range(24)])
        elif kind == "cluster":
            profdirs.cluster_output(root)
        elif kind == "environment":
            pt = profdirs.torch_npu_rank(root, rank=0)
            metadata = _json.loads((pt / "profiler_metadata.json").read_text())
            metadata["ENV_VARIABLES"]["ASCEND_LAUNCH_BLOCKING"] = "1"
            (pt / "profiler_metadata.json").write_text(_json.dumps(metadata))
        elif kind == "retransmission":
            data = _json.loads(sample_data("prof_communication_json_torch_npu.json"))
            op = data["step2"]["p2p"]["hcom_send__822_0@13337953553061386822"]
            op["Communication Bandwidth Info"]["RDMA"]["Transit Time(ms)"] = 4213.5
            op["Communication Time Info"]["Elapse Time(ms)"] = 4215.0
            pt = profdirs.torch_npu_rank(root, rank=0)
            (pt / "ASCEND_PROFILER_OUTPUT" / "communication.json").write_text(_json.dumps(data))
        else:
            host = {"gc": {"gc": [4200.0]}, "syncbn": {"syncbn": 48}, "launch": {"launch_sync": "LS" * 40},
                    "freq": {"freq": [(TS0, 1000), (TS0 + 10_000, 800), (TS0 + 20_000, 800), (TS0 + 30_000, 1000),
                                      (TS0 + 40_000, 1000)]}}[kind]
            db_rank(root, host)
    return build


PROF_CASES.update({
    "PROF012": ((_families("dataloader"), {}), (_families("dataloader"), {"dataloader_warn_us": 1e9})),
    "PROF013": ((_families("gc"), {}), (_families("gc"), {"gc_warn_us": 1e9})),
    "PROF014": ((_families("syncbn"), {}), (_families("syncbn"), {"syncbn_max_calls": 1000})),
    "PROF015": ((_families("launch"), {}), (_families("launch"), {"sync_after_launch_warn_share": 1})),
    "PROF016": ((_families("freq"), {}), (_families("freq"), {"aicore_freq_drop_warn_share": 1})),
    "PROF017": ((_families("cluster"), {}), (_families("cluster"), {"small_transfer_warn_share": 1})),
    "PROF018": ((_families("cluster"), {}), (_families("cluster"), {"rank_gap_warn_share": 10})),
    "PROF019": ((_families("environment"), {}), (_rank, {})),
    "PROF020": ((_families("compile"), {}), (_families("compile"), {"host_compile_warn_calls": 1000})),
    "PROF021": ((_families("retransmission"), {}), (_families("retransmission"), {"rdma_retransmission_ms": 1e9})),
})


def _msprof(root: Path) -> None:
    from tests import profdirs

    profdirs.msprof_collection(root)


# PROF022-PROF025 on the real PipeUtilization tables (torch_npu kernel_details, msprof op_summary).
PROF_CASES.update({
    "PROF022": ((PIPE, {}), (PIPE, {"cube_mac_ratio": 0.7, "cube_inner_axis": 1})),
    "PROF023": ((PIPE, {}), (PIPE, {"fa_mte2_ratio": 0.4, "fa_axis": 1})),
    "PROF024": ((_msprof, {}), (PIPE, {})),
    "PROF025": ((_msprof, {}), (_msprof, {"fusible_min_repeats": 100})),
})


def _schedule(kind: str):
    """The timeline and communication families' cases (tests/test_prof_schedule.py builds the same data)."""
    def build(root: Path) -> None:
        from tests import profdirs
        from tests import test_prof_schedule as schedule

        builders = {"silent_idle": schedule.silent_span_trace,
                    "real_trace": lambda r: schedule.trace_with(r, schedule.real_trace()),
                    "rms_norm": lambda r: schedule.with_ops(r, schedule.sequence("pow", "mean", "rsqrt", "mul")),
                    "stack_trace": lambda r: schedule.trace_with(r, schedule.stack_trace()),
                    "legacy": lambda r: profdirs.msprof_legacy(r),
                    "cluster": lambda r: profdirs.cluster_output(r),
                    "stages": lambda r: schedule.cluster_with_stages(r),
                    "uneven_stages": lambda r: schedule.cluster_with_stages(r, 1.3),
                    "slow_beside_matmul": lambda r: schedule.legacy_with_matmuls(
                        r, lambda t: t["args"]["bandwidth(GB/s)"] < 14.5)}
        builders[kind](root)
    return build


PROF_CASES.update({
    "PROF030": ((_schedule("silent_idle"), {}), (_schedule("real_trace"), {})),
    "PROF031": ((_schedule("rms_norm"), {}), (_schedule("stack_trace"), {})),
    "PROF032": ((_schedule("slow_beside_matmul"), {}), (_schedule("legacy"), {})),
    "PROF033": ((_schedule("legacy"), {}), (_schedule("legacy"), {"unaligned_warn_share": 0.5})),
    "PROF034": ((_schedule("cluster"), {"link_min_size_mb": 0, "link_gap_warn_share": 0.005}),
                (_schedule("cluster"), {"link_min_size_mb": 0})),
    "PROF035": ((_schedule("uneven_stages"), {}), (_schedule("stages"), {})),
})
# IDs that inform and never judge (they always PASS when they apply), and why.
INFORMATION_ONLY = {"PROF007": "lists the operators taking the most time; the other PROF checks judge"}
# IDs that cannot judge yet (they always SKIP, saying why), and why.
SKIP_ONLY = {"PROF026": "no real GE graph dump (ge_proto_*_Build.txt) was available to build its reader on"}


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
    if check_id in SKIP_ONLY:
        assert check_id not in PROF_CASES
        assert set(_prof_statuses(tmp_path, (PIPE, {}), check_id)) == {Status.SKIP}
        return
    firing, quiet = PROF_CASES[check_id]
    fired = _prof_statuses(tmp_path, firing, check_id)
    calm = _prof_statuses(tmp_path, quiet, check_id)
    assert {Status.WARN, Status.FAIL} & set(fired), fired
    assert calm and set(calm) == {Status.PASS}, calm


# -- node checks -------------------------------------------------------------------------------------------
def _healthy(node) -> dict:
    from tests.nodes import healthy_910b_node

    healthy_910b_node(node)
    return {}


def _then(*steps):
    """A case: the healthy 8x910B3 node, then each step (a function of the node giving run arguments)."""
    def build(node) -> dict:
        arguments = _healthy(node)
        for step in steps:
            given = step(node)
            arguments.update(given if isinstance(given, dict) else {})
        return arguments
    return build


def _sample(name: str) -> str:
    from tests.samples import sample_text

    return sample_text(name)


def _unlink(*paths: str):
    return lambda node: [node.path(path).unlink() for path in paths] and {}


def _env(**variables: str):
    return lambda node: node.setenv(**variables)


def _unset(*names: str):
    return lambda node: [node.env.pop(name, None) for name in names] and {}


def _python(version: str = "3.10.14", **packages: str):
    from tests.nodes import target_python

    return lambda node: target_python(node, version, **packages)


def _profile(**sections):
    return lambda node: {"profile": sections}


def _hccn(answers=None):
    """The blog's 910B node as far as its real hccn.conf shows it (NPUs 0 and 7), hccn_tool answering."""
    def build(node) -> dict:
        from tests.test_hccl_checks import HOST, npu_node

        node.pci_device("0000:c1:00.0")
        npu_node(node, answers)
        node.interfaces = {name: list(addresses) for name, addresses in HOST.items()}
        return {}
    return build


def _whitelist(*extra_addresses: str):
    def step(node):
        from tests.test_hccl_checks import HOST

        node.file("/etc/hccl/whitelist.json", _sample("hccl_whitelist_2hosts.json.txt"))
        node.setenv(HCCL_WHITELIST_DISABLE="0", HCCL_WHITELIST_FILE="/etc/hccl/whitelist.json")
        node.interfaces = {**{name: list(addresses) for name, addresses in HOST.items()},
                           **({"eth0": list(extra_addresses)} if extra_addresses else {})}
    return step


def _interfaces(node):
    from tests.test_hccl_checks import HOST

    node.interfaces = {name: list(addresses) for name, addresses in HOST.items()}


def _plog(text: str):
    def step(node):
        node.file("/root/ascend/log/debug/plog/plog-1_20250101000000000.log", text)
        return {"options": {"logs_dirs": ("/root/ascend/log",)}}
    return step


def _cpu_box(node) -> dict:
    node.pci_device("0000:00:01.0", vendor_id="8086", device_id="1234", class_code="0x060000", driver=None)
    return {}


# IDs whose only verdict besides PASS is a SKIP with its fix (what they find blocks the checks after them).
FIRES_AS_SKIP = {"HCCL006": "no hccn_tool: the RoCE port checks cannot run, and the fix says how to get it"}
NODE_CASES = {  # ID: (a case that makes it fire, a case where it must not)
    "PCI001": (_cpu_box, _healthy),
    "PCI002": (_then(_unlink("/sys/bus/pci/devices/0000:41:00.0/driver")), _healthy),
    "PCI003": (_then(lambda node: node.file("/sys/bus/pci/devices/0000:41:00.0/current_link_width", "8\n")),
               _healthy),
    "PCI004": (_then(_unlink("/dev/hisi_hdc")), _healthy),
    "PCI005": (_then(lambda node: node.file("/sys/bus/pci/devices/0000:41:00.0/aer_dev_fatal",
                                            _sample("sysfs_aer_dev_fatal_CmpltTO_constructed.txt"))), _healthy),
    "SMI001": (_then(lambda node: node.command("npu-smi", stdout=_sample("npu-smi_fail_dcmi-8005_constructed.txt"),
                                                rc=255)), _healthy),
    "SMI002": (_then(lambda node: node.command("npu-smi", stdout=_sample(
        "npu-smi-info_910B3_8card_NPU3-Warning_misaligned_constructed.txt"))), _healthy),
    "SMI003": (_then(_profile(node={"npu_count": 16})), _healthy),
    "SMI007": (_then(_profile(npu_smi={"temperature_warn_c": 30})), _healthy),  # the table's chips: 32-39 C
    "VER001": (_then(_unlink("/usr/local/Ascend/driver/version.info")), _healthy),
    "VER003": (_then(_python(torch="2.2.0", torch_npu="2.1.0.post10")), _healthy),
    "VER005": (_then(_python("3.12.3", torch="2.1.0+cpu", torch_npu="2.1.0.post10")), _healthy),
    "VER006": (_then(_python(torch="2.8.0+cpu", torch_npu="2.8.0")), _healthy),
    "LIB001": (_then(_unset("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "LD_LIBRARY_PATH")),
               _healthy),
    "HCCL001": (_then(_env(HCCL_WHITELIST_DISABLE="2")), _then(_interfaces)),
    "HCCL002": (_then(_env(HCCL_WHITELIST_DISABLE="0")), _then(_whitelist("192.0.2.11"))),
    "HCCL003": (_then(_interfaces, _env(HCCL_IF_IP="198.51.100.7")),
                _then(_interfaces, _env(HCCL_IF_IP="127.10.0.2"))),
    "HCCL004": (_then(_interfaces, _env(HCCL_SOCKET_IFNAME="nosuch0")),
                _then(_interfaces, _env(HCCL_SOCKET_IFNAME="enp"))),
    "HCCL005": (_then(_interfaces, _env(HCCL_CONNECT_TIMEOUT="5")), _then(_interfaces)),
    "HCCL006": (_then(_interfaces), _hccn()),
    "HCCL010": (_hccn({"-i 7 -link -g": _sample("hccn_tool_link-g_DOWN.txt")}), _hccn()),
    "HCCL011": (_hccn({"-i 0 -net_health -g": _sample("hccn_tool_net_health-g_SocketFailed_mindcluster-fixture.txt")}),
                _hccn()),
    "HCCL012": (_hccn({"-i 7 -ip -g": _sample("hccn_tool_ip-g_empty.txt")}), _hccn()),
    "HCCL013": (_hccn({"-i 0 -ip -g": _sample("hccn_tool_ip-g_dev3_910B_arthurchiao-blog.txt")}), _hccn()),
    "LOG001": (_then(_plog(_sample("plog_runtime_ffts_vector_core_exception_3lines.log"))),
               _then(_plog(_sample("plog_run_info_ge_tdt_2024.log")))),
    "SITE001": (_then(_profile(inventory={"driver": "23.0.7", "chips": {"count": 8}})),
                _then(_profile(inventory={"driver": "24.1.0.3", "chips": {"count": 8}}))),
}
# Cases that need what only their stage's tests build (compiled ELF libraries, CANN installs in several
# layouts): the test where the ID fires and the one where it must not, by name; the walk below checks that
# both exist and name the ID.
ELSEWHERE = {
    "SMI005": ("test_npu_smi_health.py::test_hbm_double_bit_with_isolated_pages_near_the_limit",
               "test_npu_smi_health.py::test_a_healthy_node_passes_every_chip_check_at_level_2"),
    "SMI006": ("test_npu_smi_health.py::test_older_firmware_and_a_throttled_chip_at_level_2",
               "test_npu_smi_health.py::test_a_healthy_node_passes_every_chip_check_at_level_2"),
    "SMI008": ("test_npu_smi_health.py::test_older_firmware_and_a_throttled_chip_at_level_2",
               "test_npu_smi_health.py::test_a_healthy_node_passes_every_chip_check_at_level_2"),
    "SMI004": ("test_npu_smi_checks.py::test_processes_holding_npus_warn_with_pid_name_memory",
               "test_npu_smi_checks.py::test_healthy_8x910b_passes_the_whole_stage"),
    "VER002": ("test_versions_checks.py::test_driver_without_cann_fails_with_recommended_cann",
               "test_versions_checks.py::test_healthy_node_cann_800_from_version_cfg"),
    "VER004": ("test_versions_checks.py::test_newer_cann_severity_comes_from_the_profile",
               "test_versions_checks.py::test_healthy_node_cann_800_from_version_cfg"),
    "VER007": ("test_profiles.py::test_driver_cann_mismatch_severity",
               "test_versions_checks.py::test_nnae_only_cann_too_old_for_torch_npu"),
    "LIB002": ("test_libs_checks.py::test_set_env_not_sourced_is_diagnosed_and_fix_checked",
               "test_libs_checks.py::test_all_resolves_when_set_env_sourced"),
    "LIB003": ("test_libs_checks.py::test_torch_and_torch_npu_builds_do_not_match",
               "test_libs_checks.py::test_all_resolves_when_set_env_sourced"),
    "LIB004": ("test_libs_checks.py::test_older_cann_earlier_on_ld_library_path",
               "test_libs_checks.py::test_all_resolves_when_set_env_sourced"),
    "LIB005": ("test_libs_checks.py::test_level2_maps_real_error_texts",
               "test_libs_checks.py::test_level2_passes_when_the_op_runs"),
}
PASSING_RUN = {  # what the training child reports when the step ran well (npudoctor.trainresult/1)
    "device": "cpu", "train": {"losses": [3.1, 1.2], "loss_fell": True, "steps": 30, "overflows": [],
                               "verdict": {"leak": False, "summary": "no leak"}, "data_wait_fraction": 0.05},
    "ops": [{"op": "matmul", "ok": True, "error": 1e-6, "tolerance": 1e-3}],
    "compare_cpu": {"ok": True, "reference": "cpu", "loss_rel_diff": 1e-6, "grad_norm_rel_diff": 1e-6,
                    "loss_tolerance": 1e-3, "grad_tolerance": 1e-3, "worst_param": "w"},
}


def _run_with(**changes):
    import copy

    document = copy.deepcopy(PASSING_RUN)
    for dotted, value in changes.items():
        node = document
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    return document


TRAINING_CASES = {  # ID: (the child's result that makes it fire, one where it must not)
    "TRN001": ({"error": "RuntimeError: EZ9999", "stage": "train", "device": "npu:0"}, PASSING_RUN),
    "TRN002": (_run_with(train__loss_fell=False), PASSING_RUN),
    "TRN003": (_run_with(train__verdict={"leak": True, "kind": "device", "summary": "device memory leak"}),
               PASSING_RUN),
    "TRN004": (_run_with(ops=[{"op": "matmul", "ok": False, "error": 0.5, "tolerance": 1e-3}]), PASSING_RUN),
    "TRN005": (_run_with(train__data_wait_fraction=0.9), PASSING_RUN),
    "TRN006": (_run_with(train__cpu_fallbacks=[{"op": "aten::isin.Tensor_Tensor_out", "first_step": 3, "count": 1}]),
               _run_with(train__cpu_fallbacks=[])),
}


def _node_statuses(node, case, spec) -> List[Status]:
    arguments = case(node)
    profile = api.load_profile()
    if arguments.get("profile"):
        from npudoctor.model.profile import deep_merge

        profile = NodeProfile("case", deep_merge(profile.data, arguments["profile"]))
    report = api.run_checks(node.runner(), profile, only=(spec.id,), level=max(spec.level, 1),
                            options=arguments.get("options"))
    return [f.status for f in report.findings if f.id == spec.id]


def _training_statuses(spec, document) -> List[Status]:
    from npudoctor.probes.workload import TrainTrial

    class Given:
        profile = api.load_profile()

        def facts(self, name):
            return TrainTrial("/usr/bin/python3", True, 0, "train", document, "", None, 300.0)

    return [outcome.status for outcome in spec.func(Given())]


def _named_test(reference: str, check_id: str) -> bool:
    import ast

    file_name, test_name = reference.split("::")
    source = (Path(__file__).resolve().parent / file_name).read_text(encoding="utf-8")
    for item in ast.walk(ast.parse(source)):
        if isinstance(item, ast.FunctionDef) and item.name == test_name:
            return check_id in (ast.get_source_segment(source, item) or "")
    return False


def test_every_id_has_its_cases():
    ids = {spec.id for spec in SPECS}
    covered = {*NODE_CASES, *ELSEWHERE, *TRAINING_CASES, *PROF_CASES, *INFORMATION_ONLY, *SKIP_ONLY,
               *COLLECTIVE_CASES,
               *LOG_RULES}
    assert ids - covered == set() and covered - ids == set()


@pytest.mark.parametrize("check_id", sorted(ELSEWHERE))
def test_cases_kept_in_their_stage_tests_exist_and_name_the_id(check_id):
    assert all(_named_test(reference, check_id) for reference in ELSEWHERE[check_id]), ELSEWHERE[check_id]


@pytest.mark.parametrize("check_id", sorted(NODE_CASES))
def test_node_check_fires_on_its_case_and_not_on_its_quiet_one(tmp_path, check_id):
    from npudoctor.checks.registry import REGISTRY
    from tests.fakenode import FakeNode

    firing, quiet = NODE_CASES[check_id]
    fired = _node_statuses(FakeNode(tmp_path / "firing"), firing, REGISTRY[check_id])
    calm = _node_statuses(FakeNode(tmp_path / "quiet"), quiet, REGISTRY[check_id])
    firing_statuses = {Status.WARN, Status.FAIL, *([Status.SKIP] if check_id in FIRES_AS_SKIP else [])}
    assert firing_statuses & set(fired), fired
    assert calm and set(calm) == {Status.PASS}, calm


@pytest.mark.parametrize("check_id", sorted(TRAINING_CASES))
def test_training_check_fires_on_its_case_and_not_on_its_quiet_one(check_id):
    from npudoctor.checks.registry import REGISTRY

    firing, quiet = TRAINING_CASES[check_id]
    assert {Status.WARN, Status.FAIL} & set(_training_statuses(REGISTRY[check_id], firing))
    assert set(_training_statuses(REGISTRY[check_id], quiet)) == {Status.PASS}


@pytest.mark.parametrize("first", ["npudoctor.prof.checks", "npudoctor.prof.host_checks",
                                   "npudoctor.prof.compute_checks", "npudoctor.prof.schedule_checks"])
def test_prof_checks_report_and_list_in_id_order_whichever_module_is_imported_first(first: str,
                                                                                     tmp_path: Path) -> None:
    # The PROF families register from four modules; a suite that imported host_checks first printed PROF030-35
    # before PROF022-26 in `prof analyze` (the golden failed in one order of the full suite and never alone).
    import json
    import subprocess
    import sys

    from tests import profdirs

    profdirs.torch_npu_rank(tmp_path / "prof", 0)
    program = ("import importlib, json, sys; importlib.import_module(sys.argv[1])\n"
               "from npudoctor import api\n"
               "from npudoctor.prof.engine import analyze\n"
               "listed = [s.id for s in api.rulebook() if s.room == 'prof']\n"
               "reported = [f.id for f in analyze([sys.argv[2]], api.load_profile()).findings]\n"
               "print(json.dumps([listed, reported]))")
    done = subprocess.run([sys.executable, "-c", program, first, str(tmp_path / "prof")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    listed, reported = json.loads(done.stdout)
    assert len(listed) >= 32 and listed == sorted(listed)
    assert list(dict.fromkeys(reported)) == [i for i in listed if i in reported] and "PROF030" in reported
