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
from typing import TYPE_CHECKING

import numpy as np

from crabray.core.errors import ResultsError
from crabray.results._aggregate import Codes, combine, pass_columns, summary
from crabray.results.dataset import INFRA_REASONS
from crabray.results.stats import DEFAULT_CONFIDENCE

if TYPE_CHECKING:  # pandas is imported by whoever makes a frame, not by importing this
    import pandas as pd

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

    Categorical columns (``read_episodes(..., categorical=True)``) are coded
    already (their labels stay categorical: see ``_plain``).
    """
    ids, first = combine([_column_codes(frame[name]) for name in keys], len(frame))
    labels = frame[list(keys)].iloc[first].reset_index(drop=True)
    return ids, labels


def _plain(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with categorical columns as plain values: results never depend on input dtypes."""
    import pandas as pd

    for name in table.columns:
        if isinstance(table[name].dtype, pd.CategoricalDtype):
            table[name] = table[name].astype(table[name].cat.categories.dtype)
    return table


def _column_codes(column: pd.Series) -> Codes:
    """Integer codes of a column's values (null included) and how many codes there can be."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        size = len(column.cat.categories) + 1
        codes = column.cat.codes.to_numpy().astype(np.int64)
        return np.where(codes < 0, size - 1, codes), size
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    return codes.astype(np.int64), max(len(uniques), 1)


def _summarise(
    episodes: pd.DataFrame,
    keys: list[str],
    confidence: float,
    *,
    full: bool,
    grouping: tuple[np.ndarray, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """Per ``keys`` group: ``_aggregate.summary``'s columns after the group's key values.

    ``grouping`` is ``_group_ids(episodes, keys)`` when the caller has it already.
    """
    ids, table = grouping if grouping is not None else _group_ids(episodes, keys)

    def values(column: str) -> np.ndarray:
        return episodes[column].to_numpy(np.float64)

    columns = summary(ids, len(table), _graded(episodes), values, confidence, full=full)
    for name, column in columns.items():
        table[name] = column
    ints = [name for name in _INT_COLUMNS if name in table.columns]
    return table.astype(dict.fromkeys(ints, "int64"))


def _pass_columns(
    episodes: pd.DataFrame, ids: np.ndarray, groups: int, max_k: int | None
) -> dict[str, np.ndarray] | None:
    """``_aggregate.pass_columns`` of the frame's rows: a task sample is ``_TASK_SAMPLE``."""
    return pass_columns(
        ids,
        groups,
        _graded(episodes),
        [_column_codes(episodes[name]) for name in _TASK_SAMPLE],
        episodes["success"].to_numpy(np.float64),
        max_k,
    )


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
        import pandas as pd

        table = pd.concat([table, pd.DataFrame(passes)], axis=1)
    return _best_first(_plain(table), keys)


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    import pandas as pd

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
