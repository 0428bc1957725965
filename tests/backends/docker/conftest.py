"""Fixtures of every docker backend test: a usable engine, and a client of it.

Every test here needs the real engine (and the busybox image): without it the
test is skipped with the install hint, or failed under ``CI=true``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.backends.docker.dockerd import require_docker


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test here needs the Docker engine: a ``component`` test (tests/conftest.py).
    pytest calls this hook for the tests of this folder only."""
    item.add_marker(pytest.mark.component)


@pytest.fixture(autouse=True)
def _engine() -> None:
    require_docker()


@pytest.fixture
def client() -> Iterator[Any]:
    """A client of the engine the tests' sandboxes run on; closed afterwards."""
    import docker

    engine = docker.from_env()
    yield engine
    engine.close()
