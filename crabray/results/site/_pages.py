"""The site's pages as HTML text: the index (leaderboard, plots, breakdowns, episodes)
and one page per episode (task, result, every step, the evaluator graph's progress).

Rendering is pure: it takes ``SiteData`` and returns strings, so the static
builder and the ``crabray view`` server produce the very same pages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import quote

import pandas as pd

from crabray.results.cells import is_missing
from crabray.results.site import _plots
from crabray.results.site._data import SiteData, breakdowns
from crabray.results.site._graph import Graph, GraphFormatError, graph_svg, parse_graph
from crabray.results.site._html import esc, facts, page, table_html

logger = logging.getLogger(__name__)

EPISODES_DIR = "episodes"
FILES_DIR = "files"
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
    "success",
    "score",
    "completeness",
    "steps",
    "cost_usd",
    "wall_time_sec",
    "finished_at",
)
_RESULT_FIELDS = (
    "termination_reason",
    "success",
    "score",
    "completeness",
    "steps",
    "action_errors",
    "tokens_in",
    "tokens_out",
    "model_calls",
    "model_latency_sec",
    "cost_usd",
    "wall_time_sec",
    "setup_time_sec",
    "started_at",
    "finished_at",
    "node",
    "error_type",
)


def episode_page_name(episode_id: str) -> str:
    """The file name of an episode's page: its id, or a hash of it if the id is not file-safe."""
    if _SAFE_NAME.match(episode_id):
        return f"{episode_id}.html"
    return f"id-{hashlib.sha256(episode_id.encode()).hexdigest()[:32]}.html"


def screenshot_url(relative: str) -> str:
    """The URL, relative to an episode page, of a screenshot copied (or served) under files/."""
    return f"../{FILES_DIR}/" + quote(relative.replace("\\", "/"), safe="/")


def _value(row: pd.Series, name: str) -> Any:
    return row[name] if name in row.index else None


def _checkpoints_block(checkpoints: Any) -> str:
    """The checkpoints a scorer graded, one row each, or nothing for graph-graded tasks."""
    if is_missing(checkpoints) or not len(checkpoints):
        return ""
    rows = "".join(
        f"<tr><td>{number}</td><td>{esc(point['result'])} / {esc(point['total'])}</td></tr>"
        for number, point in enumerate(checkpoints, start=1)
    )
    earned = sum(int(point["result"]) for point in checkpoints)
    total = sum(int(point["total"]) for point in checkpoints)
    return (
        f'<h3>Checkpoints <span class="muted">({earned} of {total} points)</span></h3>'
        f'<table id="checkpoints"><thead><tr><th>#</th><th>points</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _figure(svg: str | None, caption: str, figure_id: str) -> str:
    if svg is None:
        return ""
    return f'<figure id="{esc(figure_id)}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def _plots_html(data: SiteData) -> str:
    figures = [
        _figure(
            _plots.success_plot(data.board),
            "Success rate per agent and model; bars are 95% Wilson intervals.",
            "plot-success",
        ),
        _figure(
            _plots.cost_plot(data.episodes),
            "Mean cost per episode against success rate; red points form the Pareto front "
            "(no other configuration is both cheaper and more successful).",
            "plot-cost",
        ),
        _figure(
            _plots.steps_histogram(data.episodes),
            "Steps taken per episode, per agent and model.",
            "plot-steps",
        ),
    ]
    return f'<div class="plots">{"".join(figures)}</div>'


def render_index(data: SiteData) -> str:
    """The index page: leaderboard, plots, breakdowns and a table linking every episode."""
    scope = f"run {data.run_id}" if data.run_id else "all runs"
    runs = (
        sorted(str(run) for run in data.episodes["run_id"].unique()) if len(data.episodes) else []
    )
    header = (
        "<h1>crabray leaderboard</h1>"
        f'<p class="muted">{esc(scope)} · {len(data.episodes)} episodes'
        + (f" · runs: {esc(', '.join(runs))}" if runs and not data.run_id else "")
        + "</p>"
    )
    if data.episodes.empty:
        body = header + '<p id="no-episodes">No episodes yet. Reload when some have finished.</p>'
        return page("crabray leaderboard", body)
    sections = [
        header,
        "<h2>Leaderboard</h2>",
        '<p class="muted">Click a column header to sort; click again to reverse.</p>',
        table_html(data.board, table_id="leaderboard"),
        "<h2>Plots</h2>",
        _plots_html(data),
        "<h2>Breakdowns</h2>",
    ]
    for title, frame in breakdowns(data.episodes).items():
        table_id = "breakdown-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        sections.append(f"<h3>{esc(title)}</h3>")
        sections.append(table_html(frame, table_id=table_id))
    listed = data.listed
    columns = [name for name in _EPISODE_COLUMNS if name in listed.columns]
    listing = listed[columns]
    links = [
        f"{EPISODES_DIR}/{episode_page_name(str(episode_id))}"
        for episode_id in listed["episode_id"]
    ]
    if len(listed) < len(data.episodes):
        sections.append(
            f'<p class="muted" id="episodes-truncated">Listing the {len(listed)} most recent '
            f"of {len(data.episodes)} episodes; every number above covers all of them.</p>"
        )
    sections += [
        "<h2>Episodes</h2>",
        table_html(listing, table_id="episodes", links=links, link_column="task_id"),
    ]
    return page("crabray leaderboard", "".join(sections))


def _pretty_json(text: str) -> str:
    """Arguments as indented JSON; the raw text when it is not JSON (shown, not hidden)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except (json.JSONDecodeError, TypeError):
        return text


def _graph_block(graph: Graph | None, passed: Any, caption: str) -> str:
    if graph is None:
        return ""
    indices = [int(index) for index in passed] if not is_missing(passed) else []
    done = len(set(indices))
    return (
        f'<div class="graph-progress"><div class="label">{esc(caption)}: '
        f"{done} of {len(graph.labels)} evaluators passed</div>{graph_svg(graph, indices)}</div>"
    )


def _pre(text: Any, css_class: str = "") -> str:
    attribute = f' class="{css_class}"' if css_class else ""
    return f"<pre{attribute}>{esc(text)}</pre>"


def _call_html(call: pd.Series) -> str:
    parts = []
    message = _value(call, "agent_message")
    if not is_missing(message) and message != "":
        parts.append('<div class="label">agent message</div>' + _pre(message, "agent-message"))
    env = _value(call, "env")
    where = f" <span class='muted'>on {esc(env)}</span>" if not is_missing(env) else ""
    parts.append(
        f'<div class="label">action</div><code class="action">{esc(call["action"])}</code>{where}'
    )
    parts.append(
        '<div class="label">parameters</div>'
        + _pre(_pretty_json(str(_value(call, "arguments_json") or "{}")), "arguments")
    )
    error = _value(call, "error")
    if not is_missing(error):
        parts.append('<div class="label">error</div>' + _pre(error, "error bad"))
    else:
        parts.append(
            '<div class="label">result</div>' + _pre(_value(call, "result") or "", "result")
        )
    duration = _value(call, "duration_sec")
    if not is_missing(duration):
        parts.append(f'<div class="muted">took {float(duration):.2f} s</div>')
    failed = " failed" if not is_missing(error) else ""
    return f'<div class="call{failed}">{"".join(parts)}</div>'


def _step_html(
    number: int, calls: pd.DataFrame, graph: Graph | None, screenshots: ScreenshotSource
) -> str:
    parts = [f"<h3>Step {number + 1}</h3>"]
    first = calls.iloc[0]
    shot = _value(first, "screenshot_path")
    observation = _value(first, "observation")
    if not is_missing(shot) and shot:
        src = screenshots(str(shot))
        if src is None:
            parts.append(f'<p class="bad">screenshot missing: {esc(shot)}</p>')
        else:
            parts.append(
                '<div class="label">screenshot</div>'
                f'<img class="screenshot" src="{esc(src)}" alt="screenshot before step '
                f'{number + 1}" loading="lazy">'
            )
    if not is_missing(observation) and observation:
        parts.append('<div class="label">observation</div>' + _pre(observation, "observation"))
    parts.extend(_call_html(call) for _, call in calls.iterrows())
    last = calls.iloc[-1]
    parts.append(_graph_block(graph, _value(last, "graph_passed"), f"after step {number + 1}"))
    return f'<section class="step" id="step-{number + 1}">{"".join(parts)}</section>'


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
    graph_note = ""
    try:
        graph = parse_graph(_value(row, "graph_json"))
    except GraphFormatError as exc:
        logger.warning("episode %s: cannot draw its evaluator graph: %s", episode_id, exc)
        graph, graph_note = None, f'<p class="bad">evaluator graph not drawn: {esc(exc)}</p>'
    tags = _value(row, "tags")
    tag_html = (
        "".join(f'<span class="tag">{esc(tag)}</span>' for tag in tags)
        if not is_missing(tags) and len(tags)
        else '<span class="muted">none</span>'
    )
    task = facts(
        (label, name, _value(row, name))
        for label, name in (
            ("task id", "task_id"),
            ("suite", "suite"),
            ("agent", "agent"),
            ("model", "model"),
            ("run", "run_id"),
            ("epoch", "epoch"),
            ("attempt", "attempt"),
            ("episode id", "episode_id"),
        )
    )
    success = bool(row["success"])
    verdict = (
        f'<p id="verdict" class="{"ok" if success else "bad"}">'
        f"{'solved' if success else 'not solved'}: {esc(row['termination_reason'])}</p>"
    )
    result = facts((name.replace("_", " "), name, _value(row, name)) for name in _RESULT_FIELDS)
    error = _value(row, "error")
    error_html = "" if is_missing(error) else "<h3>Error</h3>" + _pre(error, "error bad")
    final_passed = steps.iloc[-1]["graph_passed"] if len(steps) else []
    step_html = (
        []
        if steps.empty
        else [
            _step_html(int(cast(int, number)), calls, graph, screenshots)  # step holds ints
            for number, calls in steps.groupby("step", sort=True)
        ]
    )
    title = f"{row['task_id']} · {row['agent']}"
    body = "".join(
        [
            f"<h1>{esc(row['task_id'])}</h1>",
            f'<p class="muted">{esc(row["agent"])}'
            + (f" / {esc(row['model'])}" if not is_missing(row["model"]) else "")
            + f" · run {esc(row['run_id'])} · epoch {esc(row['epoch'])}</p>",
            '<h2>Task</h2><div class="label">instruction</div>',
            _pre(_value(row, "description") or "", "description"),
            f'<div class="label">tags</div><p>{tag_html}</p>',
            task,
            "<h2>Result</h2>",
            verdict,
            result,
            error_html,
            _checkpoints_block(_value(row, "checkpoints")),
            graph_note,
            _graph_block(graph, final_passed, "final evaluator graph"),
            f'<h2>Steps <span class="muted">({len(step_html)})</span></h2>',
            "".join(step_html) or '<p class="muted">The agent took no step.</p>',
        ]
    )
    return page(title, body, root="../")
