"""Renderings of leaderboard-like frames: Markdown, CSV, JSON, and terminal tables.

Files keep everything: ``md`` rounds floats for reading (by the rules of
``crabray.results.cells``, which the site follows too), ``csv`` and ``json``
keep full precision for machines, and all three keep every column under its
full name. The terminal gets a chosen subset: a leaderboard has more columns
than fit 80 characters, so ``to_rich_table`` shows the most telling ones (who,
how many, success rate with its interval, score, ...) in priority order until
the width is used up, under short headers.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Literal

import pandas as pd
from rich import box
from rich.table import Table

from crabray.core.errors import ResultsError
from crabray.results.cells import format_cell, is_missing

logger = logging.getLogger(__name__)

TERMINAL_WIDTH = 80
"""Widest terminal table ``to_rich_table`` builds by default."""

_SHORT_HEADERS = {
    "episodes": "n",
    "successes": "ok",
    "success_rate": "success",
    "success_ci": "95% CI",
    "mean_score": "score",
    "score_se": "±se",
    "mean_completeness": "compl",
    "mean_steps": "steps",
    "tokens_in": "tok in",
    "tokens_out": "tok out",
    "model_calls": "calls",
    "cost_usd": "cost $",
    "cost_per_success": "$/ok",
    "mean_wall_time_sec": "time s",
    "infra_errors": "infra",
    "termination_reason": "reason",
    "episodes_a": "n A",
    "episodes_b": "n B",
    "success_rate_a": "succ A",
    "success_rate_b": "succ B",
    "mean_score_a": "score A",
    "mean_score_b": "score B",
    "mean_steps_a": "steps A",
    "mean_steps_b": "steps B",
}
"""Terminal headers: the full column names do not fit an 80-column terminal."""

# Statistic columns in the order the terminal gives them room; identity columns
# (agent, model, the breakdown column, task_id, change) always come first.
_TERMINAL_PRIORITY = (
    "episodes",
    "success_rate",
    "success_ci",
    "mean_score",
    "infra_errors",
    "share",
    "success_rate_a",
    "success_rate_b",
    "mean_score_a",
    "mean_score_b",
    "pass@",
    "pass^",
    "cost_usd",
    "cost_per_success",
    "mean_steps",
    "score_se",
    "successes",
    "mean_completeness",
    "mean_steps_a",
    "mean_steps_b",
    "episodes_a",
    "episodes_b",
    "mean_wall_time_sec",
    "model_calls",
    "tokens_in",
    "tokens_out",
)
_USAGE_COLUMNS = ("cost_usd", "cost_per_success", "model_calls", "tokens_in", "tokens_out")
_PASS = re.compile(r"^pass([@^])(\d+)$")
_COLUMN_GAP = 3  # rich SIMPLE_HEAD: padding either side plus the (blank) divider
_EDGES = 2


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
        cells = (
            escape(format_cell(column, value)) for column, value in zip(columns, row, strict=True)
        )
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


def _priority(column: str, max_k: int) -> float:
    """Where a statistic column stands in the terminal's order; identity columns are -1."""
    match = _PASS.match(column)
    if match:
        # Only the largest k reaches the terminal: pass@1 is the success rate again.
        return _TERMINAL_PRIORITY.index(f"pass{match[1]}") if int(match[2]) == max_k else math.inf
    if column in _TERMINAL_PRIORITY:
        return _TERMINAL_PRIORITY.index(column)
    if column.startswith("success_ci_"):
        return math.inf  # shown merged as success_ci
    return -1


def terminal_view(table: pd.DataFrame, max_width: int = TERMINAL_WIDTH) -> pd.DataFrame:
    """The columns of ``table`` worth showing in a terminal of ``max_width`` characters.

    Columns with no value at all (``model`` for scripted agents) and usage columns
    that are all zero (tokens and cost of scripted agents) are left out; the
    interval bounds are merged into one ``success_ci`` text column (``0.49-0.94``);
    of the pass@k columns only the largest k stays. Identity columns (agent,
    model, breakdown values, task ids) always stay; statistics are added in
    priority order while the table still fits.

    Args:
        table: A frame from ``leaderboard``, ``breakdown`` or ``compare_runs``.
        max_width: Widest rendering allowed (identity columns are kept even if
            they alone are wider).

    Returns:
        A new frame with the chosen columns in their original order.
    """
    if len(table) == 0:
        return table
    view = table.loc[:, table.notna().any(axis=0)].copy()
    for name in _USAGE_COLUMNS:
        if name in view.columns and (view[name].fillna(0) == 0).all():
            view = view.drop(columns=name)
    if {"success_ci_low", "success_ci_high", "success_rate"} <= set(view.columns):
        bounds = zip(table["success_ci_low"], table["success_ci_high"], strict=True)
        merged = ["" if is_missing(low) else f"{low:.2f}-{high:.2f}" for low, high in bounds]
        view.insert(list(view.columns).index("success_rate") + 1, "success_ci", merged)
    ks = [int(m[2]) for m in map(_PASS.match, view.columns) if m]
    max_k = max(ks, default=0)
    ranked = sorted(
        (c for c in view.columns if _priority(c, max_k) != math.inf),
        key=lambda c: _priority(c, max_k),
    )
    width = _EDGES - _COLUMN_GAP
    chosen: set[str] = set()
    for column in ranked:
        header = _SHORT_HEADERS.get(column, column)
        needed = max([len(header), *(len(format_cell(column, v)) for v in view[column])])
        if _priority(column, max_k) >= 0 and width + _COLUMN_GAP + needed > max_width:
            continue
        width += _COLUMN_GAP + needed
        chosen.add(column)
    return view[[c for c in view.columns if c in chosen]]


def to_rich_table(
    table: pd.DataFrame, title: str | None = None, *, max_width: int | None = TERMINAL_WIDTH
) -> Table:
    """The frame as a ``rich`` table for the terminal, rounded like the markdown one.

    The columns are chosen by ``terminal_view`` so that the table fits
    ``max_width``; the md, csv and json renderings keep every column and name.

    Args:
        table: The frame to show, typically ``leaderboard(...)``'s.
        title: A title above the table.
        max_width: Widest table to build; None shows every column that has a value.
    """
    table = terminal_view(table, max_width or 1_000_000)
    rich_table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    columns = [str(name) for name in table.columns]
    for column in columns:
        header = _SHORT_HEADERS.get(column, column)
        right = _numeric(table, column) or column == "success_ci"
        rich_table.add_column(
            header, justify="right" if right else "left", no_wrap=True, min_width=len(header)
        )
    for row in table.itertuples(index=False, name=None):
        rich_table.add_row(
            *(format_cell(column, value) for column, value in zip(columns, row, strict=True))
        )
    return rich_table
