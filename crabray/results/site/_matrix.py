"""The task x agent matrix of the index page, and the per-task scores two runs are compared by.

A cell is every episode of one task by one (agent, model): its mean score over
graded episodes (infrastructure failures are listed but not scored), coloured
from red (0) to green (1), with the episodes listed in a drill-down the cell
links to (an anchor the page shows with CSS ``:target``, so it works from disk).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from crabray.results.board.cells import is_missing
from crabray.results.site._plots import group_label
from crabray.results.store.dataset import UNFINISHED_REASONS


@dataclass(frozen=True)
class EpisodeLink:
    """One episode of a cell's drill-down."""

    href: str | None
    label: str
    success: bool
    score: str
    reason: str


@dataclass
class MatrixCell:
    """The episodes of one task by one agent."""

    anchor: str
    task: str
    group: str
    score: float | None
    text: str
    detail: str
    colour: str
    episodes: list[EpisodeLink] = field(default_factory=list)


@dataclass
class Matrix:
    """Rows are tasks, columns agent/model groups; ``cells[row][column]`` is None when empty."""

    tasks: list[str]
    groups: list[str]
    cells: list[list[MatrixCell | None]]


def score_colour(score: float | None) -> str:
    """A cell's background: red at 0, amber at 0.5, green at 1; grey without a score."""
    if score is None or math.isnan(score):
        return "hsl(210, 10%, 92%)"
    return f"hsl({round(120 * max(0.0, min(1.0, score)))}, 65%, 82%)"


def _cell(
    anchor: str, task: str, group: str, rows: pd.DataFrame, link: Callable[[str], str | None]
) -> MatrixCell:
    graded = rows[~rows["termination_reason"].isin(UNFINISHED_REASONS)]
    score = float(graded["score"].mean()) if len(graded) else None
    solved = int(graded["success"].astype(bool).sum())
    detail = f"{solved} of {len(graded)} solved"
    if len(graded) < len(rows):
        detail += f", {len(rows) - len(graded)} infra errors"
    episodes = [
        EpisodeLink(
            href=link(str(row["episode_id"])),
            label=f"{row['run_id']} · epoch {row['epoch']} · attempt {row['attempt']}",
            success=bool(row["success"]),
            score=f"{float(row['score']):.2f}",
            reason=str(row["termination_reason"]),
        )
        for row in rows[
            ["episode_id", "run_id", "epoch", "attempt", "success", "score", "termination_reason"]
        ].to_dict("records")
    ]
    return MatrixCell(
        anchor=anchor,
        task=task,
        group=group,
        score=score,
        text="n/a" if score is None else f"{score:.2f}",
        detail=detail,
        colour=score_colour(score),
        episodes=episodes,
    )


def matrix(episodes: pd.DataFrame, link: Callable[[str], str | None]) -> Matrix:
    """The task x (agent, model) matrix of ``episodes``.

    Args:
        episodes: Deduplicated episode rows.
        link: The href of an episode's page by id (None when it has no page).
    """
    frame = episodes.assign(
        group=[group_label(a, m) for a, m in zip(episodes["agent"], episodes["model"], strict=True)]
    )
    tasks = sorted(str(task) for task in frame["task_id"].unique())
    groups = sorted(str(group) for group in frame["group"].unique())
    by_key = {(str(t), str(g)): rows for (t, g), rows in frame.groupby(["task_id", "group"])}
    cells: list[list[MatrixCell | None]] = []
    for row_index, task in enumerate(tasks):
        row: list[MatrixCell | None] = []
        for column_index, group in enumerate(groups):
            rows = by_key.get((task, group))
            anchor = f"cell-{row_index}-{column_index}"
            row.append(None if rows is None else _cell(anchor, task, group, rows, link))
        cells.append(row)
    return Matrix(tasks, groups, cells)


def run_scores(episodes: pd.DataFrame) -> dict[str, Any]:
    """Per run, per task and agent: mean score and successes, for the comparison page's script.

    Returns:
        ``{"runs": [ids newest first], "scores": {run: {"task · agent": [score, solved, n]}}}``.
    """
    scores: dict[str, dict[str, list[float | int]]] = {}
    graded = episodes[~episodes["termination_reason"].isin(UNFINISHED_REASONS)]
    for (run, task, agent, model), rows in graded.groupby(
        ["run_id", "task_id", "agent", "model"], dropna=False
    ):
        key = f"{task} · {group_label(agent, None if is_missing(model) else model)}"
        scores.setdefault(str(run), {})[key] = [
            round(float(rows["score"].mean()), 4),
            int(rows["success"].astype(bool).sum()),
            len(rows),
        ]
    runs = sorted({str(run) for run in episodes["run_id"].unique()}, reverse=True)
    return {"runs": runs, "scores": scores}
