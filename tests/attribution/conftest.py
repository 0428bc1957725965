"""Shared pieces of the attribution tests: a confined local backend, or a skip saying why not."""

from __future__ import annotations

import pytest

from tests.backends.conftest import require_kind


@pytest.fixture
def bwrap() -> str:
    """Confined local sandboxes (bubblewrap): skipped with the install hint when missing."""
    return require_kind("local-bwrap")
