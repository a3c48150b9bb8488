"""A version fix must lead to a working node, not to the next finding (issue 17 point 1).

For every row of the shipped compatibility matrix and a seeded sample of wrong combinations (torch, torch_npu,
CANN and Python drawn from different rows), every fix the versions stage prints is applied to the node's facts
(each ``or`` alternative on its own: the pins of its ``pip install``, the CANN it installs, the Python it
names) and the stage runs again: the finding the fix was for is gone and no other VER finding appears.
"""

from __future__ import annotations

import random
import re
from typing import Dict, List, NamedTuple, Optional, Set, Tuple

import pytest

from npudoctor import api
from npudoctor.checks.versions import matrix
from npudoctor.model import Status
from tests.nodes import ASCEND, VERSION_CFG_800, install_driver, target_python
from tests.samples import sample_text

PROBLEMS = (Status.WARN, Status.FAIL, Status.ERROR)
PYTHONS = ("3.8.18", "3.9.19", "3.10.14", "3.11.9", "3.12.4", "3.13.1")


class Facts(NamedTuple):
    torch: str
    torch_npu: str
    cann: str
    python: str


def _version_cfg(cann: str) -> str:
    """The real toolkit 8.0.0 version.cfg, its release field set to ``cann`` (the layout is what matters)."""
    return sample_text(VERSION_CFG_800).replace(":8.0.0]", f":{cann}]")


class Node:
    """One fake node whose CANN and target interpreter are rewritten for each combination."""

    def __init__(self, node) -> None:
        self.node = node
        install_driver(node)
        node.symlink(f"{ASCEND}/ascend-toolkit/latest", "current")
        node.setenv(ASCEND_HOME_PATH=f"{ASCEND}/ascend-toolkit/latest")
        # The stage is a function of the facts: a combination met again (half of them: the fix of one finding
        # is often the fix of another, and a healthy row is converged from its own problems) is not rerun.
        self.seen: Dict[Facts, Dict[str, Tuple[str, str, str]]] = {}

    def problems(self, facts: Facts) -> Dict[str, Tuple[str, str, str]]:
        """The VER findings that are not PASS/SKIP: ID -> (status, detail, fix)."""
        if facts not in self.seen:
            self.seen[facts] = self._run(facts)
        return self.seen[facts]

    def _run(self, facts: Facts) -> Dict[str, Tuple[str, str, str]]:
        self.node.file(f"{ASCEND}/ascend-toolkit/current/version.cfg", _version_cfg(facts.cann))
        target_python(self.node, facts.python, torch=facts.torch, torch_npu=facts.torch_npu)
        report = api.run_checks(self.node.runner(), api.load_profile(None), only=("versions",))
        found: Dict[str, Tuple[str, str, str]] = {}
        for finding in report.findings:
            if finding.status in PROBLEMS:
                found[finding.id] = (finding.status.value, finding.detail, finding.fix)
        return found


PIP = re.compile(r"pip install ((?:torch(?:_npu)?==\S+ ?)+)")
CANN = re.compile(r"install CANN (\S+):")
PYTHON = re.compile(r"use Python (\d+\.\d+)")


def apply(fix: str, facts: Facts) -> Optional[Facts]:
    """``facts`` after one alternative of a fix, None when the alternative changes nothing we can apply."""
    changed = facts
    for pins in PIP.findall(fix):
        for pin in pins.split():
            name, version = pin.split("==")
            changed = changed._replace(**{name: version})
    for cann in CANN.findall(fix):
        changed = changed._replace(cann=cann)
    for python in PYTHON.findall(fix):
        changed = changed._replace(python=python + ".9")
    return None if changed == facts else changed


def healthy_rows() -> List[Facts]:
    m = matrix()
    rows = []
    for release in m.releases:
        if release.torch_npu in m.known_bad:
            continue
        pythons = m.python_for(release.torch) or ["3.9"]
        rows.append(Facts(release.torch.text, release.torch_npu.text, release.cann.text, pythons[-1] + ".9"))
    return rows


def wrong_combinations(count: int, seed: int = 17) -> List[Facts]:
    """Torch, torch_npu, CANN and Python from different rows: a seeded sample, the same on every run."""
    m = matrix()
    draw = random.Random(seed)
    releases = [r for r in m.releases if r.torch_npu not in m.known_bad]
    maintained = [r for r in releases if not r.eol]
    combos = []
    while len(combos) < count:
        # mostly maintained releases (where users are), some end-of-life ones
        pool = maintained if draw.random() < 0.75 else releases
        torch, torch_npu, cann = draw.choice(pool), draw.choice(pool), draw.choice(pool)
        python = draw.choice(PYTHONS)
        combos.append(Facts(torch.torch.text, torch_npu.torch_npu.text, cann.cann.text, python))
    return combos


def converge(node: Node, facts: Facts, applied: Optional[List[str]] = None) -> List[str]:
    """Every fix of every VER finding on ``facts``, applied alone; the broken promises, as messages.
    ``applied`` collects the alternatives that were applied."""
    broken = []
    before = node.problems(facts)
    for finding_id, (_status, detail, fix) in before.items():
        if finding_id in ("VER001", "VER002", "VER007"):
            continue  # driver/firmware and driver/CANN pairs: the node fixture keeps them fixed
        for alternative in fix.split("\nor "):
            after_facts = apply(alternative, facts)
            if after_facts is None:
                broken.append(f"{facts}: {finding_id} ({detail}) has a fix with nothing to apply: {alternative!r}")
                continue
            after = node.problems(after_facts)
            if applied is not None:
                applied.append(alternative)
            allowed: Set[str] = set(before) - {finding_id}
            for new_id, (status, new_detail, _fix) in after.items():
                if new_id in allowed:
                    continue
                if "end of life" in alternative and "end of life" in new_detail:
                    continue  # the alternative said it stays on an end-of-life pair
                broken.append(
                    f"{facts}: {finding_id} fix {alternative!r} -> {after_facts} gives {new_id} {status}: {new_detail}"
                )
    return broken


def test_every_healthy_matrix_row_passes_and_its_warnings_converge(node):
    fake = Node(node)
    broken = []
    for facts in healthy_rows():
        problems = fake.problems(facts)
        for finding_id, (status, detail, _fix) in problems.items():
            if "end of life" not in detail:
                broken.append(f"{facts}: {finding_id} {status}: {detail}")
        broken += converge(fake, facts)
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("part", range(4))
def test_fixes_of_wrong_combinations_clear_their_finding_and_bring_no_new_one(node, part):
    fake = Node(node)
    combos = wrong_combinations(160)[part::4]
    broken: List[str] = []
    applied: List[str] = []
    for facts in combos:
        broken += converge(fake, facts, applied)
    assert not broken, "\n".join(broken[:20])
    # the sample does exercise the fixes: most wrong combinations have one or more findings to fix, and the
    # fixes that keep CANN, change it, or change Python are all among them
    assert len(applied) >= len(combos)
    assert any("(in use)" in a for a in applied) and any("install CANN" in a for a in applied)


def test_the_version_mismatch_demo_keeps_the_cann_in_place(node):
    # The case: torch 2.2.0 + torch_npu 2.1.0.post10 on CANN 8.0.0; the fix used to be torch_npu
    # 2.2.0.post2 (built for CANN 8.0.RC2), after which VER004 asked for a CANN downgrade to an EOL release.
    fake = Node(node)
    facts = Facts("2.2.0", "2.1.0.post10", "8.0.0", "3.10.14")
    fix = fake.problems(facts)["VER003"][2]
    assert fix.splitlines()[0] == "pip install torch==2.1.0   # built for torch 2.1.0 and CANN 8.0.0 (in use)"
    assert "CANN 8.0.RC2" not in fix
    assert not converge(fake, facts)
