"""Run comparisons: per task, how one run did against another.

Split from :mod:`crabray.results.leaderboard` (whose statistics it shares:
graded episodes only, infrastructure failures left out) so that each module
does one job: the leaderboard and breakdowns summarise groups, this module
matches tasks across two runs.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crabray.core.errors import ResultsError
from crabray.results.leaderboard import _graded, _require

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


@dataclass(frozen=True)
class RunComparison:
    """What changed per task between two runs.

    Attributes:
        run_a: The baseline run.
        run_b: The run compared with it.
        key: Columns that matched tasks across the runs.
        tasks: One row per matched task: ``key`` then ``COMPARE_STATS``, the
            changed tasks first (in ``CHANGES`` order).
        counts: Tasks per change label (every label present, 0 if none).
        summary: One line for a person, such as ``run-a -> run-b: 40 tasks in
            both, success 0.700 -> 0.750; fixed 3, broke 1, ...``.
    """

    run_a: str
    run_b: str
    key: tuple[str, ...]
    tasks: pd.DataFrame
    counts: dict[str, int] = field(default_factory=dict)
    summary: str = ""


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


def compare_runs(episodes: pd.DataFrame, run_a: str, run_b: str) -> RunComparison:
    """Per task, how run B did compared with run A.

    Tasks are matched by ``task_id`` when each run has one (agent, model), the
    usual comparison of two models or two versions of an agent; when either run
    has several, by ``(agent, model, task_id)``, so each agent is compared with
    itself. Each side's numbers are over its graded episodes of the task (its
    epochs); infrastructure failures are left out as in the leaderboard.

    Args:
        episodes: Deduplicated episode rows of (at least) both runs, with
            ``LEADERBOARD_INPUT_COLUMNS``.
        run_a: The baseline run id.
        run_b: The run to compare with it.

    Returns:
        The comparison: a row per task, counts per change and a summary line.

    Raises:
        ResultsError: A needed column is missing, or a run has no episodes (the
            message lists the runs there are).
    """
    needed = ["run_id", "agent", "model", "task_id", "termination_reason", "success", "score"]
    _require(episodes, [*needed, "steps"], "a run comparison")
    sides = {}
    for run in (run_a, run_b):
        rows = episodes[episodes["run_id"] == run]
        if rows.empty:
            known = ", ".join(sorted(map(str, episodes["run_id"].unique()))) or "none"
            raise ResultsError(f"run {run!r} has no episodes to compare; runs present: {known}")
        sides[run] = rows
    agents = [len(rows[["agent", "model"]].drop_duplicates()) for rows in sides.values()]
    key = ["task_id"] if max(agents) == 1 else ["agent", "model", "task_id"]
    per_side = []
    for suffix, rows in zip(("_a", "_b"), sides.values(), strict=True):
        graded = rows[_graded(rows)]
        stats = (
            graded.assign(success=graded["success"].astype(float))
            .groupby(key, dropna=False, sort=False)
            .agg(
                episodes=("success", "size"),
                success_rate=("success", "mean"),
                mean_score=("score", "mean"),
                mean_steps=("steps", "mean"),
            )
            .add_suffix(suffix)
            .reset_index()
        )
        per_side.append(stats)
    tasks = per_side[0].merge(per_side[1], on=key, how="outer")
    for name in ("episodes_a", "episodes_b"):
        tasks[name] = tasks[name].fillna(0).astype("int64")
    tasks["change"] = [
        _change(a, b) for a, b in zip(tasks["success_rate_a"], tasks["success_rate_b"], strict=True)
    ]
    tasks["__order"] = tasks["change"].map(CHANGES.index)
    tasks = (
        tasks.sort_values(["__order", *key], kind="stable", na_position="last")
        .drop(columns="__order")
        .reset_index(drop=True)[[*key, *COMPARE_STATS]]
    )
    counts = {label: int((tasks["change"] == label).sum()) for label in CHANGES}
    both = tasks[tasks["episodes_a"].gt(0) & tasks["episodes_b"].gt(0)]
    rates = (
        f"success {both['success_rate_a'].mean():.3f} -> {both['success_rate_b'].mean():.3f}"
        if len(both)
        else "no task graded in both"
    )
    summary = f"{run_a} -> {run_b}: {len(both)} tasks in both, {rates}; " + ", ".join(
        f"{label} {counts[label]}" for label in CHANGES
    )
    logger.debug("compared runs %s and %s by %s: %s", run_a, run_b, key, counts)
    return RunComparison(run_a, run_b, tuple(key), tasks, counts, summary)
