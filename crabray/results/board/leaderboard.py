"""Leaderboards, breakdowns and run comparisons computed from episode rows.

The input is what ``read_episodes`` returns (deduplicated): a retried
infrastructure failure counts once, by its last attempt.

**Only the agent's outcomes are results.** Every row has an ``attribution``
(``crabray.core.result.attribution_of``): an episode attributed to the
benchmark (a failing setup, an evaluator that raised, no solution for the
oracle) is counted in ``benchmark_errors`` only, one attributed to the
infrastructure (``env_error`` after its retries, a model API that could not be
reached, a worker killed from outside) in ``infra_errors`` only, and both are
left out of every other number: ``episodes`` is the number of graded episodes
(the agent's) and the denominator of ``success_rate``, and means, sums and
pass@k are taken over graded episodes. ``episodes + benchmark_errors +
infra_errors`` is every episode in the data. Counting them as failures instead
would let a broken suite or a flaky cluster lower an agent's score.

**A pass is only as good as its grader.** ``grader_trusted`` says whether an
episode was graded by a path its agent could not alter. Beside the success
rate, ``verified_success_rate`` counts only passes graded so (same
denominator), ``unverified_passes`` the passes whose grader the agent could
have changed (``grader_trusted`` false) and ``unknown_trust_passes`` those
nobody recorded the trust of (null: files from before the column); neither
kind is verified. ``verified_only=True`` counts only verified passes as
successes everywhere a success counts (rate, interval, pass@k, cost per
success); scores stay as graded.

The functions here take and return pandas frames; the arithmetic and grouping
are ``crabray.results.board.arrow_board``'s (what ``crabray leaderboard`` runs on
Arrow tables without pandas): a frame is converted to a table, summarised
there, and the result converted back, so both give the same numbers.

Statistics (see ``crabray.results.board.stats``): a Wilson interval for the success
rate, the standard error of the mean score, and pass@k / pass^k over repeated
attempts of the same task (its epochs within a run, ``crabray run --epochs K``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from crabray.results.board._columns import (
    BREAKDOWN_INPUT_COLUMNS,
    BREAKDOWN_STATS,
    DEFAULT_BY,
    INT_COLUMNS,
    LEADERBOARD_COLUMNS,
    LEADERBOARD_INPUT_COLUMNS,
    STAT_COLUMNS,
    TAG,
)
from crabray.results.board.arrow_board import breakdown_table, leaderboard_table, missing_columns
from crabray.results.board.stats import DEFAULT_CONFIDENCE

if TYPE_CHECKING:  # pandas is imported by whoever makes a frame, not by importing this
    import pandas as pd

__all__ = [
    "BREAKDOWN_STATS",
    "DEFAULT_BY",
    "LEADERBOARD_COLUMNS",
    "LEADERBOARD_INPUT_COLUMNS",
    "STAT_COLUMNS",
    "TAG",
    "breakdown",
    "leaderboard",
]

logger = logging.getLogger(__name__)


def as_table(episodes: pd.DataFrame, needed: Sequence[str], what: str) -> pa.Table:
    """The ``needed`` columns of a frame as an Arrow table (categoricals become dictionaries).

    Raises:
        ResultsError: A needed column is missing (named, with how to read it).
    """
    error = missing_columns(list(episodes.columns), needed, what, "read_episodes")
    if error is not None:
        raise error
    present = [name for name in dict.fromkeys(needed) if name in episodes.columns]
    return pa.Table.from_pandas(episodes[present], preserve_index=False)


def leaderboard(
    episodes: pd.DataFrame,
    by: Sequence[str] = DEFAULT_BY,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    max_k: int | None = None,
    verified_only: bool = False,
) -> pd.DataFrame:
    """Summarise episode rows per ``by`` group (per agent and model by default), best first.

    ``leaderboard_table`` of the frame's rows, as a frame.

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
        verified_only: Count only verified passes (``grader_trusted`` true) as
            successes; an unverified pass counts as a failure.

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
    rows = as_table(episodes, [*LEADERBOARD_INPUT_COLUMNS, *keys], "a leaderboard")
    if episodes.empty:
        return _empty([*keys, *STAT_COLUMNS])
    table = leaderboard_table(
        rows, keys, confidence=confidence, max_k=max_k, verified_only=verified_only
    )
    frame: pd.DataFrame = table.to_pandas()
    return frame


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame({name: pd.Series(dtype=object) for name in columns})
    return frame.astype(
        {
            name: "int64" if name in INT_COLUMNS else "float64"
            for name in columns
            if name in STAT_COLUMNS or name in BREAKDOWN_STATS
        }
    )


def breakdown(
    episodes: pd.DataFrame,
    column: str,
    by: Sequence[str] = DEFAULT_BY,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    verified_only: bool = False,
) -> pd.DataFrame:
    """Success per value of ``column``, for each ``by`` group (agent and model by default).

    ``breakdown_table`` of the frame's rows, as a frame.

    Args:
        episodes: Deduplicated episode rows with the leaderboard's columns and
            ``column`` (``tags`` for a breakdown by tag).
        column: Any episode column (``task_id``, ``suite``, ``termination_reason``,
            ``run_id``, ...) or ``"tag"`` (also ``"tags"``): one row per tag value,
            an episode counting once under each of its tags and untagged episodes
            under a null tag.
        by: The groups to break down.
        confidence: Coverage of the success-rate interval.
        verified_only: Count only verified passes as successes.

    Returns:
        The ``by`` columns, the group column (named ``tag`` for tags), then
        ``BREAKDOWN_STATS``: the leaderboard's statistics of the rows with that
        value (benchmark and infrastructure errors only in ``benchmark_errors`` and
        ``infra_errors``; broken down by ``termination_reason``, ``env_error``
        therefore has 0 graded episodes),
        and ``share``, the fraction of the ``by`` group's episodes (graded or not)
        in the row. Sorted by ``by`` then the group value.

    Raises:
        ResultsError: A needed column is missing.
    """
    keys = list(by)
    tagged = column in (TAG, "tags")
    source, group = ("tags", TAG) if tagged else (column, column)
    needed = [*BREAKDOWN_INPUT_COLUMNS, source, *keys]
    rows = as_table(episodes, needed, f"a breakdown by {column!r}")
    if episodes.empty and group not in keys:
        return _empty([*keys, group, *BREAKDOWN_STATS])
    table = breakdown_table(rows, column, keys, confidence=confidence, verified_only=verified_only)
    frame: pd.DataFrame = table.to_pandas()
    return frame
