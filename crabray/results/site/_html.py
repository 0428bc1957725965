"""The site's Jinja2 environment and the table models its templates draw.

Templates autoescape every value: task descriptions, agent messages, tool
arguments and even agent names are untrusted input. The only markup passed
through unescaped is built by this package from escaped parts (the evaluator
graph's SVG) or by matplotlib (the plots, whose text it escapes itself), and
is marked with ``Markup`` where it is made.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from crabray.results.board.cells import format_cell, is_missing, plain
from crabray.results.site._assets import CONTENT_SECURITY_POLICY, CSS, EPISODE_SCRIPT, SCRIPT

_HEADERS = {
    "agent": "Agent",
    "model": "Model",
    "suite": "Suite",
    "run_id": "Run",
    "task_id": "Task",
    "tag": "Tag",
    "termination_reason": "Ended by",
    "success_rate": "Success rate",
    "success_ci_low": "95% CI low",
    "success_ci_high": "95% CI high",
    "verified_success_rate": "Verified success rate",
    "unverified_passes": "Unverified passes",
    "unknown_trust_passes": "Passes of unknown trust",
    "grader_trusted": "Grade verified",
    "mean_score": "Mean score",
    "score_se": "Score SE",
    "mean_cost_usd": "Mean cost",
    "cost_usd": "Cost",
    "total_cost_usd": "Total cost",
    "cost_per_success": "Cost per success",
    "mean_steps": "Mean steps",
    "benchmark_errors": "Benchmark errors",
    "infra_errors": "Infra errors",
    "wall_time_sec": "Wall time (s)",
    "mean_wall_time_sec": "Mean wall time (s)",
    "finished_at": "Finished",
    "episodes": "Episodes",
    "successes": "Successes",
    "share": "Share",
}


def esc(value: object) -> str:
    """``value`` as text safe inside an element or a quoted attribute (for hand-built SVG)."""
    return html.escape(str(value), quote=True)


def human(column: str) -> str:
    """A column's header as people read it: ``mean_cost_usd`` -> ``Mean cost``.

    Known columns have a fixed label; others lose their underscores and units
    suffix words stay readable (``pass_at_3`` -> ``Pass at 3``, ``pass^k`` kept).
    """
    if column in _HEADERS:
        return _HEADERS[column]
    text = re.sub(r"_sec$", " (s)", column)
    text = re.sub(r"_usd$", " (USD)", text).replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def cell_text(column: str, value: Any) -> str:
    """A value as the site shows it: the terminal's rule, with a dollar sign on costs."""
    text = format_cell(column, value)
    if text and (column.startswith("cost") or column.endswith("cost_usd")):
        return f"${text}"
    return text


def sort_value(value: Any) -> str | None:
    """The ``data-sort`` key of a cell when its text would sort wrongly (numbers, times)."""
    value = plain(value)
    if is_missing(value):
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return None


@dataclass(frozen=True)
class Cell:
    """One table cell as a template draws it."""

    text: str
    sort: str | None = None
    numeric: bool = False
    css: str = ""
    link: str | None = None


@dataclass(frozen=True)
class Header:
    """One column header: its label and whether its cells are numbers."""

    label: str
    column: str
    numeric: bool = False


@dataclass
class Table:
    """A sortable table: an id tests and links find it by, headers, rows of cells."""

    table_id: str
    headers: list[Header]
    rows: list[list[Cell]] = field(default_factory=list)
    caption: str | None = None
    row_data: list[dict[str, str]] = field(default_factory=list)
    """Per row, ``data-*`` attributes (name without the prefix) the page's filters read."""


def cell(column: str, value: Any, *, link: str | None = None) -> Cell:
    """One cell: formatted text, numeric alignment and a raw sort key where useful."""
    value = plain(value)
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    css = ""
    if column == "success" and isinstance(value, bool):
        css = "ok" if value else "bad"
    return Cell(cell_text(column, value), sort_value(value), numeric, css, link)


def table(
    frame: pd.DataFrame,
    *,
    table_id: str,
    links: Sequence[str | None] | None = None,
    link_column: str | None = None,
    caption: str | None = None,
    row_data: Sequence[dict[str, str]] | None = None,
) -> Table:
    """A sortable table of ``frame``'s rows, every column in order.

    Args:
        frame: The rows.
        table_id: The table's ``id``.
        links: One href per row (or None), applied to ``link_column``'s cell.
        link_column: The column whose cell links to the row's page.
        caption: Text above the table.
        row_data: Per row, ``data-*`` attributes for the page's script (filters, search).
    """
    headers = [
        Header(
            human(str(name)),
            str(name),
            pd.api.types.is_numeric_dtype(frame[name])
            and not pd.api.types.is_bool_dtype(frame[name]),
        )
        for name in frame.columns
    ]
    columns = [str(name) for name in frame.columns]
    rows = []
    for position, row in enumerate(frame.itertuples(index=False, name=None)):
        href = links[position] if links is not None else None
        rows.append(
            [
                cell(column, value, link=href if column == link_column else None)
                for column, value in zip(columns, row, strict=True)
            ]
        )
    return Table(table_id, headers, rows, caption, list(row_data or []))


ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("crabray.results.site", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
ENVIRONMENT.globals.update(
    CSS=Markup(CSS),
    SCRIPT=Markup(SCRIPT),
    EPISODE_SCRIPT=Markup(EPISODE_SCRIPT),
    CSP=CONTENT_SECURITY_POLICY,
)
ENVIRONMENT.filters["human"] = human
ENVIRONMENT.filters["cell"] = cell_text


def render(template: str, **context: Any) -> str:
    """Render one of the package's templates with autoescaping."""
    return ENVIRONMENT.get_template(template).render(**context)
