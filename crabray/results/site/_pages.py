"""The site's pages as HTML text, from the Jinja2 templates in ``templates/``.

::

    index.html             every run shown: matrix, leaderboard, plots, breakdowns, episodes
    run-<RUN>.html         the same for one run (what the run picker links to)
    compare.html           two runs side by side, per task (chosen in the page)

Episode pages and the side-by-side page are ``_episode``'s.

Rendering is pure: it takes ``SiteData`` and returns strings, so the static
builder and the ``crabray view`` server produce the very same pages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pandas as pd
from markupsafe import Markup

from crabray.results.board.cells import is_missing
from crabray.results.site import _plots
from crabray.results.site._data import SiteData, breakdowns
from crabray.results.site._html import render, table
from crabray.results.site._matrix import matrix, run_scores
from crabray.results.site._why import outcome_of
from crabray.results.store.audit import AUDITS_DIR

logger = logging.getLogger(__name__)

EPISODES_DIR = "episodes"
FILES_DIR = "files"
COMPARE_PAGE = "compare.html"
LOGS_DIR = "logs"
"""Where a site keeps each run's log (``OUT/runs/<RUN>.log``), as ``logs/<RUN>.log``."""
ScreenshotSource = Callable[[str], str | None]
"""Maps a step's ``screenshot_path`` to the ``src`` of its image on an episode page, or None
when the file is missing."""

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_EPISODE_COLUMNS = (
    "run_id",
    "task_id",
    "agent",
    "model",
    "epoch",
    "attempt",
    "termination_reason",
    "attribution",
    "success",
    "grader_trusted",
    "score",
    "completeness",
    "steps",
    "cost_usd",
    "wall_time_sec",
    "finished_at",
)
_PLOTS = (
    (
        "plot-success",
        "Success rate of each leaderboard row; bars are its 95% interval (benchmark and "
        "infrastructure errors are in no rate).",
    ),
    (
        "plot-cost",
        "Each leaderboard row's mean cost per graded episode (its cost over its episodes) "
        "against its success rate; red points form the Pareto front (no other configuration "
        "is both cheaper and more successful).",
    ),
    (
        "plot-steps",
        "Steps taken per graded episode, per leaderboard row (benchmark and infrastructure "
        "errors left out).",
    ),
)


def episode_page_name(episode_id: str) -> str:
    """The file name of an episode's page: its id, or a hash of it if the id is not file-safe."""
    if _SAFE_NAME.match(episode_id):
        return f"{episode_id}.html"
    return f"id-{hashlib.sha256(episode_id.encode()).hexdigest()[:32]}.html"


def run_log_url(run_id: str) -> str:
    """Where a run page links the run's log (a site copies it there, the viewer serves it)."""
    return f"{LOGS_DIR}/{run_id}.log"


def run_page_name(run_id: str) -> str:
    """The file name of a run's page (run ids are file-safe: ``check_run_id``)."""
    return f"run-{run_id}.html"


def screenshot_url(relative: str) -> str:
    """The URL, relative to an episode page, of a screenshot copied (or served) under files/."""
    return f"../{FILES_DIR}/" + quote(relative.replace("\\", "/"), safe="/")


@dataclass(frozen=True)
class Live:
    """How a served page keeps itself current: the JSON it polls and the version it shows."""

    url: str
    version: str


FILTERS = (
    ("outcome", "outcome"),
    ("attribution", "attributed to"),
    ("agent", "agent"),
    ("task", "task"),
    ("tag", "tag"),
    ("ended", "ended by"),
)
"""The episode list's filters: (data attribute, label). The page's script fills each
filter's choices from its rows' attribute, so episodes that land live are choices too.
``outcome`` is pass, fail or error (``outcome_of``); ``tag`` holds a JSON list (an
episode has several tags: the filter matches any of them)."""
MULTI_VALUED = frozenset({"tag"})
"""Filters whose row attribute is a JSON list of values rather than one value."""
_SEARCHED = ("task_id", "agent", "model", "termination_reason", "error", "description")
"""What the episode list's search box looks in."""
SEARCHED_CHARS = 1000
"""Of each searched text, the first this many characters: ten thousand listed episodes
with long instructions and tracebacks would otherwise make the index page huge."""


def filter_data(listed: pd.DataFrame) -> list[dict[str, str]]:
    """Per listed episode, the ``data-*`` attributes the page's filters and search read.

    The search text holds the instruction and the error, which the table does not show:
    "which episodes failed on a permission error" is answered without opening each one.
    """
    rows = []
    for record in listed.to_dict("records"):
        texts = {name: _text(record.get(name)) for name in _SEARCHED}
        attribution = _text(record.get("attribution")) or "agent"
        reason = _text(record.get("termination_reason"))
        tags: Any = record.get("tags")
        searched = (texts[name][:SEARCHED_CHARS] for name in _SEARCHED)
        rows.append(
            {
                "outcome": outcome_of(reason, bool(record.get("success")), attribution),
                "attribution": attribution,
                "agent": texts["agent"],
                "task": texts["task_id"],
                "tag": json.dumps(
                    [] if tags is None or is_missing(tags) else [str(t) for t in tags]
                ),
                "ended": reason,
                "search": " ".join(searched).lower(),
            }
        )
    return rows


def _text(value: Any) -> str:
    return "" if value is None or is_missing(value) else str(value)


def _figures(data: SiteData) -> list[dict[str, Any]]:
    """The page's plots, each drawn from its leaderboard's rows (or their graded episodes),
    with the numbers drawn (``data-points``, JSON) kept beside the figure."""
    drawn = (
        _plots.success_plot(data.board),
        _plots.cost_plot(data.board),
        _plots.steps_histogram(data.episodes, data.by),
    )
    return [
        {
            "id": figure_id,
            "svg": Markup(plot.svg),
            "caption": caption,
            "points": json.dumps(plot.points, sort_keys=True),
        }
        for (figure_id, caption), plot in zip(_PLOTS, drawn, strict=True)
        if plot is not None
    ]


def _scope(data: SiteData) -> str:
    if data.scope:
        return data.scope
    if data.run_id is not None:
        return f"run {data.run_id}"
    return f"all runs ({len(data.runs)})"


def render_index(data: SiteData, live: Live | None = None, run_log: str | None = None) -> str:
    """The page of ``data``'s scope: matrix, leaderboard, plots, breakdowns, episodes.

    Args:
        data: The dataset (every run, or the one run of a run page).
        live: Set when served by ``crabray view``: the page polls for new episodes.
        run_log: The link to the run's log, on a run page whose run has one.
    """
    context: dict[str, Any] = {
        "title": data.title,
        "description": data.description,
        "scope": _scope(data),
        "runs": data.runs,
        "run_id": data.run_id,
        "episodes": len(data.episodes),
        "live": live.url if live else None,
        "version": live.version if live else "",
        "run_log": run_log,
        "audited": (data.out_dir / AUDITS_DIR).is_dir(),
        "filters": [(attribute, label, attribute in MULTI_VALUED) for attribute, label in FILTERS],
    }
    if not data.episodes.empty:
        listed = data.listed
        columns = [name for name in _EPISODE_COLUMNS if name in listed.columns]
        listed_ids = {str(episode_id) for episode_id in listed["episode_id"]}
        links = [f"{EPISODES_DIR}/{episode_page_name(str(e))}" for e in listed["episode_id"]]
        context.update(
            matrix=matrix(
                data.episodes,
                lambda episode_id: (
                    f"{EPISODES_DIR}/{episode_page_name(episode_id)}"
                    if episode_id in listed_ids
                    else None
                ),
            ),
            board=table(data.board, table_id="leaderboard"),
            figures=_figures(data),
            breakdowns=[
                (title, table(frame, table_id="breakdown-" + re.sub(r"[^a-z0-9]+", "-", title)))
                for title, frame in breakdowns(data.episodes, data.by).items()
            ],
            listing=table(
                listed[columns],
                table_id="episodes",
                links=links,
                link_column="task_id",
                row_data=filter_data(listed),
            ),
            truncated=len(listed) < len(data.episodes),
        )
    return render("index.html", **context)


def render_compare(data: SiteData) -> str:
    """The comparison page: two runs chosen in the page, per-task scores side by side."""
    return render(
        "compare.html",
        title=data.title,
        description=data.description,
        runs=data.runs,
        scores=run_scores(data.all_episodes),
        live=None,
        version="",
    )


def render_message(heading: str, detail: str = "") -> str:
    """A plain page with a heading and an optional preformatted detail (errors, not found)."""
    return render("message.html", heading=heading, detail=detail, live=None, version="")
