"""Every integrity test plays a hostile agent against real sandboxes: a real ``crabray run`` on
local Ray, bubblewrap with its own network, or Docker's networks."""

from __future__ import annotations

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    """A ``component`` test (tests/conftest.py). pytest calls this hook for the tests of this
    folder only."""
    item.add_marker(pytest.mark.component)
