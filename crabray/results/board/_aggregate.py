"""The leaderboard's arithmetic on numpy arrays: group ids, per-group statistics, pass@k.

Both leaderboards share it: ``leaderboard`` (a pandas frame in, a frame out)
and ``arrow_board.leaderboard_table`` (an Arrow table in and out, what
``crabray leaderboard`` uses so that it never imports pandas). Each front end
turns its columns into integer codes and float arrays; everything computed
from them is here, once, so both give the same numbers. Nothing here imports
pandas or pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from crabray.results.board.stats import clustered_wilson_intervals, pass_at_k, pass_hat_k

Codes = tuple[np.ndarray, int]
"""A column's integer codes per row and how many codes there can be."""

TRUSTED, UNTRUSTED, UNKNOWN_TRUST = 1, 0, -1
"""A row's grader trust (``grader_trusted`` true, false, null): graded by a path its agent
could not alter, unverified, or unknown (a row from before the column, or no grade)."""


def combine(codes: Sequence[Codes], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of the rows' code tuples, and one row index per id (its first, or any row).

    Coding each key column once and combining the codes as integers is several
    times faster than grouping on the values, and every statistic is then a
    ``np.bincount``. Ids are numbered in the order of the combined codes.

    Args:
        codes: Per key, the rows' integer codes and how many codes there can be.
        rows: The number of rows (the codes' length).
    """
    combined = np.zeros(rows, np.int64)
    span = 1
    for values, size in codes:
        if span * size >= 2**62:
            _, combined = np.unique(combined, return_inverse=True)
            span = int(combined.max(initial=0)) + 1
        combined = combined * size + values
        span *= size
    if span <= 4 * rows + 1024:
        # Few possible codes: number the ones present by counting, not by sorting.
        dense = np.cumsum(np.bincount(combined, minlength=span) > 0) - 1
        ids = dense[combined]
        first = np.empty(int(dense[-1]) + 1, np.int64)
        first[ids] = np.arange(len(ids))  # any row of a group gives its key values
    else:
        _, first, ids = np.unique(combined, return_index=True, return_inverse=True)
    return ids.reshape(-1), first


def _sums(ids: np.ndarray, groups: int, values: np.ndarray) -> np.ndarray:
    return np.bincount(ids, weights=values, minlength=groups)


class _Clusters:
    """The tasks (clusters) of each group's graded rows, for intervals clustered by task."""

    def __init__(
        self, ids: np.ndarray, groups: int, graded: np.ndarray, tasks: Sequence[Codes]
    ) -> None:
        self.rows = np.flatnonzero(graded)
        self.group_of_row = ids[self.rows]
        task_codes = [(values[self.rows], size) for values, size in tasks]
        self.of_row, first = combine([(self.group_of_row, groups), *task_codes], len(self.rows))
        self.group = self.group_of_row[first]
        self.groups = groups
        sizes = np.bincount(self.of_row).astype(np.float64)
        self.count = np.bincount(self.group, minlength=groups).astype(np.float64)
        self.size_squares = _sums(self.group, groups, sizes * sizes)

    def residual_squares(self, values: np.ndarray, means: np.ndarray) -> np.ndarray:
        """Per group, the sum over its tasks of the squared sum of ``values - mean``."""
        residuals = values[self.rows] - means[self.group_of_row]
        per_task = np.bincount(self.of_row, weights=residuals)
        return _sums(self.group, self.groups, per_task * per_task)


def summary(
    ids: np.ndarray,
    groups: int,
    graded: np.ndarray,
    values: Callable[[str], np.ndarray],
    confidence: float,
    *,
    full: bool,
    tasks: Sequence[Codes] = (),
    benchmark: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per group: counts, rates with intervals, means and sums over graded rows.

    Args:
        ids: Each row's group id (``combine``).
        groups: How many groups there are.
        graded: True for rows attributed to the agent: the only rows in a denominator.
        values: A numeric episode column by name, as float64 per row.
        confidence: Coverage of the success-rate interval.
        full: Add the leaderboard's columns beyond a breakdown's (completeness,
            wall time, tokens, model calls).
        tasks: Codes of the columns that make a task (a cluster of episodes). A
            group with a task of several graded episodes gets its success interval
            and score standard error clustered by task (``stats``); without codes
            every row is its own task (the plain Wilson interval and ``ddof=1`` error).
        benchmark: True for rows attributed to the benchmark (counted in
            ``benchmark_errors``); the other ungraded rows are ``infra_errors``.

    Returns:
        Columns by name, in the leaderboard's order, as float64 arrays (counts
        too: the front ends make them integers).
    """
    weight = graded.astype(np.float64)
    n = _sums(ids, groups, weight)
    successes = _sums(ids, groups, weight * values("success"))

    def total(column: str) -> np.ndarray:
        return _sums(ids, groups, np.where(graded, values(column), 0.0))

    table: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):

        def mean(column: str) -> np.ndarray:
            return np.where(n > 0, total(column) / n, np.nan)

        table["episodes"] = n
        table["successes"] = successes
        table["success_rate"] = np.where(n > 0, successes / n, np.nan)
        clusters = _Clusters(ids, groups, graded, tasks) if tasks else None
        rate = table["success_rate"]
        table["success_ci_low"], table["success_ci_high"] = clustered_wilson_intervals(
            successes,
            n,
            clusters.count if clusters else n,
            clusters.residual_squares(values("success"), rate) if clusters else 0.0 * n,
            clusters.size_squares if clusters else n,
            confidence,
        )
        score = values("score")
        table["mean_score"] = mean_score = mean("score")
        squares = _sums(ids, groups, np.where(graded, (score - mean_score[ids]) ** 2, 0.0))
        table["score_se"] = np.where(n > 1, np.sqrt(squares / (n - 1) / n), np.nan)
        if clusters is not None:
            # Clustered by task where a task has several episodes (``clustered_standard_error``).
            count = clusters.count
            spread = clusters.residual_squares(score, mean_score)
            clustered = np.where(count > 1, np.sqrt(count / (count - 1) * spread) / n, np.nan)
            table["score_se"] = np.where(clusters.size_squares > n, clustered, table["score_se"])
        table["mean_steps"] = mean("steps")
        table["cost_usd"] = cost = total("cost_usd")
        table["cost_per_success"] = np.where(successes > 0, cost / successes, np.nan)
        suite = np.zeros(len(ids)) if benchmark is None else benchmark.astype(np.float64)
        table["benchmark_errors"] = _sums(ids, groups, suite)
        table["infra_errors"] = _sums(ids, groups, 1.0 - weight - suite)
        if full:
            table["mean_completeness"] = mean("completeness")
            table["mean_wall_time_sec"] = mean("wall_time_sec")
            for column in ("tokens_in", "tokens_out", "model_calls"):
                table[column] = total(column)
    return table


def verified_successes(success: np.ndarray, trust: np.ndarray) -> np.ndarray:
    """``success`` where the grade is trusted, else 0.0: the one rule of a verified pass.

    A pass whose grader the agent could have altered (``UNTRUSTED``) or whose
    trust is unknown (``UNKNOWN_TRUST``, rows predating the column) is no
    verified pass; the verified success rate and ``--verified-only`` both count
    with this, so they always agree.
    """
    return np.where(trust == TRUSTED, success, 0.0)


def trust_columns(
    ids: np.ndarray, groups: int, graded: np.ndarray, success: np.ndarray, trust: np.ndarray
) -> dict[str, np.ndarray]:
    """Per group: the verified success rate and the passes that are not verified, by why.

    The rate has the success rate's denominator (the graded rows), so the two
    read side by side: their gap is the share of passes nobody can vouch for.

    Args:
        ids: Each row's group id.
        groups: How many groups there are.
        graded: True for rows attributed to the agent.
        success: Every row's pass (1.0) or not (0.0), trusted or not.
        trust: Each row's ``TRUSTED``, ``UNTRUSTED`` or ``UNKNOWN_TRUST``.

    Returns:
        ``verified_success_rate`` (NaN without a graded row), ``unverified_passes``
        (graded passes with ``UNTRUSTED``) and ``unknown_trust_passes`` (graded
        passes with ``UNKNOWN_TRUST``), as float64 arrays.
    """
    weight = graded.astype(np.float64)
    n = _sums(ids, groups, weight)
    passes = weight * (success > 0)
    verified = _sums(ids, groups, weight * verified_successes(success, trust))
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n > 0, verified / n, np.nan)
    return {
        "verified_success_rate": rate,
        "unverified_passes": _sums(ids, groups, passes * (trust == UNTRUSTED)),
        "unknown_trust_passes": _sums(ids, groups, passes * (trust == UNKNOWN_TRUST)),
    }


def pass_columns(
    ids: np.ndarray,
    groups: int,
    graded: np.ndarray,
    sample_codes: Sequence[Codes],
    success: np.ndarray,
    max_k: int | None,
) -> dict[str, np.ndarray] | None:
    """pass@k and pass^k per group for k = 1..K, or None when no task was repeated.

    A task's attempts are its graded epochs within one run: the rows sharing
    ``sample_codes`` (run, suite, task) are one task sample with n attempts and
    c successes, and a group's value is the mean over its samples. K of a group
    is the fewest attempts any of its samples had (the average over tasks must
    mean the same thing for every task), capped by ``max_k``; NaN beyond it, and
    for a group without graded rows. The estimators are evaluated once per
    distinct ``(n, c)`` pair with exact integer binomials, on the graded rows'
    codes (never a filtered copy of the rows).

    Args:
        ids: Each row's group id; the columns come back indexed by group id.
        groups: How many groups there are.
        graded: True for rows with a verdict on the agent.
        sample_codes: Codes of the columns that make a task sample.
        success: 1.0 for a successful row, else 0.0.
        max_k: Largest k; every k the data allows when None.
    """
    rows = np.flatnonzero(graded)
    if len(rows) == 0:
        return None
    group_of_row = ids[rows]
    codes = [(group_of_row, groups), *((values[rows], size) for values, size in sample_codes)]
    sample_of_row, first = combine(codes, len(rows))
    n = np.bincount(sample_of_row)
    c = np.bincount(sample_of_row, weights=success[rows]).astype(np.int64)
    group = group_of_row[first]
    k_of_group = np.full(groups, np.iinfo(np.int64).max)
    np.minimum.at(k_of_group, group, n)
    sampled = np.bincount(group, minlength=groups)
    top = int(k_of_group[sampled > 0].max())
    top = top if max_k is None else min(top, max_k)
    if top < 2:
        return None
    radix = int(n.max()) + 1
    code = n * radix + c
    pairs = [(int(value) // radix, int(value) % radix) for value in np.unique(code)]
    lookup = np.empty(int(code.max()) + 1)
    result = {}
    for estimator, symbol in ((pass_at_k, "@"), (pass_hat_k, "^")):
        for k in range(1, top + 1):
            lookup[:] = np.nan
            for pair_n, pair_c in pairs:
                if pair_n >= k:
                    lookup[pair_n * radix + pair_c] = estimator(pair_n, pair_c, k)
            sums = np.bincount(group, weights=lookup[code], minlength=groups)
            with np.errstate(divide="ignore", invalid="ignore"):
                means = sums / sampled
            result[f"pass{symbol}{k}"] = np.where((k_of_group >= k) & (sampled > 0), means, np.nan)
    return result
