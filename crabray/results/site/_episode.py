"""An episode's page, and the page that shows two episodes side by side.

::

    episodes/<id>.html   the verdict, whose doing it is and the cause (first screen);
                         the instruction; the transcript (conversation beside the steps);
                         the grading (evaluator graph, checkpoints); logs, then the
                         metadata, folded
    side-by-side.html    two episode pages next to each other: ?a=<page>&b=<page>

The order is what a reader looking for "why" needs first, as Inspect's sample view
opens on its transcript: the answer, then the story, then the details. The
side-by-side page is static: its script frames the two pages its address names, so
the static site pairs any two episodes without a page per pair.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any, cast

import pandas as pd
from markupsafe import Markup

from crabray.results.board.cells import format_cell, is_missing
from crabray.results.site._assets import FRAMING_POLICY
from crabray.results.site._conversation import (
    ConversationFormatError,
    parse_conversation,
    pretty_json,
)
from crabray.results.site._data import SiteData
from crabray.results.site._graph import Graph, GraphFormatError, graph_svg, parse_graph
from crabray.results.site._html import cell_text, render
from crabray.results.site._pages import ScreenshotSource, episode_page_name
from crabray.results.site._why import (
    ATTRIBUTION_TEXT,
    cause,
    grade,
    graded_by_scorer,
    outcome_of,
    verdict,
)

logger = logging.getLogger(__name__)

SIDE_BY_SIDE_PAGE = "side-by-side.html"
FOLD_LINES = 12
"""A call's result longer than this many lines is folded (a command's stdout and stderr)."""
MAX_PEERS = 12
"""Episodes of the same task an episode page offers to open beside it, at most."""
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
    ("error", "error"),
)


def _value(row: pd.Series, name: str) -> Any:
    return row[name] if name in row.index else None


def _text(value: Any) -> str:
    return "" if value is None or is_missing(value) else str(value)


def side_by_side_url(first: str, second: str, root: str = "") -> str:
    """The address of the side-by-side page of two episodes (by id), from ``root``."""
    a = episode_page_name(first).removesuffix(".html")
    b = episode_page_name(second).removesuffix(".html")
    return f"{root}{SIDE_BY_SIDE_PAGE}?a={a}&b={b}"


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


def _raw_conversation(conversation_json: Any) -> str | None:
    """The conversation as stored, indented: what was sent to the model and what came back."""
    if is_missing(conversation_json) or not conversation_json:
        return None
    return pretty_json(str(conversation_json))


def _peer_label(peer: dict[Hashable, Any], row: pd.Series) -> str:
    """How an episode page names another episode of its task: who ran it and how it ended."""
    model = _text(peer.get("model"))
    attribution = _text(peer.get("attribution")) or "agent"
    outcome = outcome_of(str(peer["termination_reason"]), bool(peer["success"]), attribution)
    graded = (
        f"score {float(peer['score']):.2f}"
        if attribution == "agent"
        else f"{attribution} error, not scored"
    )
    label = f"{peer['agent']}{f' / {model}' if model else ''}: {outcome} ({graded})"
    if peer["run_id"] != row["run_id"]:
        label += f" · run {peer['run_id']}"
    if int(peer.get("epoch") or 0):
        label += f" · epoch {peer['epoch']}"
    return label


_PEER_COLUMNS = (
    "episode_id",
    "suite",
    "task_id",
    "agent",
    "model",
    "run_id",
    "epoch",
    "termination_reason",
    "success",
    "score",
    "attribution",
)


class _PeerIndex:
    """Every episode's row, grouped by (suite, task), newest run first: read once per dataset,
    since a site renders thousands of pages from the same one."""

    def __init__(self, every: pd.DataFrame) -> None:
        self.every = every
        columns = [name for name in _PEER_COLUMNS if name in every.columns]
        ordered = every[columns].sort_values(
            ["run_id", "agent", "epoch"], ascending=[False, True, True], kind="stable"
        )
        self.by_task: dict[tuple[str, str], list[dict[Hashable, Any]]] = {}
        for record in ordered.to_dict("records"):
            key = (str(record.get("suite")), str(record["task_id"]))
            self.by_task.setdefault(key, []).append(record)


_last_index: _PeerIndex | None = None


def _peer_index(data: SiteData) -> _PeerIndex:
    """The index of ``data``'s episodes, kept while the same frame is rendered (the site's
    builder and the server, which renders under its lock, each render one dataset at a
    time)."""
    global _last_index
    every = data.all_episodes
    if _last_index is None or _last_index.every is not every:
        _last_index = _PeerIndex(every)
    return _last_index


def _peers(data: SiteData, row: pd.Series) -> dict[str, Any] | None:
    """The other episodes of the same task (same suite), newest run first, each with the
    address of the side-by-side page of it and this one; None when there is none."""
    this = str(row["episode_id"])
    key = (str(_value(row, "suite")), str(row["task_id"]))
    same = [peer for peer in _peer_index(data).by_task.get(key, []) if peer["episode_id"] != this]
    if not same:
        return None
    links = [
        {
            "href": side_by_side_url(this, str(peer["episode_id"]), "../"),
            "label": _peer_label(peer, row),
        }
        for peer in same[:MAX_PEERS]
    ]
    return {"links": links, "more": len(same) - len(links)}


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
    model = _value(row, "model")
    before, after = data.neighbours(episode_id)
    attribution = _value(row, "attribution") or "agent"
    outcome = outcome_of(str(row["termination_reason"]), bool(row["success"]), attribution)
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
        outcome=outcome,
        verdict=verdict(row, attribution, graded_by_scorer(graph)),
        by_scorer=graded_by_scorer(graph),
        score=float(row["score"]),
        grade=grade(row, attribution),
        attribution=attribution,
        attribution_text=ATTRIBUTION_TEXT.get(attribution, ""),
        cause=cause(row, graph, steps, outcome, attribution),
        peers=_peers(data, row),
        previous=None if before is None else episode_page_name(before),
        next=None if after is None else episode_page_name(after),
        result_facts=[
            (label, cell_text(name, _value(row, name))) for label, name in _RESULT_FIELDS
        ],
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


def render_side_by_side(data: SiteData) -> str:
    """The side-by-side page: the two episode pages its address names, framed next to each
    other (the page's script reads ``?a=`` and ``?b=``)."""
    return render(
        "side_by_side.html",
        title=data.title,
        CSP=FRAMING_POLICY,
        live=None,
        version="",
    )
