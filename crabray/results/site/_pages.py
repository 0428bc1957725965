"""The site's pages as HTML text, from the Jinja2 templates in ``templates/``.

::

    index.html             every run shown: matrix, leaderboard, plots, breakdowns, episodes
    run-<RUN>.html         the same for one run (what the run picker links to)
    compare.html           two runs side by side, per task (chosen in the page)
    episodes/<id>.html     the task, the result, the conversation, every step, the graph

Rendering is pure: it takes ``SiteData`` and returns strings, so the static
builder and the ``crabray view`` server produce the very same pages.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import pandas as pd
from markupsafe import Markup

from crabray.results.board.cells import format_cell, is_missing
from crabray.results.board.trust import UNTRUSTED, row_trust, trust_text
from crabray.results.site import _plots
from crabray.results.site._conversation import (
    ConversationFormatError,
    parse_conversation,
    pretty_json,
)
from crabray.results.site._data import SiteData, breakdowns
from crabray.results.site._graph import Graph, GraphFormatError, graph_svg, parse_graph
from crabray.results.site._html import cell_text, render, table
from crabray.results.site._matrix import matrix, run_scores

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
_TASK_FIELDS = (
    ("task id", "task_id"),
    ("suite", "suite"),
    ("agent", "agent"),
    ("model", "model"),
    ("run", "run_id"),
    ("epoch", "epoch"),
    ("attempt", "attempt"),
    ("episode id", "episode_id"),
)
_RESULT_FIELDS = (
    ("ended by", "termination_reason"),
    ("attributed to", "attribution"),
    ("success", "success"),
    ("score", "score"),
    ("completeness", "completeness"),
    ("steps", "steps"),
    ("action errors", "action_errors"),
    ("tokens in", "tokens_in"),
    ("tokens out", "tokens_out"),
    ("model calls", "model_calls"),
    ("model latency (s)", "model_latency_sec"),
    ("cost", "cost_usd"),
    ("wall time (s)", "wall_time_sec"),
    ("setup time (s)", "setup_time_sec"),
    ("started", "started_at"),
    ("finished", "finished_at"),
    ("node", "node"),
    ("error type", "error_type"),
)
_PLOTS = (
    ("plot-success", "Success rate per agent and model; bars are 95% Wilson intervals."),
    (
        "plot-cost",
        "Mean cost per episode against success rate; red points form the Pareto front "
        "(no other configuration is both cheaper and more successful).",
    ),
    ("plot-steps", "Steps taken per episode, per agent and model."),
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


def _value(row: pd.Series, name: str) -> Any:
    return row[name] if name in row.index else None


FILTERS = (
    ("task", "task_id", "task"),
    ("agent", "agent", "agent"),
    ("outcome", "termination_reason", "outcome"),
    ("attribution", "attribution", "attributed to"),
)
"""The episode list's filters: (data attribute, column, label). The page's script fills each
filter's choices from its rows' attribute, so episodes that land live are choices too."""
SCORER_NODE = "graded_by_scorer"
"""The label of ``crabray.core.task.graded_by_scorer``, the one node of a scorer-graded task's
graph (results read only the result model of core, so the label is written here)."""
FOLD_LINES = 12
"""A call's result longer than this many lines is folded (a command's stdout and stderr)."""
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
        texts = {
            name: _text(record.get(name)) for name in {*_SEARCHED, *(c for _, c, _ in FILTERS)}
        }
        texts["attribution"] = texts["attribution"] or "agent"
        attributes = {attribute: texts[column] for attribute, column, _ in FILTERS}
        searched = (texts[name][:SEARCHED_CHARS] for name in _SEARCHED)
        attributes["search"] = " ".join(searched).lower()
        rows.append(attributes)
    return rows


def _text(value: Any) -> str:
    return "" if value is None or is_missing(value) else str(value)


def _figures(data: SiteData) -> list[dict[str, Any]]:
    drawn = (
        _plots.success_plot(data.board),
        _plots.cost_plot(data.episodes),
        _plots.steps_histogram(data.episodes),
    )
    return [
        {"id": figure_id, "svg": Markup(svg), "caption": caption}
        for (figure_id, caption), svg in zip(_PLOTS, drawn, strict=True)
        if svg is not None
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
        "filters": [(attribute, label) for attribute, _, label in FILTERS],
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
                for title, frame in breakdowns(data.episodes).items()
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


def graded_by_scorer(graph: Graph | None) -> bool:
    """Whether the graph is only the stand-in node of a task graded by its scorer.

    Such a node never passes: "0 of 1 evaluators passed" would contradict a
    solved episode, so the page shows the scorer's score instead of the graph.
    """
    return graph is not None and graph.labels == [SCORER_NODE]


def _graph_view(graph: Graph | None, passed: Any, caption: str) -> dict[str, Any] | None:
    if graph is None or graded_by_scorer(graph):
        return None
    indices = {int(index) for index in passed} if not is_missing(passed) else set()
    return {
        "caption": caption,
        "done": len(indices),
        "total": len(graph.labels),
        "svg": Markup(graph_svg(graph, indices)),
        "nodes": [
            {"label": label, "passed": index in indices} for index, label in enumerate(graph.labels)
        ],
    }


def _steps_view(
    steps: pd.DataFrame, graph: Graph | None, screenshots: ScreenshotSource
) -> list[dict[str, Any]]:
    views = []
    for number, calls in [] if steps.empty else steps.groupby("step", sort=True):
        first = calls.iloc[0]
        shot = _value(first, "screenshot_path")
        src = screenshots(str(shot)) if not is_missing(shot) and shot else None
        observation = _value(first, "observation")
        shown = int(cast(int, number)) + 1
        views.append(
            {
                "number": shown,
                "screenshot": src,
                "screenshot_missing": None if src is not None or is_missing(shot) else shot or None,
                "observation": None if is_missing(observation) else observation,
                "calls": [_call_view(call) for call in calls.to_dict("records")],
                "graph": _graph_view(
                    graph, _value(calls.iloc[-1], "graph_passed"), f"after step {shown}"
                ),
            }
        )
    return views


def _call_view(call: dict[Hashable, Any]) -> dict[str, Any]:
    message = call.get("agent_message")
    error = call.get("error")
    duration: Any = call.get("duration_sec")
    env = call.get("env")
    result = str(call.get("result") or "")
    return {
        "message": None if is_missing(message) or message == "" else message,
        "action": call["action"],
        "env": None if is_missing(env) else env,
        "arguments": pretty_json(str(call.get("arguments_json") or "{}")),
        "error": None if is_missing(error) else error,
        "result": result,
        "result_lines": result.count("\n") + 1,
        "duration": None if is_missing(duration) else f"{float(duration):.2f} s",
    }


def _checkpoints(checkpoints: Any) -> dict[str, Any] | None:
    if is_missing(checkpoints) or not len(checkpoints):
        return None
    rows = [{"result": p["result"], "total": p["total"]} for p in checkpoints]
    return {
        "rows": rows,
        "earned": sum(int(p["result"]) for p in rows),
        "total": sum(int(p["total"]) for p in rows),
    }


def _grade(row: pd.Series, attribution: str) -> dict[str, str] | None:
    """The line that says whether the grade is verified, and why not (None when the
    episode has no grade on the agent): what the leaderboard counted it as."""
    if attribution != "agent":
        return None
    trust = row_trust(_value(row, "grader_trusted"))
    reason = _value(row, "grader_untrusted_reason")
    text = trust_text(trust, None if is_missing(reason) else str(reason))
    return {"css": "warn" if trust == UNTRUSTED else "muted", "text": f"grade {text}"}


def _verdict(row: pd.Series, attribution: str, by_scorer: bool) -> dict[str, str]:
    """The line that says how the episode ended: solved or not, its score, what ended it.

    Success and score are the grade; the termination reason only says what stopped the
    episode (``agent_complete`` is the agent saying it is done, right or not).
    """
    reason = str(row["termination_reason"])
    if attribution != "agent":
        return {
            "css": "warn",
            "text": f"{attribution} error, not the agent's (not scored); ended by {reason}",
        }
    solved = bool(row["success"])
    graded = "graded by the task's scorer after the agent finished, " if by_scorer else ""
    return {
        "css": "ok" if solved else "bad",
        "text": f"{'solved' if solved else 'not solved'} ({graded}score "
        f"{float(row['score']):.2f}); ended by {reason}",
    }


def _raw_conversation(conversation_json: Any) -> str | None:
    """The conversation as stored, indented: what was sent to the model and what came back."""
    if is_missing(conversation_json) or not conversation_json:
        return None
    return pretty_json(str(conversation_json))


def render_episode(data: SiteData, episode_id: str, screenshots: ScreenshotSource) -> str | None:
    """The page of one episode; None if the dataset has no such episode.

    Args:
        data: The dataset.
        episode_id: The episode's id.
        screenshots: Gives each screenshot's image URL (the static site copies the
            file; the server serves it).
    """
    row = data.episode(episode_id)
    if row is None:
        return None
    steps = data.steps_of(episode_id)
    graph_note = None
    try:
        graph = parse_graph(_value(row, "graph_json"))
    except GraphFormatError as exc:
        logger.warning("episode %s: cannot draw its evaluator graph: %s", episode_id, exc)
        graph, graph_note = None, str(exc)
    conversation_note = None
    try:
        conversation = parse_conversation(_value(row, "conversation_json"))
    except ConversationFormatError as exc:
        logger.warning("episode %s: cannot show its conversation: %s", episode_id, exc)
        conversation, conversation_note = [], str(exc)
    tags = _value(row, "tags")
    final_passed = steps.iloc[-1]["graph_passed"] if len(steps) else []
    error = _value(row, "error")
    model = _value(row, "model")
    before, after = data.neighbours(episode_id)
    attribution = _value(row, "attribution") or "agent"
    return render(
        "episode.html",
        site_title=data.title,
        task_id=row["task_id"],
        agent=row["agent"],
        model=None if is_missing(model) else model,
        run_id=row["run_id"],
        epoch=row["epoch"],
        description=_value(row, "description") or "",
        tags=[] if is_missing(tags) else list(tags),
        task_facts=[(label, format_cell(name, _value(row, name))) for label, name in _TASK_FIELDS],
        verdict=_verdict(row, attribution, graded_by_scorer(graph)),
        grade=_grade(row, attribution),
        attribution=attribution,
        previous=None if before is None else episode_page_name(before),
        next=None if after is None else episode_page_name(after),
        result_facts=[
            (label, cell_text(name, _value(row, name))) for label, name in _RESULT_FIELDS
        ],
        error=None if is_missing(error) else error,
        checkpoints=_checkpoints(_value(row, "checkpoints")),
        graph_note=graph_note,
        final_graph=_graph_view(graph, final_passed, "final evaluator graph"),
        conversation=conversation,
        conversation_note=conversation_note,
        raw_conversation=_raw_conversation(_value(row, "conversation_json")),
        setup_output=_text(_value(row, "setup_output")) or None,
        setup_failed=row["termination_reason"] == "setup_error",
        steps=_steps_view(steps, graph, screenshots),
        FOLD_LINES=FOLD_LINES,
        live=None,
        version="",
    )
