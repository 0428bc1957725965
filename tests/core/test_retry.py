"""``RetryPolicy``: tries and backoff, the one policy of the scheduler and the model client."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from crabray.core import RetryPolicy


def test_backoff_doubles_from_the_first_retry_and_is_capped() -> None:
    policy = RetryPolicy(backoff_initial_sec=1, backoff_multiplier=2, backoff_max_sec=5)
    assert [policy.backoff_sec(n) for n in range(6)] == [0.0, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_jitter_adds_at_most_its_fraction() -> None:
    policy = RetryPolicy(backoff_initial_sec=2, jitter_fraction=0.5)
    waits = [policy.backoff_sec(1) for _ in range(50)]
    assert all(2 <= wait <= 3 for wait in waits)
    assert len(set(waits)) > 1


def test_attempts_count_the_first_try() -> None:
    assert RetryPolicy().max_attempts == 3
    with pytest.raises(ValidationError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValidationError, match="max_retries"):
        RetryPolicy(max_retries=2)  # type: ignore[call-arg]
