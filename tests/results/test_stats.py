"""The leaderboard's statistics against values computed by hand (and published tables)."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

from crabray.core.errors import ResultsError
from crabray.results.board import stats
from crabray.results.board.stats import (
    clustered_standard_error,
    clustered_wilson_interval,
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


def test_clustered_interval_by_hand():
    # 3 tasks x 2 epochs: 2/2, 1/2, 0/2. p = 0.5, task residuals 1, 0, -1: clustered variance
    # 3/2 * 2 / 36 = 1/12 against 0.25/6 independent: design effect 2, effective n = 3.
    # Wilson of rate 0.5 on n = 3: centre 0.5, half z*sqrt(0.25/3 + z²/36) / (1 + z²/3).
    z2 = stats.z_score() ** 2
    half = math.sqrt(z2) * math.sqrt(0.25 / 3 + z2 / 36) / (1 + z2 / 3)
    low, high = clustered_wilson_interval([(2, 2), (1, 2), (0, 2)])
    assert (low, high) == pytest.approx((0.5 - half, 0.5 + half))
    assert (round(low, 4), round(high, 4)) == (0.1253, 0.8747)
    independent = wilson_interval(3, 6)
    assert low < independent[0] and high > independent[1]


def test_clustered_interval_with_one_episode_per_task_is_wilson():
    tasks = [(1, 1)] * 7 + [(0, 1)] * 4
    assert clustered_wilson_interval(tasks) == wilson_interval(7, 11)
    assert clustered_standard_error([[1.0]] * 7 + [[0.0]] * 4) == pytest.approx(
        mean_and_standard_error([1.0] * 7 + [0.0] * 4)[1]
    )


def test_clustered_interval_of_all_successes_counts_tasks_not_epochs():
    # 11 tasks x 3 epochs, all solved: the 33 episodes say as much as 11 tasks.
    assert clustered_wilson_interval([(3, 3)] * 11) == pytest.approx(wilson_interval(11, 11))
    assert wilson_interval(33, 33)[0] > clustered_wilson_interval([(3, 3)] * 11)[0]


def test_vectorised_clustered_intervals_agree_with_the_definition():
    groups = [[(2, 2), (1, 2), (0, 2)], [(3, 3)] * 11, [(1, 1), (0, 1)], [(2, 3), (0, 2)], [(1, 3)]]
    successes = np.array([sum(s for s, _ in g) for g in groups], float)
    trials = np.array([sum(n for _, n in g) for g in groups], float)
    rate = successes / trials
    residuals = np.array(
        [sum((s - n * p) ** 2 for s, n in g) for g, p in zip(groups, rate, strict=True)]
    )
    sizes = np.array([sum(n * n for _, n in g) for g in groups], float)
    tasks = np.array([len(g) for g in groups], float)
    low, high = stats.clustered_wilson_intervals(successes, trials, tasks, residuals, sizes)
    for index, group in enumerate(groups):
        assert (low[index], high[index]) == pytest.approx(clustered_wilson_interval(group))


def test_clustered_standard_error_by_hand():
    # Scores t1: 1, 1, 0.5; t2: 0, 0.5. Mean 0.6, task residuals 0.7 and -0.7.
    assert clustered_standard_error([[1.0, 1.0, 0.5], [0.0, 0.5]]) == pytest.approx(
        math.sqrt(2 * 0.98) / 5
    )
    assert math.isnan(clustered_standard_error([[1.0, 0.0, 1.0]]))
    with pytest.raises(ResultsError, match="successes <= attempts"):
        clustered_wilson_interval([(3, 2)])
