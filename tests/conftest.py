from __future__ import annotations

import pytest

# Session fixtures: registered here once, so built once per run.
from tests.elfcases import acl_by_hash_style, cases  # noqa: F401
from tests.fakenode import FakeNode


@pytest.fixture
def node(tmp_path):
    """An empty fake node; tests add files, sysfs entries and commands to it."""
    return FakeNode(tmp_path)
