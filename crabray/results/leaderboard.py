"""Leaderboards: one row per (agent, model) summarising a frame of episode rows.

The input is what ``read_episodes`` returns (deduplicated), so a retried
infrastructure failure counts once, by its last attempt. Episodes whose last
attempt is still an infrastructure failure count as unsuccessful and are
shown in ``infra_errors``, so a flaky cluster is visible instead of hidden.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any, Literal

import pandas as pd
from rich import box
from rich.table import Table

from crabray.core.errors import ResultsError
from crabray.results.dataset import INFRA_REASONS

logger = logging.getLogger(__name__)

LEADERBOARD_COLUMNS = (
    "agent",
    "model",
    "episodes",
    "successes",
    "success_rate",
    "mean_score",
    "mean_completeness",
    "mean_steps",
    "tokens_in",
    "tokens_out",
    "infra_errors",
)
"""Columns of a leaderboard, in order."""

_NEEDED = (
    "agent",
    "model",
    "success",
    "score",
    "completeness",
    "steps",
    "tokens_in",
    "tokens_out",
    "termination_reason",
)
_INT_COLUMNS = ("episodes", "successes", "tokens_in", "tokens_out", "infra_errors")
_FLOAT_COLUMNS = ("success_rate", "mean_score", "mean_completeness", "mean_steps")
_DECIMALS = {"mean_steps": 1}
_DEFAULT_DECIMALS = 3


def leaderboard(episodes: pd.DataFrame) -> pd.DataFrame:
    """Summarise episode rows per (agent, model), best first.

    Args:
        episodes: Episode rows with at least the columns agent, model, success,
            score, completeness, steps, tokens_in, tokens_out, termination_reason
            (``read_episodes`` gives them). A null model is its own group.

    Returns:
        One row per (agent, model) with ``LEADERBOARD_COLUMNS``: counts and token
        sums as integers, rates and means as floats; sorted by success_rate then
        mean_score (both descending), then agent and model.

    Raises:
        ResultsError: A needed column is missing.
    """
    missing = [name for name in _NEEDED if name not in episodes.columns]
    if missing:
        raise ResultsError(
            f"cannot build a leaderboard: episode rows lack column(s) {missing}; "
            "read them with read_episodes() without restricting columns"
        )
    if episodes.empty:
        empty = pd.DataFrame({name: pd.Series(dtype=object) for name in LEADERBOARD_COLUMNS})
        return empty.astype(
            {**dict.fromkeys(_INT_COLUMNS, "int64"), **dict.fromkeys(_FLOAT_COLUMNS, "float64")}
        )
    rows = episodes.assign(
        success=episodes["success"].astype(bool),
        infra=episodes["termination_reason"].isin(INFRA_REASONS),
    )
    table = (
        rows.groupby(["agent", "model"], dropna=False, sort=False)
        .agg(
            episodes=("success", "size"),
            successes=("success", "sum"),
            mean_score=("score", "mean"),
            mean_completeness=("completeness", "mean"),
            mean_steps=("steps", "mean"),
            tokens_in=("tokens_in", "sum"),
            tokens_out=("tokens_out", "sum"),
            infra_errors=("infra", "sum"),
        )
        .reset_index()
    )
    table["success_rate"] = table["successes"] / table["episodes"]
    table = table.astype(
        {**dict.fromkeys(_INT_COLUMNS, "int64"), **dict.fromkeys(_FLOAT_COLUMNS, "float64")}
    )
    table = table.sort_values(
        ["success_rate", "mean_score", "agent", "model"],
        ascending=[False, False, True, True],
        kind="stable",
        na_position="last",
    )
    return table[list(LEADERBOARD_COLUMNS)].reset_index(drop=True)


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _cell(column: str, value: Any) -> str:
    """A value as shown to a person: floats rounded, missing values blank."""
    if _is_missing(value):
        return ""
    if isinstance(value, float):
        return f"{value:.{_DECIMALS.get(column, _DEFAULT_DECIMALS)}f}"
    return str(value)


def _numeric(table: pd.DataFrame, column: str) -> bool:
    return pd.api.types.is_numeric_dtype(table[column]) and not pd.api.types.is_bool_dtype(
        table[column]
    )


def _markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (pandas' own needs the optional ``tabulate``)."""

    def escape(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    columns = [str(name) for name in table.columns]
    header = "| " + " | ".join(escape(name) for name in columns) + " |"
    rule = "|" + "|".join("---:" if _numeric(table, c) else "---" for c in table.columns) + "|"
    lines = [header, rule]
    for row in table.itertuples(index=False, name=None):
        cells = (escape(_cell(column, value)) for column, value in zip(columns, row, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(table: pd.DataFrame, fmt: Literal["md", "csv", "json"]) -> str:
    """Render a leaderboard (or any frame) as text for a file or a report.

    ``md`` rounds floats for reading; ``csv`` and ``json`` keep full precision
    for machines. Missing values are blank in ``md`` and ``csv``, null in ``json``.

    Args:
        table: The frame to render, typically ``leaderboard(...)``'s.
        fmt: ``md`` (markdown table), ``csv`` (with header) or ``json`` (a list
            of row objects).

    Raises:
        ResultsError: An unknown format.
    """
    if fmt == "md":
        return _markdown(table)
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "json":
        # pandas turns NaN into null and numpy scalars into numbers; json lays it out.
        return json.dumps(json.loads(table.to_json(orient="records")), indent=2) + "\n"
    raise ResultsError(f"unknown leaderboard format {fmt!r}; use 'md', 'csv' or 'json'")


_SHORT_HEADERS = {
    "episodes": "n",
    "successes": "ok",
    "success_rate": "success",
    "mean_score": "score",
    "mean_completeness": "compl",
    "mean_steps": "steps",
    "tokens_in": "tok in",
    "tokens_out": "tok out",
    "infra_errors": "infra",
}
"""Terminal headers: the full column names do not fit an 80-column terminal."""


def to_rich_table(table: pd.DataFrame, title: str | None = None) -> Table:
    """The frame as a ``rich`` table for the terminal, rounded like the markdown one.

    Leaderboard columns get short headers and columns with no value at all
    (such as ``model`` for scripted agents) are left out, so the table fits
    80 columns; the md, csv and json renderings keep every column and name.

    Args:
        table: The frame to show, typically ``leaderboard(...)``'s.
        title: A title above the table.
    """
    table = table.loc[:, table.notna().any(axis=0) | (len(table) == 0)]
    rich_table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    columns = [str(name) for name in table.columns]
    for column in columns:
        header = _SHORT_HEADERS.get(column, column)
        rich_table.add_column(
            header,
            justify="right" if _numeric(table, column) else "left",
            no_wrap=True,
            min_width=len(header),
        )
    for row in table.itertuples(index=False, name=None):
        rich_table.add_row(
            *(_cell(column, value) for column, value in zip(columns, row, strict=True))
        )
    return rich_table
