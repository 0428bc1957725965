"""The statistics of a leaderboard, exact and dependency-free (``math`` and ``numpy`` only).

Each estimator exists twice: a scalar function that is the definition (tested
against hand-computed values) and, where a leaderboard needs it for many groups
at once, a vectorised form that must agree with it.

- Success rates get a **Wilson score interval**, which stays inside [0, 1] and
  is honest for small samples and rates near 0 or 1, where the normal
  approximation (rate ± 1.96·se) collapses to a zero-width interval.
- With several episodes of one task (``--epochs``), episodes are not
  independent draws: a task the agent always solves is solved in every epoch.
  The success interval is then **clustered by task**: the cluster-robust
  variance of the mean over tasks as clusters, turned into a design effect and
  an effective sample size that the Wilson interval is computed on
  (``clustered_wilson_interval``). With one episode per task it is the plain
  Wilson interval.
- Mean scores get a **standard error** of the mean (sample standard deviation,
  ``ddof=1``, over the square root of the count), clustered by task the same way
  when a task has several episodes (``clustered_standard_error``).
- With repeated attempts per task, **pass@k** is the chance that at least one
  of k attempts succeeds and **pass^k** the chance that all k do, both estimated
  without bias from n >= k attempts with c successes (Chen et al. 2021 for
  pass@k; Yao et al. 2024, tau-bench, for pass^k).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
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


def clustered_standard_error(tasks: Sequence[Sequence[float]]) -> float:
    """The standard error of the mean of all values, clustered by task (cluster-robust).

    ``se = sqrt(G / (G - 1) * sum_g (sum_{i in g} (y_i - mean))^2) / n`` over the
    ``G`` tasks (clusters) and ``n`` values, ``G / (G - 1)`` being the usual
    small-sample correction. With one value per task it equals the ``ddof=1``
    standard error of ``mean_and_standard_error``.

    Args:
        tasks: Per task, its values (each task's epochs).

    Returns:
        The standard error; NaN with fewer than two tasks (the spread between
        tasks is then unknown).

    Example:
        >>> clustered_standard_error([[1.0, 1.0], [0.0, 0.0]])  # sqrt(2 * (1 + 1)) / 4
        0.5
    """
    values = [float(value) for task in tasks for value in task]
    clusters = [task for task in tasks if len(task)]
    if len(clusters) < 2:
        return math.nan
    mean = math.fsum(values) / len(values)
    squares = math.fsum(math.fsum(value - mean for value in task) ** 2 for task in clusters)
    return math.sqrt(len(clusters) / (len(clusters) - 1) * squares) / len(values)


def clustered_wilson_interval(
    tasks: Sequence[tuple[int, int]], confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """The interval of a success rate over tasks attempted several times, clustered by task.

    The definition ``clustered_wilson_intervals`` computes for many groups at once:

    - every task has one attempt: the Wilson interval of all successes over all attempts;
    - else the design effect ``deff = se_c^2 / (p (1 - p) / n)``, the clustered
      variance (``clustered_standard_error`` of the 0/1 outcomes) over the
      independent one, and the Wilson interval of rate ``p`` on the effective
      sample size ``n / max(deff, 1)``. When ``p`` is 0 or 1, or there is one
      task, the clustered variance says nothing (it is 0, or undefined); ``deff``
      is then ``sum(n_g^2) / n``, its value when a task's attempts all agree
      (with k epochs per task: k, so the effective size is the number of tasks).

    Clustering never narrows the interval below the independent Wilson one.

    Args:
        tasks: Per task, ``(successes, attempts)``; tasks without attempts are ignored.
        confidence: Coverage of the interval.

    Returns:
        ``(low, high)`` within [0, 1]; ``(nan, nan)`` without attempts.

    Raises:
        ResultsError: A task with negative counts or more successes than attempts.

    Example:
        >>> [round(x, 4) for x in clustered_wilson_interval([(2, 2), (1, 2), (0, 2)])]
        [0.1253, 0.8747]
    """
    for successes, attempts in tasks:
        if attempts < 0 or successes < 0 or successes > attempts:
            raise ResultsError(
                f"a task needs 0 <= successes <= attempts, got {successes} of {attempts}"
            )
    attempted = [(s, n) for s, n in tasks if n > 0]
    trials = sum(n for _, n in attempted)
    successes = sum(s for s, _ in attempted)
    if trials == 0:
        return math.nan, math.nan
    if all(n == 1 for _, n in attempted):
        return wilson_interval(successes, trials, confidence)
    rate = successes / trials
    if len(attempted) >= 2 and 0 < successes < trials:
        outcomes = [[1.0] * s + [0.0] * (n - s) for s, n in attempted]
        variance = clustered_standard_error(outcomes) ** 2
        effect = variance / (rate * (1.0 - rate) / trials)
    else:
        effect = sum(n * n for _, n in attempted) / trials
    size = trials / max(effect, 1.0)
    low, high = wilson_intervals(np.array([rate * size]), np.array([size]), confidence)
    return float(low[0]), float(high[0])


def clustered_wilson_intervals(
    successes: np.ndarray,
    trials: np.ndarray,
    tasks: np.ndarray,
    residual_squares: np.ndarray,
    size_squares: np.ndarray,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[np.ndarray, np.ndarray]:
    """``clustered_wilson_interval`` of many groups at once, from per-group sums.

    Args:
        successes: Per group, successful attempts.
        trials: Per group, attempts (``n``).
        tasks: Per group, tasks with attempts (``G``).
        residual_squares: Per group, ``sum_g (s_g - n_g * p)^2`` over its tasks.
        size_squares: Per group, ``sum_g n_g^2``; it equals ``trials`` exactly when
            every task has one attempt, and the plain Wilson interval is used then.
        confidence: Coverage of the intervals.
    """
    n = np.asarray(trials, dtype=np.float64)
    s = np.asarray(successes, dtype=np.float64)
    g = np.asarray(tasks, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = s / n
        variance = g / (g - 1.0) * residual_squares / (n * n)
        effect = variance / (rate * (1.0 - rate) / n)
        informative = (g >= 2) & (s > 0) & (s < n)
        effect = np.where(informative, effect, size_squares / n)
        size = np.where(size_squares > n, n / np.maximum(effect, 1.0), n)
        return wilson_intervals(rate * size, size, confidence)


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
