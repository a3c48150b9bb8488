"""CPU seconds of each test, its waited-for children included, for finding what makes the suite slow.

``--durations`` gives wall time, which on a shared machine is mostly other people's load and a test's sleeps;
this gives what each test costs. Use: ``NPUDOCTOR_CPU_PER_TEST=cpu.tsv python -m pytest -p tests.cpu_per_test``;
the file lists ``total, own, children, test id`` (seconds, tab-separated), most expensive first.
"""

from __future__ import annotations

import os
import resource
from typing import List, Tuple

import pytest

_ROWS: List[Tuple[float, float, str]] = []


def _cpu() -> Tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _cpu()
    yield
    after = _cpu()
    _ROWS.append((after[0] - before[0], after[1] - before[1], item.nodeid))


def pytest_sessionfinish(session):
    path = os.environ.get("NPUDOCTOR_CPU_PER_TEST")
    if not path:
        return
    with open(path, "w", encoding="utf-8") as handle:
        for own, children, nodeid in sorted(_ROWS, key=lambda row: -(row[0] + row[1])):
            handle.write(f"{own + children:.2f}\t{own:.2f}\t{children:.2f}\t{nodeid}\n")
