"""``GraphEvaluator``: multi-stage evaluation over a DAG of evaluators.

Semantics (DESIGN.md): one sink; a node is ready when all its predecessors
have passed; a passed node stays passed; after every agent step the ready
nodes are evaluated and newly ready successors cascade within the same step;
success means the sink passed; completeness = passed / total.

The ``GraphEvaluator`` is the task's definition; each episode gets its own
``GraphProgress`` from ``start()``. CRAB's stepping API (``G``, ``count``,
``reset``, ``step``, ``is_complete``, ``stat``) is kept for code written
against it; episodes never use it.

The graph is kept as plain lists and dicts: networkx, which takes about half
a second to import, is loaded only by code that hands in or asks for a
``networkx.DiGraph`` (``graph``, ``G``), never by a task of one evaluator or
a chain, in the driver or in a Ray worker.
"""

from __future__ import annotations

import importlib
import itertools
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from crabray.core.errors import GraphError
from crabray.core.evaluators import Evaluator
from crabray.core.result import GraphStats

if TYPE_CHECKING:
    import networkx as nx


def is_digraph(value: object) -> bool:
    """Whether ``value`` is a ``networkx.DiGraph``, without importing networkx to say no."""
    networkx = sys.modules.get("networkx")
    return networkx is not None and isinstance(value, networkx.DiGraph)


class _ActionTaker(Protocol):
    def take_action(self, action: Any, parameters: dict[str, Any] | None = None) -> Any: ...


Judge = Callable[[Evaluator], bool]
"""Runs one evaluator node in its environment and returns its verdict."""


class GraphEvaluator:
    """A validated DAG of evaluators with exactly one sink.

    Args:
        graph: A ``networkx.DiGraph`` whose nodes are ``Evaluator`` objects, a
            single ``Evaluator`` (a one-node graph), or a sequence of
            evaluators to pass in order (a chain).

    Raises:
        GraphError: The graph is empty, has a cycle, has several sinks, or a
            node is not an evaluator.
    """

    def __init__(self, graph: nx.DiGraph[Evaluator] | Evaluator | Iterable[Evaluator]) -> None:
        self.edges: list[tuple[Evaluator, Evaluator]]
        nodes, self.edges = _nodes_and_edges(graph)
        self.predecessors: dict[Evaluator, list[Evaluator]] = {n: [] for n in nodes}
        self.successors: dict[Evaluator, list[Evaluator]] = {n: [] for n in nodes}
        for source, target in self.edges:
            self.successors[source].append(target)
            self.predecessors[target].append(source)
        _validate(nodes, self.edges, self.successors)
        self.order: list[Evaluator] = _topological_order(nodes, self.predecessors, self.successors)
        (self.sink,) = [n for n in nodes if not self.successors[n]]
        self._graph: nx.DiGraph[Evaluator] | None = None
        self.reset()

    def __getstate__(self) -> dict[str, Any]:
        """The state to pickle, without the networkx view (rebuilt on demand).

        A task sent to a Ray worker then does not make the worker import networkx.
        """
        return {**self.__dict__, "_graph": None}

    @property
    def graph(self) -> nx.DiGraph[Evaluator]:
        """The evaluators as a ``networkx.DiGraph`` (loads networkx)."""
        if self._graph is None:
            networkx = importlib.import_module("networkx")
            built: nx.DiGraph[Evaluator] = networkx.DiGraph()
            built.add_nodes_from(self.order)
            built.add_edges_from(self.edges)
            self._graph = built
        return self._graph

    def reset(self) -> None:
        """CRAB's API: forget what passed.

        ``G``'s nodes carry ``remaining_predecessors`` and ``passing_count`` (the
        ``count`` of the step at which the node passed).
        """
        self.count = 0
        self._G: nx.DiGraph[Evaluator] | None = None

    @property
    def G(self) -> nx.DiGraph[Evaluator]:
        """CRAB's API: the graph whose node attributes ``step`` updates (loads networkx)."""
        if self._G is None:
            self._G = self.graph.copy()
            for node in self._G.nodes:
                self._G.nodes[node]["remaining_predecessors"] = len(self.predecessors[node])
                self._G.nodes[node]["passing_count"] = None
        return self._G

    def step(self, envs: Mapping[str, _ActionTaker], default_env: str = "root") -> None:
        """CRAB's API: evaluate the ready nodes in their environments, cascading.

        Args:
            envs: Environments by name; each node runs in ``envs[node.env_name]``.
            default_env: Where nodes that name no environment run.
        """
        tried: set[Evaluator] = set()
        frontier = self._ready()
        while frontier and not self.is_complete():
            for node in frontier:
                tried.add(node)
                if envs[node.env_name or default_env].take_action(node):
                    self.G.nodes[node]["passing_count"] = self.count
                    for successor in self.successors[node]:
                        self.G.nodes[successor]["remaining_predecessors"] -= 1
            frontier = [n for n in self._ready() if n not in tried]
        self.count += 1

    def _ready(self) -> list[Evaluator]:
        return [
            n
            for n in self.order
            if self.G.nodes[n]["passing_count"] is None
            and self.G.nodes[n]["remaining_predecessors"] == 0
        ]

    def is_complete(self) -> bool:
        """CRAB's API: whether the sink has passed."""
        return self.G.nodes[self.sink]["passing_count"] is not None

    def stat(self) -> dict[str, Any]:
        """CRAB's API: progress of the ``step`` calls so far."""
        passed = sum(1 for _, c in self.G.nodes(data="passing_count") if c is not None)
        total = self.G.number_of_nodes()
        return {
            "total_nodes": total,
            "complete_nodes": passed,
            "completeness": passed / total,
            "completeness_per_action": passed / total / max(self.count, 1),
        }

    @property
    def nodes(self) -> list[Evaluator]:
        """The evaluators in a topological order."""
        return list(self.order)

    def start(self) -> GraphProgress:
        """A fresh progress tracker for one episode."""
        return GraphProgress(self)


class GraphProgress:
    """The passed/unpassed state of one episode's evaluator graph."""

    def __init__(self, definition: GraphEvaluator) -> None:
        self.definition = definition
        self.passed: set[Evaluator] = set()
        self.actions_taken = 0
        self.steps_to_complete: int | None = None

    @property
    def success(self) -> bool:
        """Whether the sink has passed."""
        return self.definition.sink in self.passed

    def ready(self) -> list[Evaluator]:
        """Unpassed nodes all of whose predecessors have passed, in topological order."""
        predecessors = self.definition.predecessors
        return [
            n
            for n in self.definition.order
            if n not in self.passed and all(p in self.passed for p in predecessors[n])
        ]

    def step(self, judge: Judge, actions_taken: int) -> GraphStats:
        """Evaluate ready nodes, cascading to newly ready successors; return the stats.

        Args:
            judge: Runs one evaluator node; may raise ``EvaluatorError``.
            actions_taken: Agent actions taken so far in the episode.
        """
        self.actions_taken = actions_taken
        tried: set[Evaluator] = set()
        frontier = [n for n in self.ready() if n not in tried]
        while frontier:
            for node in frontier:
                tried.add(node)
                if judge(node):
                    self.passed.add(node)
            frontier = [n for n in self.ready() if n not in tried]
        if self.success and self.steps_to_complete is None:
            self.steps_to_complete = actions_taken
        return self.stats()

    def stats(self) -> GraphStats:
        """CRAB's progress metrics for the graph as it stands."""
        total = len(self.definition.order)
        passed = len(self.passed)
        completeness = passed / total
        return GraphStats(
            total_nodes=total,
            passed_nodes=passed,
            completeness=completeness,
            completeness_per_action=completeness / max(self.actions_taken, 1),
            steps_to_complete=self.steps_to_complete,
            longest_unfinished_path=self._longest_unfinished_path(),
            success=self.success,
        )

    def _longest_unfinished_path(self) -> int:
        """Nodes on the longest path through unpassed nodes only (0 when all passed)."""
        longest: dict[Evaluator, int] = {}
        for node in self.definition.order:
            if node not in self.passed:
                before = [longest[p] for p in self.definition.predecessors[node] if p in longest]
                longest[node] = 1 + max(before, default=0)
        return max(longest.values(), default=0)


def _nodes_and_edges(
    graph: nx.DiGraph[Evaluator] | Evaluator | Iterable[Evaluator],
) -> tuple[list[Evaluator], list[tuple[Evaluator, Evaluator]]]:
    """Nodes (in insertion order, each once) and edges of a graph, one evaluator or a chain."""
    if is_digraph(graph):
        return list(graph.nodes), list(graph.edges)  # type: ignore[union-attr]
    if isinstance(graph, Evaluator):
        return [graph], []
    chain = list(graph)
    edges = list(dict.fromkeys(itertools.pairwise(chain)))  # a repeated pair is one edge
    return list(dict.fromkeys(chain)), edges


def _topological_order(
    nodes: list[Evaluator],
    predecessors: Mapping[Evaluator, list[Evaluator]],
    successors: Mapping[Evaluator, list[Evaluator]],
) -> list[Evaluator]:
    """Generation by generation, as ``networkx.topological_sort`` orders them."""
    waiting = {n: len(predecessors[n]) for n in nodes if predecessors[n]}
    generation = [n for n in nodes if not predecessors[n]]
    order: list[Evaluator] = []
    while generation:
        order.extend(generation)
        following = []
        for node in generation:
            for child in successors[node]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    following.append(child)
                    del waiting[child]
        generation = following
    return order


def _validate(
    nodes: list[Evaluator],
    edges: list[tuple[Evaluator, Evaluator]],
    successors: Mapping[Evaluator, list[Evaluator]],
) -> None:
    if not nodes:
        raise GraphError("the evaluator graph is empty: give it at least one evaluator")
    strangers = [n for n in nodes if not isinstance(n, Evaluator)]
    if strangers:
        raise GraphError(
            f"every node of an evaluator graph must be an Evaluator (made with @evaluator); "
            f"got {', '.join(repr(s) for s in strangers[:3])}"
        )
    predecessors: dict[Evaluator, list[Evaluator]] = {n: [] for n in nodes}
    for source, target in edges:
        predecessors[target].append(source)
    if len(_topological_order(nodes, predecessors, successors)) < len(nodes):
        networkx = importlib.import_module("networkx")  # to name the cycle
        cyclic = networkx.DiGraph(edges)
        cycle = " -> ".join(u.label for u, _ in networkx.find_cycle(cyclic))
        raise GraphError(f"the evaluator graph has a cycle: {cycle}")
    sinks = [n.label for n in nodes if not successors[n]]
    if len(sinks) != 1:
        raise GraphError(
            f"the evaluator graph must have exactly one sink (final evaluator), "
            f"it has {len(sinks)}: {', '.join(sinks)}"
        )
