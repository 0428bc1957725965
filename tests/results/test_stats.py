"""The leaderboard's statistics against values computed by hand (and published tables)."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

from crabray.core.errors import ResultsError
from crabray.results.board import stats
from crabray.results.board.stats import (
    mean_and_standard_error,
    mean_pass_at_k,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
    wilson_intervals,
    z_score,
)


def test_doc_examples_hold():
    failures, tried = doctest.testmod(stats)
    assert tried >= 5
    assert failures == 0


def test_z_scores():
    assert z_score(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert z_score(0.99) == pytest.approx(2.575829, abs=1e-6)
    with pytest.raises(ResultsError, match="between 0 and 1"):
        z_score(1.0)


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        # p = 0.8, z^2 = 3.841459: centre 0.716738, half-width 0.226577.
        (8, 10, 0.490162, 0.943318),
        # p = 0.4: centre 0.443449, half-width 0.325829.
        (2, 5, 0.117621, 0.769276),
        # No successes: low 0, high z^2 / (n + z^2).
        (0, 10, 0.0, 3.841459 / 13.841459),
        # All successes: high 1, low n / (n + z^2).
        (10, 10, 10 / 13.841459, 1.0),
        (2, 2, 2 / 5.841459, 1.0),
    ],
)
def test_wilson_interval(successes, trials, low, high):
    got = wilson_interval(successes, trials)
    assert got == pytest.approx((low, high), abs=1e-6)


def test_wilson_interval_edges():
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    with pytest.raises(ResultsError, match="11 of 10"):
        wilson_interval(11, 10)
    low, high = wilson_intervals(np.array([8, 0, 3]), np.array([10, 0, 3]))
    assert low[0] == pytest.approx(0.490162, abs=1e-6)
    assert math.isnan(low[1]) and math.isnan(high[1])
    assert high[2] == 1.0


def test_wilson_is_wider_at_higher_confidence():
    low95, high95 = wilson_interval(8, 10, 0.95)
    low99, high99 = wilson_interval(8, 10, 0.99)
    assert low99 < low95 and high99 > high95


def test_mean_and_standard_error():
    # deviations 0.4, 0.4, -0.1, -0.6, -0.1: squares sum 0.7, variance 0.175, se sqrt(0.035).
    mean, se = mean_and_standard_error([1.0, 1.0, 0.5, 0.0, 0.5])
    assert mean == pytest.approx(0.6)
    assert se == pytest.approx(math.sqrt(0.035))
    mean, se = mean_and_standard_error([0.3])
    assert mean == 0.3 and math.isnan(se)
    assert all(math.isnan(x) for x in mean_and_standard_error([]))


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # pass@1 is c / n
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (5, 0, 3, 0.0),
        (5, 5, 3, 1.0),
        (5, 4, 2, 1.0),  # C(1,2) = 0: two draws always include a success
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (3, 1, 3, 1.0),
    ],
)
def test_pass_at_k(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 3, 1, 0.6),  # pass^1 is c / n too
        (5, 3, 2, 3 / 10),  # C(3,2)/C(5,2)
        (10, 8, 3, 56 / 120),  # C(8,3)/C(10,3)
        (4, 1, 2, 0.0),
        (4, 4, 4, 1.0),
    ],
)
def test_pass_hat_k(n, c, k, expected):
    assert pass_hat_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_is_the_chance_over_all_k_subsets():
    """The estimator equals the share of k-subsets of the n attempts with a success."""
    from itertools import combinations

    attempts = [True, False, False, True, False, False]
    for k in range(1, len(attempts) + 1):
        subsets = list(combinations(attempts, k))
        any_share = sum(any(s) for s in subsets) / len(subsets)
        all_share = sum(all(s) for s in subsets) / len(subsets)
        assert pass_at_k(6, 2, k) == pytest.approx(any_share)
        assert pass_hat_k(6, 2, k) == pytest.approx(all_share)


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ResultsError, match="k=4 with n=3"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ResultsError, match="c=4, n=3"):
        pass_hat_k(3, 4, 1)
    with pytest.raises(ResultsError, match="no tasks"):
        mean_pass_at_k([], 1)


def test_mean_pass_at_k_over_tasks():
    assert mean_pass_at_k([(2, 1), (2, 0)], 2) == pytest.approx(0.5)
    assert mean_pass_at_k([(3, 3), (3, 2)], 2, all_k=True) == pytest.approx((1 + 1 / 3) / 2)
