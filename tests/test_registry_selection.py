"""`--only` / `--skip` never change what a check says: every registered check, prefix and stage, alone or
without a requirement, on realistic fake nodes, gives the findings of the full run (and never a crash)."""

from __future__ import annotations

from typing import Callable, Dict, List, Tuple

import pytest

from npudoctor import api
from npudoctor.checks import ordered_specs
from npudoctor.checks.registry import select
from npudoctor.model.finding import Status
from tests.nodes import DCMI_8005, healthy_910b_node
from tests.samples import sample_text


def _no_npu_node(node):
    """A machine without NPUs: no PCI bus entries, no npu-smi, no CANN."""
    return node


def _npu_smi_fails_node(node):
    """The healthy 8x910B3 node whose npu-smi fails with dcmi -8005 (SMI001 FAIL)."""
    healthy_910b_node(node)
    node.command("npu-smi", stdout=sample_text(DCMI_8005), rc=255)
    return node


NODES: Dict[str, Callable] = {"healthy-910b": healthy_910b_node, "no-npu": _no_npu_node,
                              "npu-smi-fails": _npu_smi_fails_node}

# Every way to name checks: each ID, each ID prefix (PCI, HCCL), each stage. Level-3 checks train a model in a
# child process: tests/test_workload_check.py runs them.
SPECS = [spec for spec in ordered_specs() if spec.level <= 2]
PATTERNS: List[str] = [*(spec.id for spec in SPECS), *dict.fromkeys(spec.id.rstrip("0123456789") for spec in SPECS),
                       *dict.fromkeys(spec.stage for spec in SPECS)]
# Each check with each of its requirements skipped.
SKIPS: List[str] = sorted({required for spec in SPECS for required in spec.requires})


def said(findings) -> List[Tuple[str, str, str, str, str]]:
    return [(f.id, f.status.name, f.subject, f.detail, f.fix) for f in findings]


@pytest.mark.parametrize("node_name", sorted(NODES))
def test_a_selection_says_exactly_what_the_full_run_says(node, node_name):
    """Issue 17 point 2: `--only X` (an ID, a prefix or a stage) and `--skip X` change which findings are
    reported, never what one says (status, subject, detail, fix); nothing crashes."""
    NODES[node_name](node)
    full = api.run_checks(node.runner(), level=2).findings
    problems = []
    for pattern in PATTERNS:
        chosen = {spec.id for spec in select(SPECS, only=(pattern,), level=2).node}
        alone = api.run_checks(node.runner(), only=(pattern,), level=2).findings
        expected = [f for f in full if f.id in chosen]
        if pattern.upper() == "SITE001" or pattern in ("SITE", "site"):  # left out of a full run without pins
            expected = [f for f in alone if f.status is Status.SKIP]
        if said(alone) != said(expected) or not alone:
            problems.append(f"--only {pattern}: {said(alone)} != {said(expected)}")
    for pattern in SKIPS:
        rest = api.run_checks(node.runner(), skip=(pattern,), level=2).findings
        if said(rest) != said([f for f in full if f.id != pattern]):
            problems.append(f"--skip {pattern}: differs from the full run")
    assert problems == []


def test_left_out_requirement_that_fails_skips_with_its_reason(node):
    """`--only SMI002` where npu-smi fails: SKIP "blocked by SMI001" as in the full run; the evidence says what
    SMI001, left out of the report, said."""
    _npu_smi_fails_node(node)
    report = api.run_checks(node.runner(), only=("SMI002",))
    [finding] = report.findings
    assert (finding.status, finding.detail) == (Status.SKIP, "blocked by SMI001")
    assert finding.evidence["not_reported"]["status"] == "FAIL"
    assert "-8005" in finding.evidence["not_reported"]["detail"]


def test_left_out_requirement_that_passes_lets_the_check_run(node):
    """`--only SMI002` on a healthy node judges the chips, exactly as the full run does."""
    healthy_910b_node(node)
    alone = api.run_checks(node.runner(), only=("SMI002",)).findings
    full = [f for f in api.run_checks(node.runner()).findings if f.id == "SMI002"]
    assert [(f.status, f.subject) for f in alone] == [(f.status, f.subject) for f in full]
    assert len(alone) == 8 and all(f.status is Status.PASS for f in alone)


@pytest.mark.parametrize("node_name", sorted(NODES))
def test_every_check_that_says_not_an_ascend_node_is_asked_by_a_narrowed_run(node, node_name):
    """A check left alone by --only asks ASCEND_NODE_CHECKS whether this is an Ascend node: every check that
    can say it is not must be among them (else `--only HCCL` would pass where the full run skips)."""
    from npudoctor.checks.registry import ASCEND_NODE_CHECKS, NOT_AN_ASCEND_NODE, REGISTRY

    NODES[node_name](node)
    saying = {f.id for f in api.run_checks(node.runner(), level=2).findings if f.cause == NOT_AN_ASCEND_NODE
              and not f.detail.startswith("blocked by") and not REGISTRY[f.id].needs_npu}
    assert saying <= set(ASCEND_NODE_CHECKS)
