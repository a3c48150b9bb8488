from __future__ import annotations

import pytest

from tests.elfcases import cases  # noqa: F401  (session fixture: registered here once, built once per run)
from tests.fakenode import FakeNode


@pytest.fixture
def node(tmp_path):
    """An empty fake node; tests add files, sysfs entries and commands to it."""
    return FakeNode(tmp_path)
