"""The evaluator graph of an episode drawn as inline SVG, passed nodes marked.

The layout is layered by topological generation: a node sits one layer below
the deepest of its predecessors, so the sink is at the bottom and every edge
points down. It is written by hand (a few dozen lines) because the graphs are
small and a layout library would be a heavy dependency for a static page.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Collection
from dataclasses import dataclass

from crabray.results.site._html import esc

logger = logging.getLogger(__name__)

NODE_WIDTH = 210
"""The narrowest box; a box widens (up to ``MAX_NODE_WIDTH``) to fit the graph's longest label."""
MAX_NODE_WIDTH = 540
CHAR_WIDTH = 6.5
"""About how wide a character of the 12 px label font is, to size boxes without a font."""
LABEL_PADDING = 16
NODE_HEIGHT = 34
H_GAP = 24
V_GAP = 44
MARGIN = 12
ARROW_LENGTH = 9
ARROW_HALF_WIDTH = 4.5
PASSED_FILL = "#dcf5e3"
PASSED_STROKE = "#1a7f37"
PENDING_FILL = "#ffffff"
PENDING_STROKE = "#8a939c"


@dataclass(frozen=True)
class Graph:
    """An evaluator graph as the episodes table stores it: labels and index pairs."""

    labels: list[str]
    edges: list[tuple[int, int]]


class GraphFormatError(ValueError):
    """``graph_json`` is not ``{"nodes": [labels], "edges": [[from, to], ...]}``."""


def parse_graph(graph_json: object) -> Graph | None:
    """Read an episode's ``graph_json``; None when the episode recorded no graph.

    Rows written before the column existed read back as null (NaN), which is
    "no graph" too.

    Raises:
        GraphFormatError: The text is not JSON of the documented shape, or an edge
            names a node that does not exist.
    """
    if not isinstance(graph_json, str) or not graph_json:
        return None
    try:
        data = json.loads(graph_json)
    except json.JSONDecodeError as exc:
        raise GraphFormatError(f"graph_json is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise GraphFormatError('graph_json lacks a "nodes" list')
    labels = [str(label) for label in data["nodes"]]
    edges: list[tuple[int, int]] = []
    for edge in data.get("edges", []):
        if (
            not isinstance(edge, list)
            or len(edge) != 2
            or not all(isinstance(end, int) and 0 <= end < len(labels) for end in edge)
        ):
            raise GraphFormatError(f"graph_json has a bad edge {edge!r} for {len(labels)} nodes")
        edges.append((edge[0], edge[1]))
    return Graph(labels=labels, edges=edges)


def layers(graph: Graph) -> list[list[int]]:
    """Nodes grouped by topological generation (Kahn's algorithm), sources first.

    A node on a cycle (which a valid task never has) cannot be placed by
    generation; such nodes go to one last layer so they are still drawn.
    """
    count = len(graph.labels)
    successors: list[list[int]] = [[] for _ in range(count)]
    indegree = [0] * count
    for source, target in graph.edges:
        successors[source].append(target)
        indegree[target] += 1
    result: list[list[int]] = []
    current = [node for node in range(count) if indegree[node] == 0]
    placed = 0
    while current:
        result.append(current)
        placed += len(current)
        following: list[int] = []
        for node in current:
            for target in successors[node]:
                indegree[target] -= 1
                if indegree[target] == 0:
                    following.append(target)
        current = sorted(following)
    if placed < count:
        seen = {node for layer in result for node in layer}
        rest = [node for node in range(count) if node not in seen]
        logger.warning("evaluator graph has a cycle through nodes %s; drawn in one layer", rest)
        result.append(rest)
    return result


def node_width(labels: list[str]) -> int:
    """The width of the graph's boxes: enough for its longest label (with a ✓), within limits."""
    longest = max((len(label) + 2 for label in labels), default=0)
    return max(NODE_WIDTH, min(MAX_NODE_WIDTH, math.ceil(longest * CHAR_WIDTH) + LABEL_PADDING))


def _short(label: str, width: int) -> str:
    """The label cut to the box (the page lists every label in full below the graph)."""
    fits = int((width - LABEL_PADDING) / CHAR_WIDTH) - 2
    return label if len(label) <= fits else label[: fits - 1] + "…"


def _arrow(x1: float, y1: float, x2: float, y2: float) -> str:
    """An edge line from (x1, y1) to an arrowhead whose tip is at (x2, y2)."""
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    bx, by = x2 - ux * ARROW_LENGTH, y2 - uy * ARROW_LENGTH
    left = (bx - uy * ARROW_HALF_WIDTH, by + ux * ARROW_HALF_WIDTH)
    right = (bx + uy * ARROW_HALF_WIDTH, by - ux * ARROW_HALF_WIDTH)
    return (
        f'<line class="edge" x1="{x1:.1f}" y1="{y1:.1f}" x2="{bx:.1f}" y2="{by:.1f}"/>'
        f'<polygon class="arrow" points="{x2:.1f},{y2:.1f} {left[0]:.1f},{left[1]:.1f} '
        f'{right[0]:.1f},{right[1]:.1f}"/>'
    )


def graph_svg(graph: Graph, passed: Collection[int]) -> str:
    """The graph as an inline ``<svg class="graph">``; nodes in ``passed`` are green with a ✓.

    Each node is a ``<g class="node">`` (plus ``passed``) with ``data-index``
    and ``data-passed``, and its full label as a tooltip. Boxes widen to fit
    the longest label; past ``MAX_NODE_WIDTH`` a label is cut on its box, and the
    episode page lists every label in full under the graph.

    Args:
        graph: The episode's evaluator graph.
        passed: Indices of the nodes passed so far.
    """
    passed_set = set(passed)
    box = node_width(graph.labels)
    grouped = layers(graph)
    widest = max((len(layer) for layer in grouped), default=0)
    width = 2 * MARGIN + widest * box + max(widest - 1, 0) * H_GAP
    height = 2 * MARGIN + len(grouped) * NODE_HEIGHT + max(len(grouped) - 1, 0) * V_GAP
    position: dict[int, tuple[float, float]] = {}
    for depth, layer in enumerate(grouped):
        row_width = len(layer) * box + (len(layer) - 1) * H_GAP
        left = (width - row_width) / 2
        for slot, node in enumerate(layer):
            position[node] = (
                left + slot * (box + H_GAP),
                MARGIN + depth * (NODE_HEIGHT + V_GAP),
            )
    edges = []
    for source, target in graph.edges:
        sx, sy = position[source]
        tx, ty = position[target]
        edges.append(
            _arrow(sx + box / 2, sy + NODE_HEIGHT, tx + box / 2, ty)
            if ty > sy
            else _arrow(sx + box, sy + NODE_HEIGHT / 2, tx, ty + NODE_HEIGHT / 2)
        )
    nodes = []
    for node, label in enumerate(graph.labels):
        x, y = position[node]
        done = node in passed_set
        text = ("✓ " if done else "") + _short(label, box)
        nodes.append(
            f'<g class="node{" passed" if done else ""}" data-index="{node}" '
            f'data-passed="{"true" if done else "false"}"><title>{esc(label)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{box}" height="{NODE_HEIGHT}" rx="5" '
            f'fill="{PASSED_FILL if done else PENDING_FILL}" '
            f'stroke="{PASSED_STROKE if done else PENDING_STROKE}" '
            f'stroke-width="{2 if done else 1.2}"/>'
            f'<text x="{x + box / 2:.1f}" y="{y + NODE_HEIGHT / 2:.1f}" '
            f'text-anchor="middle" dominant-baseline="central">{esc(text)}</text></g>'
        )
    summary = f"evaluator graph: {len(passed_set & set(position))} of {len(graph.labels)} passed"
    return (
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="{esc(summary)}" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}">{"".join(edges)}{"".join(nodes)}</svg>'
    )
