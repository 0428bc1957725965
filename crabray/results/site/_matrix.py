"""The task x agent matrix of the index page, and the per-task scores two runs are compared by.

A cell is every episode of one task by one (agent, model): its mean score over
graded episodes (benchmark and infrastructure errors are listed but not scored,
as the leaderboard counts them), coloured from red (0) to green (1), with the
episodes listed in a drill-down the cell links to (an anchor the page shows
with CSS ``:target``, so it works from disk). A task is a task of one suite:
when the page shows several suites, a row is one suite's task (two suites may
both have a task ``setup``), so a column's cells of one suite add up to that
suite's leaderboard row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from crabray.core.result import Attribution
from crabray.results.board.cells import is_missing
from crabray.results.site._plots import agent_rows, group_label


@dataclass(frozen=True)
class EpisodeLink:
    """One episode of a cell's drill-down."""

    href: str | None
    label: str
    success: bool
    score: str
    reason: str
    attribution: str = Attribution.AGENT.value
    """Whose doing the outcome is: anything but 'agent' is shown as not the agent's."""


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
    suite: str = ""
    """The suite the task is of."""
    task_id: str = ""
    """The task's id (``task`` is its label, which names the suite when the page has several)."""
    solved: int = 0
    """Graded episodes that passed: the leaderboard's ``successes``, for this task."""
    graded: int = 0
    """Episodes attributed to the agent: the leaderboard's ``episodes``, for this task."""
    benchmark_errors: int = 0
    infra_errors: int = 0


@dataclass
class Matrix:
    """Rows are tasks, columns agent/model groups; ``cells[row][column]`` is None when empty."""

    tasks: list[str]
    groups: list[str]
    cells: list[list[MatrixCell | None]]


NOT_THE_AGENTS_COLOUR = "hsl(270, 30%, 88%)"
"""A cell without a verdict on the agent, only benchmark or infrastructure errors: never the
red of an agent's 0."""


def score_colour(score: float | None) -> str:
    """A cell's background: red at 0, amber at 0.5, green at 1; grey without a score."""
    if score is None or math.isnan(score):
        return "hsl(210, 10%, 92%)"
    return f"hsl({round(120 * max(0.0, min(1.0, score)))}, 65%, 82%)"


def _cell(
    anchor: str, task: str, group: str, rows: pd.DataFrame, link: Callable[[str], str | None]
) -> MatrixCell:
    graded = rows[agent_rows(rows)]
    score = float(graded["score"].mean()) if len(graded) else None
    solved = int(graded["success"].astype(bool).sum())
    detail = f"{solved} of {len(graded)} solved"
    kinds = ((Attribution.BENCHMARK, "benchmark"), (Attribution.INFRASTRUCTURE, "infra"))
    errors = []
    for whom, label in kinds:
        count = int((rows["attribution"] == whom.value).sum())
        errors.append(count)
        if count:
            detail += f", {count} {label} error{'s' if count > 1 else ''}"
    episodes = [
        EpisodeLink(
            href=link(str(row["episode_id"])),
            label=f"{row['run_id']} · epoch {row['epoch']} · attempt {row['attempt']}",
            success=bool(row["success"]),
            score=f"{float(row['score']):.2f}",
            reason=str(row["termination_reason"]),
            attribution=str(row["attribution"]),
        )
        for row in rows[
            [
                "episode_id",
                "run_id",
                "epoch",
                "attempt",
                "success",
                "score",
                "termination_reason",
                "attribution",
            ]
        ].to_dict("records")
    ]
    if score is None:
        benchmark = (rows["attribution"] == Attribution.BENCHMARK.value).any()
        text, colour = ("benchmark error" if benchmark else "infra error"), NOT_THE_AGENTS_COLOUR
    else:
        text, colour = f"{score:.2f}", score_colour(score)
    return MatrixCell(
        anchor=anchor,
        task=task,
        group=group,
        score=score,
        text=text,
        detail=detail,
        colour=colour,
        episodes=episodes,
        suite=str(rows["suite"].iloc[0]),
        task_id=str(rows["task_id"].iloc[0]),
        solved=solved,
        graded=len(graded),
        benchmark_errors=errors[0],
        infra_errors=errors[1],
    )


def matrix(episodes: pd.DataFrame, link: Callable[[str], str | None]) -> Matrix:
    """The task x (agent, model) matrix of ``episodes``: a row per task of each suite.

    Args:
        episodes: Deduplicated episode rows.
        link: The href of an episode's page by id (None when it has no page).
    """
    frame = episodes.assign(
        group=[group_label(a, m) for a, m in zip(episodes["agent"], episodes["model"], strict=True)]
    )
    suites = frame["suite"].nunique(dropna=False) > 1
    keys = sorted({(str(s), str(t)) for s, t in zip(frame["suite"], frame["task_id"], strict=True)})
    tasks = [f"{task} · {suite}" if suites else task for suite, task in keys]
    groups = sorted(str(group) for group in frame["group"].unique())
    by_key = {
        (str(s), str(t), str(g)): rows
        for (s, t, g), rows in frame.groupby(["suite", "task_id", "group"], dropna=False)
    }
    cells: list[list[MatrixCell | None]] = []
    for row_index, ((suite, task_id), task) in enumerate(zip(keys, tasks, strict=True)):
        row: list[MatrixCell | None] = []
        for column_index, group in enumerate(groups):
            rows = by_key.get((suite, task_id, group))
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
    graded = episodes[agent_rows(episodes)]
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
