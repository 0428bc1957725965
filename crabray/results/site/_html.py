"""HTML building blocks shared by the site's pages: the page frame, tables, cells.

Every piece of text that reaches a page passes through ``esc`` (or is built
from escaped parts here): task descriptions, agent messages, action results
and even agent names are untrusted input.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from crabray.results.cells import format_cell, is_missing, plain
from crabray.results.site._assets import CONTENT_SECURITY_POLICY, CSS, SCRIPT

NUMERIC_CLASS = ' class="num"'


def esc(value: object) -> str:
    """``value`` as text safe inside an element or a quoted attribute."""
    return html.escape(str(value), quote=True)


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


def cell(column: str, value: Any, *, link: str | None = None) -> str:
    """One ``<td>``: escaped text, numeric alignment and a raw sort key where useful."""
    value = plain(value)
    key = sort_value(value)
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    attributes = NUMERIC_CLASS if numeric else ""
    if key is not None:
        attributes += f' data-sort="{esc(key)}"'
    text = esc(format_cell(column, value))
    if column == "success" and isinstance(value, bool):
        text = f'<span class="{"ok" if value else "bad"}">{text}</span>'
    if link is not None:
        text = f'<a href="{esc(link)}">{text}</a>'
    return f"<td{attributes}>{text}</td>"


def table_html(
    frame: pd.DataFrame,
    *,
    table_id: str,
    links: Sequence[str | None] | None = None,
    link_column: str | None = None,
    caption: str | None = None,
) -> str:
    """A sortable table of ``frame``'s rows.

    Args:
        frame: The rows; every column is shown, in order.
        table_id: The table's ``id`` (tests and links find it by that).
        links: One href per row (or None), applied to ``link_column``'s cell.
        link_column: The column whose cell links to the row's page.
        caption: Text above the table.
    """
    numeric = {
        name
        for name in frame.columns
        if pd.api.types.is_numeric_dtype(frame[name])
        and not pd.api.types.is_bool_dtype(frame[name])
    }
    head = "".join(
        f'<th scope="col"{NUMERIC_CLASS if name in numeric else ""}>{esc(name)}</th>'
        for name in frame.columns
    )
    columns = [str(name) for name in frame.columns]
    rows = []
    for position, row in enumerate(frame.itertuples(index=False, name=None)):
        href = links[position] if links is not None else None
        cells = "".join(
            cell(column, value, link=href if column == link_column else None)
            for column, value in zip(columns, row, strict=True)
        )
        rows.append(f"<tr>{cells}</tr>")
    caption_html = f"<caption class='muted'>{esc(caption)}</caption>" if caption else ""
    return (
        f'<div class="table-wrap"><table class="sortable" id="{esc(table_id)}">{caption_html}'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def facts(rows: Iterable[tuple[str, str, Any]]) -> str:
    """A definition list of labelled values (the task and result boxes of an episode).

    Args:
        rows: ``(label, column, value)``: the value is formatted by its column's rule.
    """
    items = "".join(
        f"<dt>{esc(label)}</dt><dd>{esc(format_cell(column, value))}</dd>"
        for label, column, value in rows
    )
    return f'<dl class="facts">{items}</dl>'


def page(title: str, body: str, *, root: str = "") -> str:
    """A whole HTML document: inline stylesheet and script, no external resource.

    Args:
        title: The page title (escaped here).
        body: The body's HTML, already escaped.
        root: The relative path from this page to the site root ("" or "../"),
            for the navigation link.
    """
    nav = f'<nav><a href="{root}index.html">&larr; leaderboard</a></nav>' if root else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CONTENT_SECURITY_POLICY)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # An empty icon: browsers would otherwise request /favicon.ico and log a 404.
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body>{nav}{body}<script>{SCRIPT}</script></body></html>\n"
    )
