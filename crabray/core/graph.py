"""``GraphEvaluator``: multi-stage evaluation over a networkx DAG of evaluators.

Semantics (DESIGN.md): one sink; a node is ready when all its predecessors
have passed; a passed node stays passed; after every agent step the ready
nodes are evaluated and newly ready successors cascade within the same step;
success means the sink passed; completeness = passed / total.

The ``GraphEvaluator`` is the task's definition; each episode gets its own
``GraphProgress`` from ``start()``. CRAB's stepping API (``G``, ``count``,
``reset``, ``step``, ``is_complete``, ``stat``) is kept for code written
against it; episodes never use it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import networkx as nx

from crabray.core.errors import GraphError
from crabray.core.evaluator import Evaluator
from crabray.core.result import GraphStats


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
        self.graph = _as_digraph(graph)
        _validate(self.graph)
        (self.sink,) = [n for n in self.graph.nodes if self.graph.out_degree(n) == 0]
        self.order: list[Evaluator] = list(nx.topological_sort(self.graph))
        self.reset()

    def reset(self) -> None:
        """CRAB's API: forget what passed.

        ``G``'s nodes carry ``remaining_predecessors`` and ``passing_count`` (the
        ``count`` of the step at which the node passed).
        """
        self.count = 0
        self.G: nx.DiGraph[Evaluator] = nx.DiGraph(self.graph)
        for node in self.G.nodes:
            self.G.nodes[node]["remaining_predecessors"] = self.G.in_degree(node)
            self.G.nodes[node]["passing_count"] = None

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
                    for successor in self.G.successors(node):
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
        graph = self.definition.graph
        return [
            n
            for n in self.definition.order
            if n not in self.passed and all(p in self.passed for p in graph.predecessors(n))
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
        total = self.definition.graph.number_of_nodes()
        passed = len(self.passed)
        completeness = passed / total
        unfinished = self.definition.graph.subgraph(
            n for n in self.definition.graph.nodes if n not in self.passed
        )
        longest = len(nx.dag_longest_path(unfinished)) if unfinished.number_of_nodes() else 0
        return GraphStats(
            total_nodes=total,
            passed_nodes=passed,
            completeness=completeness,
            completeness_per_action=completeness / max(self.actions_taken, 1),
            steps_to_complete=self.steps_to_complete,
            longest_unfinished_path=longest,
            success=self.success,
        )


def _as_digraph(
    graph: nx.DiGraph[Evaluator] | Evaluator | Iterable[Evaluator],
) -> nx.DiGraph[Evaluator]:
    if isinstance(graph, nx.DiGraph):
        return graph
    if isinstance(graph, Evaluator):
        single: nx.DiGraph[Evaluator] = nx.DiGraph()
        single.add_node(graph)
        return single
    chain: nx.DiGraph[Evaluator] = nx.DiGraph()
    nodes = list(graph)
    chain.add_nodes_from(nodes)
    chain.add_edges_from(itertools.pairwise(nodes))
    return chain


def _validate(graph: nx.DiGraph[Evaluator]) -> None:
    if graph.number_of_nodes() == 0:
        raise GraphError("the evaluator graph is empty: give it at least one evaluator")
    strangers = [n for n in graph.nodes if not isinstance(n, Evaluator)]
    if strangers:
        raise GraphError(
            f"every node of an evaluator graph must be an Evaluator (made with @evaluator); "
            f"got {', '.join(repr(s) for s in strangers[:3])}"
        )
    if not nx.is_directed_acyclic_graph(graph):
        cycle = " -> ".join(u.label for u, _ in nx.find_cycle(graph))
        raise GraphError(f"the evaluator graph has a cycle: {cycle}")
    sinks = [n.label for n in graph.nodes if graph.out_degree(n) == 0]
    if len(sinks) != 1:
        raise GraphError(
            f"the evaluator graph must have exactly one sink (final evaluator), "
            f"it has {len(sinks)}: {', '.join(sinks)}"
        )
