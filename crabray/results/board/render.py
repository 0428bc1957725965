"""Renderings of leaderboard-like frames: Markdown, CSV, JSON, and terminal tables.

Files keep everything: ``md`` rounds floats for reading (by the rules of
``crabray.results.board.cells``, which the site follows too), ``csv`` and ``json``
keep full precision for machines, and all three keep every column under its
full name. The terminal gets a chosen subset: a leaderboard has more columns
than fit a terminal's width (80 characters by default), so ``to_rich_table``
shows the most telling ones (who, how many, success rate with its interval,
score, ..., cost) in priority order until the width is used up, under short
headers.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import pyarrow as pa
from rich import box
from rich.table import Table

from crabray.core.errors import ResultsError
from crabray.results.board.cells import format_cell, is_missing

if TYPE_CHECKING:  # a frame's caller has imported pandas; an Arrow table's need not
    import pandas as pd

logger = logging.getLogger(__name__)

Frame: TypeAlias = "pd.DataFrame | pa.Table"
"""What the renderings take: a pandas frame, or an Arrow table of plain columns."""

TERMINAL_WIDTH = 80
"""Widest terminal table ``to_rich_table`` builds by default."""

_SHORT_HEADERS = {
    "episodes": "n",
    "successes": "ok",
    "success_rate": "success",
    "success_ci": "95% CI",
    "verified_success_rate": "verif",
    "unverified_passes": "unverif",
    "unknown_trust_passes": "trust?",
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
    "benchmark_errors": "bench",
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

_NO_ERRORS = "errors, all zero"
"""Where error counts that are 0 in every row stand in ``_TERMINAL_PRIORITY``."""

# Statistic columns in the order the terminal gives them room; identity columns
# (agent, model, the breakdown column, task_id, change) always come first.
_TERMINAL_PRIORITY = (
    "episodes",
    "success_rate",
    "success_ci",
    "mean_score",
    "benchmark_errors",
    "infra_errors",
    "share",
    "success_rate_a",
    "success_rate_b",
    "mean_score_a",
    "mean_score_b",
    "pass@",
    "successes",
    # The grade's trust: ahead of pass^k and usage, behind the columns an 80-column
    # table has always shown (the run's summary names unverified passes in any case).
    # Shown only when some pass is not verified (``_says_something``).
    "verified_success_rate",
    "unverified_passes",
    "unknown_trust_passes",
    "pass^",
    # What an LLM agent's episodes cost, ahead of the other figures (an 80-column
    # table beside a dated model name has room for the cost, a wider one for tokens).
    "cost_usd",
    "tokens_in",
    "tokens_out",
    _NO_ERRORS,
    "cost_per_success",
    "mean_steps",
    "score_se",
    "mean_completeness",
    "mean_steps_a",
    "mean_steps_b",
    "episodes_a",
    "episodes_b",
    "mean_wall_time_sec",
    "model_calls",
)
_ERROR_COLUMNS = ("benchmark_errors", "infra_errors")
"""Counts of errors: a column of zeros says only "none", so it gives its place to the
usage columns and is shown where ``_NO_ERRORS`` stands, when there is room."""
_USAGE_COLUMNS = ("cost_usd", "cost_per_success", "model_calls", "tokens_in", "tokens_out")
_QUIET_WHEN_ZERO = (*_USAGE_COLUMNS, "unverified_passes", "unknown_trust_passes")
"""Columns the terminal leaves out when every row is 0: scripted agents' usage, and the
counts of passes not verified when every pass is."""
_PASS = re.compile(r"^pass([@^])(\d+)$")
_COLUMN_GAP = 3  # rich SIMPLE_HEAD: padding either side plus the (blank) divider
_EDGES = 2


@dataclass
class _Grid:
    """A small table as Python values per column: what the terminal and Markdown need.

    Both a pandas frame (``leaderboard``, ``breakdown``, ``compare_runs``) and an
    Arrow table (``leaderboard_table``, which ``crabray leaderboard`` uses without
    importing pandas) become one, so that they render alike.
    """

    columns: dict[str, list[Any]]
    numeric: dict[str, bool]

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def select(self, names: list[str]) -> _Grid:
        return _Grid({n: self.columns[n] for n in names}, {n: self.numeric[n] for n in names})


def _grid(table: Frame) -> _Grid:
    if isinstance(table, pa.Table):
        types = {field.name: field.type for field in table.schema}
        return _Grid(
            {name: table.column(name).to_pylist() for name in table.column_names},
            {
                name: pa.types.is_integer(kind)
                or pa.types.is_floating(kind)
                or pa.types.is_decimal(kind)
                for name, kind in types.items()
            },
        )
    import pandas as pd  # a frame was given: pandas is loaded already

    def numeric(column: pd.Series) -> bool:
        return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)

    return _Grid(
        {str(name): list(table[name]) for name in table.columns},
        {str(name): numeric(table[name]) for name in table.columns},
    )


def _markdown(table: Frame) -> str:
    """A GitHub-flavoured markdown table (pandas' own needs the optional ``tabulate``)."""

    def escape(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    grid = _grid(table)
    columns = grid.names
    header = "| " + " | ".join(escape(name) for name in columns) + " |"
    rule = "|" + "|".join("---:" if grid.numeric[c] else "---" for c in columns) + "|"
    lines = [header, rule]
    for row in zip(*grid.columns.values(), strict=True):
        cells = (
            escape(format_cell(column, value)) for column, value in zip(columns, row, strict=True)
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(table: Frame, fmt: Literal["md", "csv", "json"]) -> str:
    """Render a leaderboard (or any frame) as text for a file or a report.

    ``md`` rounds floats for reading; ``csv`` and ``json`` keep full precision
    for machines. Missing values are blank in ``md`` and ``csv``, null in ``json``.

    Args:
        table: The frame to render, typically ``leaderboard(...)``'s, or an Arrow
            table (``leaderboard_table(...)``'s: ``csv`` and ``json`` convert it
            to a frame, so they read the same whichever was given).
        fmt: ``md`` (markdown table), ``csv`` (with header) or ``json`` (a list
            of row objects).

    Raises:
        ResultsError: An unknown format.
    """
    if fmt == "md":
        return _markdown(table)
    frame = table.to_pandas() if isinstance(table, pa.Table) else table
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        # pandas turns NaN into null and numpy scalars into numbers; json lays it out.
        return json.dumps(json.loads(frame.to_json(orient="records")), indent=2) + "\n"
    raise ResultsError(f"unknown leaderboard format {fmt!r}; use 'md', 'csv' or 'json'")


def _priority(column: str, max_k: int, no_errors: set[str]) -> float:
    """Where a statistic column stands in the terminal's order; identity columns are -1.

    ``no_errors``: the error columns that are 0 in every row, which stand lower.
    """
    match = _PASS.match(column)
    if match:
        # Only the largest k reaches the terminal: pass@1 is the success rate again.
        return _TERMINAL_PRIORITY.index(f"pass{match[1]}") if int(match[2]) == max_k else math.inf
    if column in no_errors:
        return _TERMINAL_PRIORITY.index(_NO_ERRORS) + _ERROR_COLUMNS.index(column) / 10
    if column in _TERMINAL_PRIORITY:
        return _TERMINAL_PRIORITY.index(column)
    if column.startswith("success_ci_"):
        return math.inf  # shown merged as success_ci
    return -1


def _says_something(grid: _Grid, name: str) -> bool:
    """Whether a column tells the terminal's reader anything: it has a value, it is not a
    quiet column of zeros, and it is not the verified rate equal to the success rate in
    every row (every pass verified, or ``--verified-only``: the success column says it)."""
    values = grid.columns[name]
    if all(is_missing(value) for value in values):
        return False
    if name in _QUIET_WHEN_ZERO and all(is_missing(value) or value == 0 for value in values):
        return False
    if name == "verified_success_rate" and "success_rate" in grid.columns:
        pairs = zip(values, grid.columns["success_rate"], strict=True)
        return any(_differ(verified, rate) for verified, rate in pairs)
    return True


def _differ(a: Any, b: Any) -> bool:
    """Two cells of rates differ: one is missing and the other not, or their values do."""
    if is_missing(a) or is_missing(b):
        return is_missing(a) != is_missing(b)
    return not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def _view(grid: _Grid, max_width: int) -> _Grid:
    """``terminal_view`` of a grid (see there), the merged ``success_ci`` included."""
    shown = [name for name in grid.columns if _says_something(grid, name)]
    view = grid.select(shown)
    if {"success_ci_low", "success_ci_high", "success_rate"} <= set(shown):
        bounds = zip(grid.columns["success_ci_low"], grid.columns["success_ci_high"], strict=True)
        merged = ["" if is_missing(low) else f"{low:.2f}-{high:.2f}" for low, high in bounds]
        at = shown.index("success_rate") + 1
        names = [*shown[:at], "success_ci", *shown[at:]]
        view.columns["success_ci"], view.numeric["success_ci"] = merged, False
        view = view.select(names)
    ks = [int(m[2]) for m in map(_PASS.match, view.names) if m]
    max_k = max(ks, default=0)
    no_errors = {
        name
        for name in _ERROR_COLUMNS
        if name in view.columns and all(is_missing(v) or v == 0 for v in view.columns[name])
    }
    rank = {name: _priority(name, max_k, no_errors) for name in view.names}
    ranked = sorted((c for c in view.names if rank[c] != math.inf), key=rank.__getitem__)
    width = _EDGES - _COLUMN_GAP
    chosen: set[str] = set()
    for column in ranked:
        header = _SHORT_HEADERS.get(column, column)
        needed = max([len(header), *(len(format_cell(column, v)) for v in view.columns[column])])
        if rank[column] >= 0 and width + _COLUMN_GAP + needed > max_width:
            continue
        width += _COLUMN_GAP + needed
        chosen.add(column)
    return view.select([c for c in view.names if c in chosen])


def terminal_view(table: pd.DataFrame, max_width: int = TERMINAL_WIDTH) -> pd.DataFrame:
    """The columns of ``table`` worth showing in a terminal of ``max_width`` characters.

    Columns with no value at all (``model`` for scripted agents), usage columns
    that are all zero (tokens and cost of scripted agents), counts of unverified
    passes and of passes of unknown trust when there are none, and the verified
    success rate when it equals the success rate in every row are left out; the
    interval bounds are merged into one ``success_ci`` text column (``0.49-0.94``);
    of the pass@k columns only the largest k stays. Identity columns (agent,
    model, breakdown values, task ids) always stay; statistics are added in
    priority order while the table still fits, error counts that are zero in
    every row after cost and tokens.

    Args:
        table: A frame from ``leaderboard``, ``breakdown`` or ``compare_runs``.
        max_width: Widest rendering allowed (identity columns are kept even if
            they alone are wider).

    Returns:
        A new frame with the chosen columns in their original order.
    """
    if len(table) == 0:
        return table
    view = _view(_grid(table), max_width)
    frame = table.copy()
    frame.columns = [str(name) for name in frame.columns]
    if "success_ci" in view.numeric:
        frame["success_ci"] = view.columns["success_ci"]
    return frame[view.names]


def to_rich_table(
    table: Frame, title: str | None = None, *, max_width: int | None = TERMINAL_WIDTH
) -> Table:
    """The frame as a ``rich`` table for the terminal, rounded like the markdown one.

    The columns are chosen by ``terminal_view`` so that the table fits
    ``max_width``; the md, csv and json renderings keep every column and name.

    Args:
        table: The frame to show, typically ``leaderboard(...)``'s, or an Arrow
            table (``leaderboard_table(...)``'s).
        max_width: Widest table to build; None shows every column that has a value.
    """
    grid = _grid(table)
    if table.shape[0]:
        grid = _view(grid, max_width or 1_000_000)
    rich_table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for column in grid.names:
        header = _SHORT_HEADERS.get(column, column)
        right = grid.numeric[column] or column == "success_ci"
        rich_table.add_column(
            header, justify="right" if right else "left", no_wrap=True, min_width=len(header)
        )
    for row in zip(*grid.columns.values(), strict=True):
        rich_table.add_row(
            *(format_cell(column, value) for column, value in zip(grid.names, row, strict=True))
        )
    return rich_table
