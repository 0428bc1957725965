"""Leaderboards, breakdowns and run comparisons computed from episode rows.

The input is what ``read_episodes`` returns (deduplicated): a retried
infrastructure failure counts once, by its last attempt.

**Infrastructure failures are not results.** An episode whose last attempt is
still ``env_error`` never got a verdict on the agent (``crabray run --resume``
runs it again), so it is counted in ``infra_errors`` only and left out of every
other number: ``episodes`` is the number of graded episodes and the denominator
of ``success_rate``, and means, sums and pass@k are taken over graded episodes.
``episodes + infra_errors`` is every episode in the data. Counting them as
failures instead would let a flaky cluster lower an agent's score; a large
``infra_errors`` says the run is unfinished, not that the agent failed.

Statistics (see ``crabray.results.stats``): a Wilson interval for the success
rate, the standard error of the mean score, and pass@k / pass^k over repeated
attempts of the same task (its epochs within a run, ``crabray run --epochs K``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd

from crabray.core.errors import ResultsError
from crabray.results.dataset import INFRA_REASONS
from crabray.results.stats import (
    DEFAULT_CONFIDENCE,
    pass_at_k,
    pass_hat_k,
    wilson_intervals,
)

logger = logging.getLogger(__name__)

DEFAULT_BY = ("agent", "model")
"""Who a leaderboard row is about; add ``"suite"`` for a row per suite too."""

STAT_COLUMNS = (
    "episodes",
    "successes",
    "success_rate",
    "success_ci_low",
    "success_ci_high",
    "mean_score",
    "score_se",
    "mean_completeness",
    "mean_steps",
    "tokens_in",
    "tokens_out",
    "model_calls",
    "cost_usd",
    "cost_per_success",
    "mean_wall_time_sec",
    "infra_errors",
)
"""Statistics of every leaderboard row, in order (after the ``by`` columns)."""

LEADERBOARD_COLUMNS = (*DEFAULT_BY, *STAT_COLUMNS)
"""Columns of ``leaderboard(episodes)``, in order; ``pass@k`` and ``pass^k`` for
k = 1..K follow when tasks were attempted more than once."""

LEADERBOARD_INPUT_COLUMNS = (
    "run_id",
    "suite",
    "task_id",
    "agent",
    "model",
    "termination_reason",
    "success",
    "score",
    "completeness",
    "steps",
    "tokens_in",
    "tokens_out",
    "model_calls",
    "cost_usd",
    "wall_time_sec",
)
"""Episode columns that ``leaderboard`` and ``compare_runs`` read: pass these as
``read_episodes(..., columns=...)`` to read nothing else (add ``tags`` for a
breakdown by tag)."""

BREAKDOWN_STATS = (
    "episodes",
    "successes",
    "success_rate",
    "success_ci_low",
    "success_ci_high",
    "mean_score",
    "mean_steps",
    "cost_usd",
    "infra_errors",
    "share",
)
"""Statistics of every breakdown row (after the ``by`` columns and the group column)."""

TAG = "tag"
"""Breakdown column name for tags: one row per tag value (``tags`` exploded)."""

_INT_COLUMNS = ("episodes", "successes", "tokens_in", "tokens_out", "model_calls", "infra_errors")
_TASK_SAMPLE = ("run_id", "suite", "task_id")


def _require(episodes: pd.DataFrame, needed: Sequence[str], what: str) -> None:
    missing = [name for name in dict.fromkeys(needed) if name not in episodes.columns]
    if missing:
        raise ResultsError(
            f"cannot build {what}: episode rows lack column(s) {missing}; read them with "
            "read_episodes(out, columns=[*LEADERBOARD_INPUT_COLUMNS, 'tags']) or all columns"
        )


def _graded(episodes: pd.DataFrame) -> np.ndarray:
    """True for rows with a verdict on the agent (not an infrastructure failure)."""
    return ~episodes["termination_reason"].isin(INFRA_REASONS).to_numpy()


def _group_ids(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """Dense group ids per row for ``keys`` (nulls are a group), and each group's key values.

    Coding each key column once and combining the codes as integers is
    several times faster than pandas' groupby on object columns at a million
    rows, and every statistic below is then a ``np.bincount``. Categorical
    columns (``read_episodes(..., categorical=True)``) are coded already (their
    labels stay categorical: see ``_plain``). Group ids are numbered in the
    order of the combined codes.
    """
    ids, first = _combine([_column_codes(frame[name]) for name in keys], len(frame))
    labels = frame[list(keys)].iloc[first].reset_index(drop=True)
    return ids, labels


def _combine(codes: Sequence[tuple[np.ndarray, int]], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of the rows' code tuples, and one row index per id (its first, or any row).

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


def _plain(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with categorical columns as plain values: results never depend on input dtypes."""
    for name in table.columns:
        if isinstance(table[name].dtype, pd.CategoricalDtype):
            table[name] = table[name].astype(table[name].cat.categories.dtype)
    return table


def _column_codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """Integer codes of a column's values (null included) and how many codes there can be."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        size = len(column.cat.categories) + 1
        codes = column.cat.codes.to_numpy().astype(np.int64)
        return np.where(codes < 0, size - 1, codes), size
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    return codes.astype(np.int64), max(len(uniques), 1)


def _sums(ids: np.ndarray, groups: int, values: np.ndarray) -> np.ndarray:
    return np.bincount(ids, weights=values, minlength=groups)


def _summarise(
    episodes: pd.DataFrame,
    keys: list[str],
    confidence: float,
    *,
    full: bool,
    grouping: tuple[np.ndarray, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """Per ``keys`` group: counts, rates with intervals, means and sums over graded rows.

    ``grouping`` is ``_group_ids(episodes, keys)`` when the caller has it already.
    """
    ids, table = grouping if grouping is not None else _group_ids(episodes, keys)
    groups = len(table)
    graded = _graded(episodes)
    weight = graded.astype(np.float64)
    n = _sums(ids, groups, weight)
    successes = _sums(ids, groups, weight * episodes["success"].to_numpy(dtype=np.float64))

    def total(column: str) -> np.ndarray:
        return _sums(ids, groups, np.where(graded, episodes[column].to_numpy(np.float64), 0.0))

    with np.errstate(divide="ignore", invalid="ignore"):

        def mean(column: str) -> np.ndarray:
            return np.where(n > 0, total(column) / n, np.nan)

        table["episodes"] = n
        table["successes"] = successes
        table["success_rate"] = np.where(n > 0, successes / n, np.nan)
        table["success_ci_low"], table["success_ci_high"] = wilson_intervals(
            successes, n, confidence
        )
        score = episodes["score"].to_numpy(np.float64)
        table["mean_score"] = mean_score = mean("score")
        squares = _sums(ids, groups, np.where(graded, (score - mean_score[ids]) ** 2, 0.0))
        table["score_se"] = np.where(n > 1, np.sqrt(squares / (n - 1) / n), np.nan)
        table["mean_steps"] = mean("steps")
        table["cost_usd"] = cost = total("cost_usd")
        table["cost_per_success"] = np.where(successes > 0, cost / successes, np.nan)
        table["infra_errors"] = _sums(ids, groups, 1.0 - weight)
        if full:
            table["mean_completeness"] = mean("completeness")
            table["mean_wall_time_sec"] = mean("wall_time_sec")
            for column in ("tokens_in", "tokens_out", "model_calls"):
                table[column] = total(column)
    ints = [name for name in _INT_COLUMNS if name in table.columns]
    return table.astype(dict.fromkeys(ints, "int64"))


def _pass_columns(
    episodes: pd.DataFrame, ids: np.ndarray, groups: int, max_k: int | None
) -> dict[str, np.ndarray] | None:
    """pass@k and pass^k per group for k = 1..K, or None when no task was repeated.

    ``ids`` are the rows' group ids (``_group_ids``), ``groups`` how many there
    are; the columns come back indexed by group id. A task's attempts are its
    graded epochs within one run: ``(run_id, suite, task_id)`` is one task
    sample with n attempts and c successes, and a group's value is the mean
    over its samples. K of a group is the fewest attempts any of its samples
    had (the average over tasks must mean the same thing for every task),
    capped by ``max_k``; NaN beyond it, and for a group without graded rows.
    The estimators are evaluated once per distinct ``(n, c)`` pair with exact
    integer binomials. Everything works on the graded rows' codes, never on a
    filtered copy of the frame.
    """
    rows = np.flatnonzero(_graded(episodes))
    if len(rows) == 0:
        return None
    group_of_row = ids[rows]
    codes = [(group_of_row, groups)]
    for name in _TASK_SAMPLE:
        values, size = _column_codes(episodes[name])
        codes.append((values[rows], size))
    sample_of_row, first = _combine(codes, len(rows))
    n = np.bincount(sample_of_row)
    success = episodes["success"].to_numpy(np.float64)[rows]
    c = np.bincount(sample_of_row, weights=success).astype(np.int64)
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


def leaderboard(
    episodes: pd.DataFrame,
    by: Sequence[str] = DEFAULT_BY,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    max_k: int | None = None,
) -> pd.DataFrame:
    """Summarise episode rows per ``by`` group (per agent and model by default), best first.

    Args:
        episodes: Deduplicated episode rows (``read_episodes``) with at least
            ``LEADERBOARD_INPUT_COLUMNS`` and the ``by`` columns. A null model is
            its own group.
        by: Columns that make a row: ``("agent", "model", "suite")`` gives one
            row per agent, model and suite.
        confidence: Coverage of the success-rate interval.
        max_k: Largest k of the pass@k / pass^k columns; every k the data
            allows when None. The data allows k up to the fewest graded epochs
            of any (run, task) in a row's group.

    Returns:
        The ``by`` columns then ``STAT_COLUMNS`` (see the module docstring for
        how infrastructure failures count), then ``pass@1..K`` and ``pass^1..K``
        when some group attempted every task at least twice (NaN for groups
        with fewer attempts). Counts and token sums are integers; rates, means,
        costs and intervals floats, NaN where undefined (no graded episode, a
        standard error of one value, cost per success without successes).
        Sorted by success_rate then mean_score (descending), then ``by``.

    Raises:
        ResultsError: A needed column is missing, or ``confidence`` is not in (0, 1).

    Example:
        >>> episodes = read_episodes("results", columns=list(LEADERBOARD_INPUT_COLUMNS))
        >>> leaderboard(episodes, by=("agent", "model", "suite"))  # doctest: +SKIP
    """
    keys = list(by)
    _require(episodes, [*LEADERBOARD_INPUT_COLUMNS, *keys], "a leaderboard")
    if episodes.empty:
        return _empty([*keys, *STAT_COLUMNS])
    ids, labels = _group_ids(episodes, keys)
    table = _summarise(episodes, keys, confidence, full=True, grouping=(ids, labels))
    table = table[[*keys, *STAT_COLUMNS]]
    passes = _pass_columns(episodes, ids, len(table), max_k)
    if passes is not None:  # indexed by group id, as the rows of ``table`` are
        table = pd.concat([table, pd.DataFrame(passes)], axis=1)
    return _best_first(_plain(table), keys)


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Series(dtype=object) for name in columns})
    return frame.astype(
        {
            name: "int64" if name in _INT_COLUMNS else "float64"
            for name in columns
            if name in STAT_COLUMNS or name in BREAKDOWN_STATS
        }
    )


def _best_first(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    order = ["success_rate", "mean_score", *keys]
    return table.sort_values(
        order,
        ascending=[False, False, *([True] * len(keys))],
        kind="stable",
        na_position="last",
    ).reset_index(drop=True)


def _explode_tags(episodes: pd.DataFrame) -> pd.DataFrame:
    """One row per (episode, tag); an untagged episode keeps one row with a null tag."""
    rows = episodes.reset_index(drop=True)
    tags = rows["tags"].explode()  # an empty list becomes one NaN row
    exploded = rows.drop(columns="tags").iloc[tags.index.to_numpy()].reset_index(drop=True)
    exploded[TAG] = tags.to_numpy()
    return exploded


def breakdown(
    episodes: pd.DataFrame,
    column: str,
    by: Sequence[str] = DEFAULT_BY,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Success per value of ``column``, for each ``by`` group (agent and model by default).

    Args:
        episodes: Deduplicated episode rows with the leaderboard's columns and
            ``column`` (``tags`` for a breakdown by tag).
        column: Any episode column (``task_id``, ``suite``, ``termination_reason``,
            ``run_id``, ...) or ``"tag"`` (also ``"tags"``): one row per tag value,
            an episode counting once under each of its tags and untagged episodes
            under a null tag.
        by: The groups to break down.
        confidence: Coverage of the success-rate interval.

    Returns:
        The ``by`` columns, the group column (named ``tag`` for tags), then
        ``BREAKDOWN_STATS``: the leaderboard's statistics of the rows with that
        value (infrastructure failures only in ``infra_errors``; broken down by
        ``termination_reason``, ``env_error`` therefore has 0 graded episodes),
        and ``share``, the fraction of the ``by`` group's episodes (graded or not)
        in the row. Sorted by ``by`` then the group value.

    Raises:
        ResultsError: A needed column is missing.
    """
    keys = list(by)
    tagged = column in (TAG, "tags")
    source = "tags" if tagged else column
    group = TAG if tagged else column
    needed = ["termination_reason", "success", "score", "steps", "cost_usd", source, *keys]
    _require(episodes, needed, f"a breakdown by {column!r}")
    if group in keys:
        raise ResultsError(f"cannot break down by {column!r}: it is already one of by={keys}")
    if episodes.empty:
        return _empty([*keys, group, *BREAKDOWN_STATS])
    rows = episodes[list(dict.fromkeys(needed))]
    totals = rows.groupby(keys, dropna=False, sort=False).size().rename("__total").reset_index()
    if tagged:
        rows = _explode_tags(rows)
    table = _summarise(rows, [*keys, group], confidence, full=False)
    table = table.merge(totals, on=keys, how="left")
    table["share"] = (table["episodes"] + table["infra_errors"]) / table["__total"]
    table = _plain(table[[*keys, group, *BREAKDOWN_STATS]].copy())
    return table.sort_values([*keys, group], kind="stable", na_position="last").reset_index(
        drop=True
    )
