"""The statistics of a leaderboard, exact and dependency-free (``math`` and ``numpy`` only).

Each estimator exists twice: a scalar function that is the definition (tested
against hand-computed values) and, where a leaderboard needs it for many groups
at once, a vectorised form that must agree with it.

- Success rates get a **Wilson score interval**, which stays inside [0, 1] and
  is honest for small samples and rates near 0 or 1, where the normal
  approximation (rate ± 1.96·se) collapses to a zero-width interval.
- Mean scores get a **standard error** of the mean (sample standard deviation,
  ``ddof=1``, over the square root of the count).
- With repeated attempts per task, **pass@k** is the chance that at least one
  of k attempts succeeds and **pass^k** the chance that all k do, both estimated
  without bias from n >= k attempts with c successes (Chen et al. 2021 for
  pass@k; Yao et al. 2024, tau-bench, for pass^k).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from statistics import NormalDist

import numpy as np

from crabray.core.errors import ResultsError

logger = logging.getLogger(__name__)

DEFAULT_CONFIDENCE = 0.95
"""Confidence level of every interval unless told otherwise."""


def z_score(confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The two-sided standard-normal quantile for ``confidence`` (1.95996... for 0.95).

    Raises:
        ResultsError: ``confidence`` is not strictly between 0 and 1.
    """
    if not 0.0 < confidence < 1.0:
        raise ResultsError(f"confidence must be strictly between 0 and 1, not {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(
    successes: int, trials: int, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """The Wilson score interval of a success rate.

    Args:
        successes: Successful trials.
        trials: All trials; 0 gives ``(nan, nan)`` (no data, no interval).
        confidence: Coverage of the interval.

    Returns:
        ``(low, high)`` within [0, 1].

    Raises:
        ResultsError: Negative counts, more successes than trials, or a bad confidence.

    Example:
        >>> [round(x, 4) for x in wilson_interval(8, 10)]
        [0.4902, 0.9433]
    """
    if trials < 0 or successes < 0 or successes > trials:
        raise ResultsError(
            f"a Wilson interval needs 0 <= successes <= trials, got {successes} of {trials}"
        )
    low, high = wilson_intervals(np.array([successes]), np.array([trials]), confidence)
    return float(low[0]), float(high[0])


def wilson_intervals(
    successes: np.ndarray, trials: np.ndarray, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """``wilson_interval`` for arrays of counts at once; NaN where ``trials`` is 0."""
    z = z_score(confidence)
    n = np.asarray(trials, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.asarray(successes, dtype=np.float64) / n
        denominator = 1.0 + z * z / n
        centre = (p + z * z / (2.0 * n)) / denominator
        half = z * np.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denominator
    low = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), np.nan)
    high = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), np.nan)
    return low, high


def mean_and_standard_error(values: Iterable[float]) -> tuple[float, float]:
    """The mean and its standard error (``ddof=1``).

    Returns:
        ``(mean, se)``; ``se`` is NaN with fewer than two values (one value says
        nothing about spread), and both are NaN with none.

    Example:
        >>> mean_and_standard_error([1.0, 0.0, 0.5, 0.5])
        (0.5, 0.2041241452319315)
    """
    data = [float(value) for value in values]
    if not data:
        return math.nan, math.nan
    mean = math.fsum(data) / len(data)
    if len(data) < 2:
        return mean, math.nan
    variance = math.fsum((value - mean) ** 2 for value in data) / (len(data) - 1)
    return mean, math.sqrt(variance / len(data))


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ResultsError(f"pass@k needs 0 <= successes <= attempts, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ResultsError(f"pass@k needs 1 <= k <= attempts, got k={k} with n={n} attempts")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of ``k`` attempts succeeds: ``1 - C(n-c,k)/C(n,k)``.

    Args:
        n: Attempts made at the task.
        c: Successful attempts among them.
        k: Attempts allowed, ``1 <= k <= n``.

    Raises:
        ResultsError: Counts out of range.

    Example:
        >>> pass_at_k(5, 2, 2)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        0.7
    """
    _check_counts(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that all ``k`` attempts succeed (pass^k): ``C(c,k)/C(n,k)``.

    Args:
        n: Attempts made at the task.
        c: Successful attempts among them.
        k: Attempts required to all succeed, ``1 <= k <= n``.

    Raises:
        ResultsError: Counts out of range.

    Example:
        >>> pass_hat_k(5, 3, 2)  # C(3,2)/C(5,2) = 3/10
        0.3
    """
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def mean_pass_at_k(attempts: Iterable[tuple[int, int]], k: int, *, all_k: bool = False) -> float:
    """pass@k (or pass^k with ``all_k``) averaged over tasks, each given as ``(n, c)``.

    Every task must have at least ``k`` attempts; a leaderboard therefore only
    reports k up to the smallest number of attempts among its tasks.

    Raises:
        ResultsError: No tasks, or a task's counts out of range.

    Example:
        >>> mean_pass_at_k([(2, 1), (2, 0)], 2)  # (1 + 0) / 2
        0.5
    """
    estimator = pass_hat_k if all_k else pass_at_k
    values = [estimator(n, c, k) for n, c in attempts]
    if not values:
        raise ResultsError("pass@k of no tasks is undefined")
    return math.fsum(values) / len(values)
