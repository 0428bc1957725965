"""The index page's plots, drawn with matplotlib and embedded as inline SVG.

Every plot shows what the page's leaderboard counts, by its rule: the success
and cost plots are drawn from the leaderboard's own rows (one per agent, model
and, on the index, suite; benchmark and infrastructure errors in no rate), and
the steps histogram from the graded episodes of the same groups. Each plot
comes with the numbers it was drawn from (``Plot.points``), which the page
keeps beside the figure, so the two can be checked against the table.

Output is deterministic (fixed SVG hash salt, no creation date), so building
the site twice from the same data gives identical files. Figures are made
without pyplot (no global figure registry, no GUI backend), and rendering is
serialised by a lock because matplotlib's rcParams are process-global and
``crabray view`` renders from several request threads.
"""

from __future__ import annotations

import io
import logging
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from crabray.core.errors import MissingDependencyError
from crabray.core.install import extra_install_command
from crabray.core.result import Attribution
from crabray.results.board.cells import is_missing, plain, usd

try:
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MaxNLocator
except ModuleNotFoundError as exc:  # the optional [site] extra
    if exc.name is None or exc.name.split(".")[0] != "matplotlib":
        raise
    raise MissingDependencyError(
        "the site (crabray leaderboard --html, crabray view) needs the missing package "
        f"'matplotlib'; install it with: {extra_install_command('site')}",
        name="site",
        missing="matplotlib",
        install_hint=extra_install_command("site"),
    ) from exc

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

logger = logging.getLogger(__name__)

Z_95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95% interval."""

_RC: dict[RcKeyType, Any] = {
    "svg.hashsalt": "crabray-site",
    "svg.fonttype": "path",  # glyphs as paths: the page needs no font to look the same
    "text.parse_math": False,  # an agent named "$x$" is text, not TeX
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_FRONT = "#d1495b"
_OTHER = "#6c7a89"
_BAR = "#0b5cad"
_lock = threading.Lock()


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a success rate: honest at 0/n and n/n, unlike Wald's.

    Args:
        successes: Successful trials.
        trials: All trials; an empty group gives (0, 1), knowing nothing.
        z: The normal quantile (1.96 for 95%).
    """
    if trials <= 0:
        return (0.0, 1.0)
    rate = successes / trials
    denominator = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


IDENTITY = ("agent", "model", "suite")
"""The columns a leaderboard row (and a plotted group) can be identified by."""


@dataclass(frozen=True)
class Plot:
    """A drawn plot and the numbers it was drawn from.

    Attributes:
        svg: The figure as an inline ``<svg>`` element.
        points: One entry per drawn group: its identity (``agent``, ``model`` and
            ``suite`` when the leaderboard has a row per suite), its ``label`` on
            the plot, and the values drawn. NaN is given as None (JSON has no NaN).
    """

    svg: str
    points: list[dict[str, Any]] = field(default_factory=list)


def group_label(agent: object, model: object) -> str:
    """How an (agent, model) group is named on plots: ``agent / model``, or the agent alone."""
    if model is None or (isinstance(model, float) and math.isnan(model)) or model == "":
        return str(agent)
    return f"{agent} / {model}"


def agent_rows(episodes: pd.DataFrame) -> pd.Series:
    """True for rows attributed to the agent: the only ones graded (the leaderboard's rule)."""
    return episodes["attribution"] == Attribution.AGENT.value


def _json(value: Any) -> Any:
    """A cell as JSON holds it: numpy scalars as Python numbers, NaN and NA as None."""
    value = plain(value)
    return None if is_missing(value) else value


def row_labels(frame: pd.DataFrame) -> list[str]:
    """Each row's label on a plot: ``agent / model``, then ``· suite`` when rows differ in it."""
    labels = [group_label(a, m) for a, m in zip(frame["agent"], frame["model"], strict=True)]
    if "suite" in frame.columns and frame["suite"].nunique(dropna=False) > 1:
        labels = [f"{label} · {suite}" for label, suite in zip(labels, frame["suite"], strict=True)]
    return labels


def _identities(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Each row's identity (its ``IDENTITY`` columns) and label, the start of its point."""
    keys = [key for key in IDENTITY if key in frame.columns]
    return [
        {**{key: _json(value) for key, value in zip(keys, values, strict=True)}, "label": label}
        for values, label in zip(
            frame[keys].itertuples(index=False, name=None), row_labels(frame), strict=True
        )
    ]


def _to_inline_svg(figure: Figure, prefix: str) -> str:
    """The figure as an ``<svg>`` element with ids made unique within the page.

    Three plots on one page would otherwise share glyph and clip-path ids.
    """
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buffer.getvalue().decode("utf-8")
    text = text[text.index("<svg") :]
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    if ids:
        pattern = re.compile(r'(\bid="|#)(' + "|".join(map(re.escape, ids)) + r')(?=["\)])')
        text = pattern.sub(lambda match: f"{match.group(1)}{prefix}-{match.group(2)}", text)
    return text.strip()


def _error(length: float) -> float:
    """An error-bar length: never negative, none (0) where the interval is undefined."""
    return 0.0 if math.isnan(length) else max(length, 0.0)


def success_plot(table: pd.DataFrame) -> Plot | None:
    """Success rate per leaderboard row with its 95% interval as error bars.

    Uses the leaderboard's ``success_ci_low``/``success_ci_high`` when it has
    them, else computes Wilson intervals from ``successes`` and ``episodes``.
    Groups without a graded episode (only benchmark or infrastructure errors,
    so no rate) are left out. None when no group has a rate.
    """
    table = table[table["success_rate"].notna()]
    if table.empty:
        return None
    labels = row_labels(table)
    rates = [float(rate) for rate in table["success_rate"]]
    if "success_ci_low" in table and "success_ci_high" in table:
        bounds = list(zip(table["success_ci_low"], table["success_ci_high"], strict=True))
    else:
        bounds = [
            wilson_interval(int(s), int(n))
            for s, n in zip(table["successes"], table["episodes"], strict=True)
        ]
    low = [_error(rate - float(lo)) for rate, (lo, _) in zip(rates, bounds, strict=True)]
    high = [_error(float(hi) - rate) for rate, (_, hi) in zip(rates, bounds, strict=True)]
    points = [
        {**identity, "success_rate": rate, "ci_low": _json(lo), "ci_high": _json(hi)}
        for identity, rate, (lo, hi) in zip(_identities(table), rates, bounds, strict=True)
    ]
    positions = list(range(len(labels)))[::-1]  # best (first row) at the top
    with _lock, matplotlib.rc_context(_RC):
        figure = Figure(figsize=(5.6, 0.9 + 0.38 * len(labels)))
        axes = figure.add_subplot()
        axes.errorbar(
            rates, positions, xerr=[low, high], fmt="o", color=_BAR, ecolor=_BAR, capsize=4
        )
        axes.set_yticks(positions, labels)
        axes.set_xlim(-0.02, 1.02)
        axes.set_ylim(-0.7, len(labels) - 0.3)
        axes.set_xlabel("success rate (95% Wilson interval)")
        axes.grid(axis="x", alpha=0.3)
        return Plot(_to_inline_svg(figure, "success"), points)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats: none is cheaper and at least as successful.

    Args:
        points: (cost, success rate) pairs; lower cost and higher success are better.

    Returns:
        The front's indices ordered by cost.
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front: list[int] = []
    best = -math.inf
    for index in order:
        if points[index][1] > best:
            front.append(index)
            best = points[index][1]
    return front


def cost_plot(table: pd.DataFrame) -> Plot | None:
    """Mean cost per graded episode against success rate per leaderboard row; the Pareto
    front in red.

    Both numbers are the row's: its ``success_rate``, and its ``cost_usd`` (the cost
    of its graded episodes) over its ``episodes``; rows without a graded episode are
    left out. None when no row has a rate, or the table has no ``cost_usd`` column.
    """
    if "cost_usd" not in table:
        return None
    table = table[table["success_rate"].notna() & (table["episodes"] > 0)]
    if table.empty:
        return None
    costs = [
        float(cost) / int(n) for cost, n in zip(table["cost_usd"], table["episodes"], strict=True)
    ]
    rates = [float(rate) for rate in table["success_rate"]]
    points = list(zip(costs, rates, strict=True))
    labels = row_labels(table)
    front = pareto_front(points)
    on_front = set(front)
    drawn = [
        {**identity, "mean_cost_usd": cost, "success_rate": rate, "pareto_front": index in on_front}
        for index, (identity, (cost, rate)) in enumerate(
            zip(_identities(table), points, strict=True)
        )
    ]
    with _lock, matplotlib.rc_context(_RC):
        figure = Figure(figsize=(5.6, 3.6))
        axes = figure.add_subplot()
        others = [i for i in range(len(points)) if i not in on_front]
        axes.scatter(
            [points[i][0] for i in others],
            [points[i][1] for i in others],
            color=_OTHER,
            label="dominated",
            zorder=3,
        )
        axes.plot(
            [points[i][0] for i in front],
            [points[i][1] for i in front],
            color=_FRONT,
            marker="o",
            drawstyle="steps-post",
            label="Pareto front",
            zorder=4,
        )
        for index, label in enumerate(labels):
            axes.annotate(
                label,
                points[index],
                textcoords="offset points",
                xytext=(5, 5),
                fontsize=8,
                color=_FRONT if index in on_front else _OTHER,
            )
        axes.set_xlabel("mean cost per episode (USD)")
        axes.set_ylabel("success rate")
        axes.set_ylim(-0.05, 1.1)
        top = max(cost for cost, _ in points)
        # Costs are never negative: the axis starts at 0, with room for the labels on the
        # right; when every agent is free, a $0-$1 axis keeps it readable.
        axes.set_xlim(0.0, top * 1.25 if top > 0 else 1.0)
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"${usd(value)}"))
        axes.grid(alpha=0.3)
        axes.legend(loc="lower right", fontsize=8)
        return Plot(_to_inline_svg(figure, "cost"), drawn)


def steps_histogram(episodes: pd.DataFrame, by: Sequence[str] = ("agent", "model")) -> Plot | None:
    """How many steps graded episodes took, one outline per ``by`` group (the leaderboard's).

    Benchmark and infrastructure errors are left out, as from the leaderboard's
    ``mean_steps``: each outline holds its row's ``episodes``. None without a graded
    episode.
    """
    graded = episodes[agent_rows(episodes)] if len(episodes) else episodes
    if graded.empty:
        return None
    keys = list(by)
    top = int(graded["steps"].astype(int).max())
    bins = [value - 0.5 for value in range(0, top + 2)]
    groups = [group for _, group in graded.groupby(keys, dropna=False, sort=True)]
    firsts = pd.DataFrame([group[keys].iloc[0] for group in groups]).reset_index(drop=True)
    identities = _identities(firsts)
    points = [
        {
            **identity,
            "episodes_by_steps": {
                str(value): int(count)
                for value, count in group["steps"].astype(int).value_counts().sort_index().items()
            },
        }
        for identity, group in zip(identities, groups, strict=True)
    ]
    with _lock, matplotlib.rc_context(_RC):
        figure = Figure(figsize=(5.6, 3.4))
        axes = figure.add_subplot()
        for identity, group in zip(identities, groups, strict=True):
            axes.hist(
                group["steps"].astype(int),
                bins=bins,
                histtype="step",
                linewidth=1.6,
                label=identity["label"],
            )
        axes.set_xlabel("steps per episode")
        axes.set_ylabel("episodes")
        for axis in (axes.xaxis, axes.yaxis):
            locator = axis.get_major_locator()
            if isinstance(locator, MaxNLocator):  # the default AutoLocator is one
                locator.set_params(integer=True)
        axes.legend(fontsize=8)
        return Plot(_to_inline_svg(figure, "steps"), points)
