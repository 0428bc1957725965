"""Run comparisons: per task, how one run did against another.

Split from :mod:`crabray.results.board.leaderboard` (whose statistics it shares:
graded episodes only, infrastructure failures left out) so that each module
does one job: the leaderboard and breakdowns summarise groups, this module
matches tasks across two runs. ``compare_table`` works on an Arrow table
(what ``crabray leaderboard --compare`` reads, without pandas); ``compare_runs``
converts a frame and calls it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from crabray.core.errors import ResultsError
from crabray.core.words import counted
from crabray.results._numpy import strings, to_arrow, to_numpy
from crabray.results.board._aggregate import combine
from crabray.results.board.arrow_board import (
    codes,
    counted_success,
    dictionary_indices,
    floats,
    graded,
    labels,
    missing_columns,
)

if TYPE_CHECKING:  # pandas is imported by whoever makes a frame, not by importing this
    import pandas as pd

logger = logging.getLogger(__name__)


CHANGES = ("fixed", "broke", "better", "worse", "only_a", "only_b", "same")
"""Labels of ``compare_runs``: fixed = never solved in A, solved in B; broke = the
reverse; better/worse = the success rate rose/fell otherwise; only_a/only_b =
graded in one run only (missing, or only infrastructure failures, in the other);
same = equal success rates."""

COMPARE_STATS = (
    "episodes_a",
    "episodes_b",
    "success_rate_a",
    "success_rate_b",
    "mean_score_a",
    "mean_score_b",
    "mean_steps_a",
    "mean_steps_b",
    "change",
)
"""Columns of ``RunComparison.tasks`` after the matching key."""

_NEEDED = (
    "run_id",
    "agent",
    "model",
    "task_id",
    "termination_reason",
    "attribution",
    "success",
    "score",
    "steps",
    "grader_trusted",
)


@dataclass(frozen=True)
class RunComparison:
    """What changed per task between two runs.

    Attributes:
        run_a: The baseline run.
        run_b: The run compared with it.
        key: Columns that matched tasks across the runs.
        table: One row per matched task: ``key`` then ``COMPARE_STATS``, the
            changed tasks first (in ``CHANGES`` order), as an Arrow table.
        counts: Tasks per change label (every label present, 0 if none).
        summary: One line for a person, such as ``run-a -> run-b: 40 tasks in
            both, success 0.700 -> 0.750; fixed 3, broke 1, ...``.
    """

    run_a: str
    run_b: str
    key: tuple[str, ...]
    table: pa.Table
    counts: dict[str, int] = field(default_factory=dict)
    summary: str = ""

    @cached_property
    def tasks(self) -> pd.DataFrame:
        """``table`` as a pandas frame (made once, on first use)."""
        frame: pd.DataFrame = self.table.to_pandas()
        return frame


def _change(rate_a: float, rate_b: float) -> str:
    if math.isnan(rate_b):
        return "only_a"
    if math.isnan(rate_a):
        return "only_b"
    if rate_a == rate_b:
        return "same"
    if rate_a == 0.0:
        return "fixed"
    if rate_b == 0.0:
        return "broke"
    return "better" if rate_b > rate_a else "worse"


def _group_means(ids: np.ndarray, groups: int, values: np.ndarray) -> np.ndarray:
    """Per group, the mean of the non-NaN values (NaN if none), summed in row order."""
    keep = ~np.isnan(values)
    count = np.bincount(ids[keep], minlength=groups)
    total = np.bincount(ids[keep], weights=values[keep], minlength=groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / count, np.nan)


def _side(
    rows: pa.Table, key: list[str], verified_only: bool
) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """One run's graded rows per task: the key values and the task's statistics."""
    rows = rows.filter(to_arrow(graded(rows)))
    ids, first = combine([codes(rows.column(name)) for name in key], rows.num_rows)
    groups = len(first)
    stats = {
        "episodes": np.bincount(ids, minlength=groups).astype(np.float64),
        "success_rate": _group_means(
            ids, groups, counted_success(rows, verified_only=verified_only)
        ),
        "mean_score": _group_means(ids, groups, floats(rows, "score")),
        "mean_steps": _group_means(ids, groups, floats(rows, "steps")),
    }
    keys = pa.Table.from_arrays([labels(rows.column(name), first) for name in key], names=key)
    return keys, stats


def _run_rows(episodes: pa.Table, run: str) -> pa.Table:
    """The rows of ``run``; an error listing the runs there are when it has none."""
    dictionary, indices = dictionary_indices(episodes.column("run_id"))
    names = dictionary.to_pylist()
    rows = episodes.filter(to_arrow(indices == (names.index(run) if run in names else -2)))
    if rows.num_rows == 0:
        present = [None if index < 0 else names[index] for index in np.unique(indices)]
        known = ", ".join(sorted(map(str, present))) or "none"
        raise ResultsError(f"run {run!r} has no episodes to compare; runs present: {known}")
    return rows


def _per_task(sides: list[tuple[pa.Table, dict[str, np.ndarray]]], key: list[str]) -> pa.Table:
    """Both runs' per-task statistics side by side, a row per task of either, changed first."""
    both = pa.concat_tables([keys for keys, _ in sides]).unify_dictionaries()
    ids, first = combine([codes(both.column(name)) for name in key], both.num_rows)
    values: dict[str, np.ndarray] = {}
    start = 0
    for suffix, (keys, stats) in zip(("_a", "_b"), sides, strict=True):
        at = ids[start : start + keys.num_rows]
        start += keys.num_rows
        for name, side in stats.items():
            column = np.zeros(len(first)) if name == "episodes" else np.full(len(first), np.nan)
            column[at] = side
            values[name + suffix] = column
    rates = zip(values["success_rate_a"], values["success_rate_b"], strict=True)
    order = np.array([CHANGES.index(_change(a, b)) for a, b in rates], np.int64)
    columns = {name: labels(both.column(name), first) for name in key}
    for name in COMPARE_STATS[:-1]:
        kind = np.int64 if name.startswith("episodes") else np.float64
        columns[name] = to_arrow(values[name].astype(kind))
    columns["change"] = strings(list(CHANGES)).take(to_arrow(order))
    columns["__order"] = to_arrow(order)
    table = pa.Table.from_arrays(list(columns.values()), names=list(columns))
    table = table.sort_by([("__order", "ascending"), *((name, "ascending") for name in key)])
    return table.drop_columns(["__order"])


def compare_table(
    episodes: pa.Table, run_a: str, run_b: str, *, verified_only: bool = False
) -> RunComparison:
    """``compare_runs`` of an Arrow table of episode rows (``read_episode_table``).

    ``verified_only`` counts only verified passes as successes (``counted_success``).

    Raises:
        ResultsError: A needed column is missing, or a run has no episodes (the
            message lists the runs there are).
    """
    error = missing_columns(
        episodes.column_names, _NEEDED, "a run comparison", "read_episode_table"
    )
    if error is not None:
        raise error
    episodes = episodes.unify_dictionaries()
    sides = [_run_rows(episodes, run) for run in (run_a, run_b)]
    agents = [
        len(combine([codes(r.column(n)) for n in ("agent", "model")], r.num_rows)[1]) for r in sides
    ]
    key = ["task_id"] if max(agents) == 1 else ["agent", "model", "task_id"]
    table = _per_task([_side(rows, key, verified_only) for rows in sides], key)
    change = table.column("change").to_pylist()
    counts = {label: change.count(label) for label in CHANGES}
    summary = _summary(run_a, run_b, table, counts)
    logger.debug("compared runs %s and %s by %s: %s", run_a, run_b, key, counts)
    return RunComparison(run_a, run_b, tuple(key), table, counts, summary)


def _summary(run_a: str, run_b: str, tasks: pa.Table, counts: dict[str, int]) -> str:
    """The comparison in one line: tasks graded in both runs, their mean rates, the counts."""
    both = (to_numpy(tasks.column("episodes_a")) > 0) & (to_numpy(tasks.column("episodes_b")) > 0)
    rate_a, rate_b = (
        to_numpy(tasks.column(name))[both] for name in ("success_rate_a", "success_rate_b")
    )
    rates = (
        f"success {rate_a.mean():.3f} -> {rate_b.mean():.3f}"
        if both.any()
        else "no task graded in both"
    )
    return f"{run_a} -> {run_b}: {counted(int(both.sum()), 'task')} in both, {rates}; " + ", ".join(
        f"{label} {counts[label]}" for label in CHANGES
    )


def compare_runs(
    episodes: pd.DataFrame, run_a: str, run_b: str, *, verified_only: bool = False
) -> RunComparison:
    """Per task, how run B did compared with run A.

    Tasks are matched by ``task_id`` when each run has one (agent, model), the
    usual comparison of two models or two versions of an agent; when either run
    has several, by ``(agent, model, task_id)``, so each agent is compared with
    itself. Each side's numbers are over its graded episodes of the task (its
    epochs); infrastructure failures are left out as in the leaderboard.
    ``compare_table`` of the frame's rows.

    Args:
        episodes: Deduplicated episode rows of (at least) both runs, with
            ``LEADERBOARD_INPUT_COLUMNS``.
        run_a: The baseline run id.
        run_b: The run to compare with it.
        verified_only: Count only verified passes (``grader_trusted`` true) as successes.

    Returns:
        The comparison: a row per task (``tasks``, a frame), counts per change
        and a summary line.

    Raises:
        ResultsError: A needed column is missing, or a run has no episodes (the
            message lists the runs there are).
    """
    error = missing_columns(list(episodes.columns), _NEEDED, "a run comparison", "read_episodes")
    if error is not None:
        raise error
    present = [name for name in _NEEDED if name in episodes.columns]  # OPTIONAL_INPUT_COLUMNS
    rows = pa.Table.from_pandas(episodes[present], preserve_index=False)
    return compare_table(rows, run_a, run_b, verified_only=verified_only)
