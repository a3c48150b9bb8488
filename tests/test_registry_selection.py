"""`--only` / `--skip` never crash a check: every registered check, alone or without its requirements, on
realistic fake nodes, gives at least one finding of its own and never a crash."""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

import pytest

from npudoctor import api
from npudoctor.checks import ordered_specs
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

# (check id, --only, --skip): each check alone, and each check with each of its requirements skipped. Level-3
# checks train a model in a child process: tests/test_workload_check.py runs them.
SELECTIONS: List[Tuple[str, Sequence[str], Sequence[str]]] = [
    selection
    for spec in ordered_specs() if spec.level <= 2
    for selection in [(spec.id, (spec.id,), ()), *((spec.id, (), (required,)) for required in spec.requires)]
]


@pytest.mark.parametrize("node_name", sorted(NODES))
def test_every_selection_gives_its_own_outcome_never_a_crash(node, node_name):
    NODES[node_name](node)
    problems = []
    for check_id, only, skipped in SELECTIONS:
        report = api.run_checks(node.runner(), only=only, skip=skipped, level=2)
        mine = [f for f in report.findings if f.id == check_id]
        label = f"{check_id} with --only {','.join(only)}" if only else f"{check_id} with --skip {skipped[0]}"
        if not mine:
            problems.append(f"{label}: no finding")
        if only and {f.id for f in report.findings} != {check_id}:
            problems.append(f"{label}: reports other checks {sorted({f.id for f in report.findings})}")
        problems += [f"{label}: {f.detail}" for f in mine
                     if f.status is Status.ERROR and ("crashed" in f.detail or "no outcome" in f.detail)]
    assert problems == []


def test_left_out_requirement_that_fails_skips_with_its_reason(node):
    """`--only SMI002` where npu-smi fails: SKIP saying SMI001 was not run and what it would have said."""
    _npu_smi_fails_node(node)
    report = api.run_checks(node.runner(), only=("SMI002",))
    [finding] = report.findings
    assert finding.status is Status.SKIP
    assert finding.detail.startswith("requires SMI001 (not run: it would give FAIL: ")
    assert "-8005" in finding.detail


def test_left_out_requirement_that_passes_lets_the_check_run(node):
    """`--only SMI002` on a healthy node judges the chips, exactly as the full run does."""
    healthy_910b_node(node)
    alone = api.run_checks(node.runner(), only=("SMI002",)).findings
    full = [f for f in api.run_checks(node.runner()).findings if f.id == "SMI002"]
    assert [(f.status, f.subject) for f in alone] == [(f.status, f.subject) for f in full]
    assert len(alone) == 8 and all(f.status is Status.PASS for f in alone)
