"""``GraphEvaluator`` semantics (DESIGN.md): readiness, sticky passes, cascade, sink, stats."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import networkx as nx
import pytest

from crabray import Evaluator, GraphEvaluator, action, evaluator
from crabray.core.errors import GraphError
from crabray.core.result import GraphStats


@evaluator
def holds(key: str, env: Any) -> bool:
    """The key is in the current state (a set of keys).

    Args:
        key: The key.
    """
    return key in env


class Judge:
    """Runs nodes against a mutable state and remembers which nodes it ran, in order."""

    def __init__(self) -> None:
        self.state: set[str] = set()
        self.ran: list[str] = []

    def __call__(self, node: Evaluator) -> bool:
        self.ran.append(node.bound["key"])
        return node.evaluate(self.state)


def nodes(*keys: str) -> dict[str, Evaluator]:
    return {k: holds(key=k) for k in keys}


@pytest.fixture
def diamond() -> tuple[GraphEvaluator, dict[str, Evaluator]]:
    """a -> b, a -> c, b -> d, c -> d."""
    n = nodes("a", "b", "c", "d")
    graph = nx.DiGraph()
    graph.add_edges_from([(n["a"], n["b"]), (n["a"], n["c"]), (n["b"], n["d"]), (n["c"], n["d"])])
    return GraphEvaluator(graph), n


def stats(
    passed: int,
    actions: int,
    longest: int,
    steps_to_complete: int | None = None,
    total: int = 4,
) -> GraphStats:
    completeness = passed / total
    return GraphStats(
        total_nodes=total,
        passed_nodes=passed,
        completeness=completeness,
        completeness_per_action=completeness / max(actions, 1),
        steps_to_complete=steps_to_complete,
        longest_unfinished_path=longest,
        success=passed == total,
    )


# -- construction ---------------------------------------------------------------------------


def test_single_evaluator_is_a_one_node_graph() -> None:
    node = holds(key="x")
    graph = GraphEvaluator(node)
    assert graph.nodes == [node]
    assert graph.sink is node


def test_list_is_a_chain_in_order() -> None:
    n = nodes("a", "b", "c")
    graph = GraphEvaluator([n["a"], n["b"], n["c"]])
    assert graph.nodes == [n["a"], n["b"], n["c"]]
    assert graph.sink is n["c"]
    assert set(graph.graph.edges) == {(n["a"], n["b"]), (n["b"], n["c"])}


def test_nodes_are_in_topological_order(
    diamond: tuple[GraphEvaluator, dict[str, Evaluator]],
) -> None:
    graph, n = diamond
    order = graph.nodes
    assert order[0] is n["a"]
    assert order[-1] is n["d"]
    assert graph.sink is n["d"]


def test_empty_graph_is_refused() -> None:
    with pytest.raises(GraphError, match="the evaluator graph is empty"):
        GraphEvaluator(nx.DiGraph())
    with pytest.raises(GraphError, match="the evaluator graph is empty"):
        GraphEvaluator([])


def test_cycle_is_refused_naming_it() -> None:
    @evaluator
    def first() -> bool:
        return True

    @evaluator
    def second() -> bool:
        return True

    graph = nx.DiGraph()
    graph.add_edges_from([(first, second), (second, first)])
    with pytest.raises(GraphError) as info:
        GraphEvaluator(graph)
    assert "the evaluator graph has a cycle" in str(info.value)
    assert "first" in str(info.value)
    assert "second" in str(info.value)


def test_two_sinks_are_refused_naming_them() -> None:
    @evaluator
    def root() -> bool:
        return True

    @evaluator
    def left() -> bool:
        return True

    @evaluator
    def right() -> bool:
        return True

    graph = nx.DiGraph()
    graph.add_edges_from([(root, left), (root, right)])
    with pytest.raises(GraphError) as info:
        GraphEvaluator(graph)
    assert "exactly one sink" in str(info.value)
    assert "it has 2" in str(info.value)
    assert "left" in str(info.value)
    assert "right" in str(info.value)


def test_two_disconnected_nodes_are_two_sinks() -> None:
    graph = nx.DiGraph()
    graph.add_nodes_from(nodes("a", "b").values())
    with pytest.raises(GraphError, match="exactly one sink"):
        GraphEvaluator(graph)


def test_non_evaluator_node_is_refused() -> None:
    @action
    def plain() -> bool:
        return True

    graph = nx.DiGraph()
    graph.add_edge(plain, holds(key="x"))
    with pytest.raises(GraphError, match="every node of an evaluator graph must be an Evaluator"):
        GraphEvaluator(graph)

    graph = nx.DiGraph()
    graph.add_edge("a string", holds(key="x"))
    with pytest.raises(GraphError, match="'a string'"):
        GraphEvaluator(graph)


# -- semantics ------------------------------------------------------------------------------


def test_only_ready_nodes_are_evaluated(
    diamond: tuple[GraphEvaluator, dict[str, Evaluator]],
) -> None:
    graph, n = diamond
    progress, judge = graph.start(), Judge()
    judge.state = {"b", "c", "d"}  # everything except the root holds
    progress.step(judge, 1)
    assert judge.ran == ["a"]
    assert progress.passed == set()
    assert progress.ready() == [n["a"]]


def test_node_is_ready_only_when_all_predecessors_passed(
    diamond: tuple[GraphEvaluator, dict[str, Evaluator]],
) -> None:
    graph, n = diamond
    progress, judge = graph.start(), Judge()
    judge.state = {"a", "b", "d"}
    progress.step(judge, 1)
    assert progress.passed == {n["a"], n["b"]}
    assert "d" not in judge.ran  # c has not passed, so d is not ready
    assert progress.ready() == [n["c"]]


def test_cascade_within_one_step() -> None:
    n = nodes("a", "b", "c")
    progress, judge = GraphEvaluator([n["a"], n["b"], n["c"]]).start(), Judge()
    judge.state = {"a", "b", "c"}
    result = progress.step(judge, 1)
    assert judge.ran == ["a", "b", "c"]
    assert result.success
    assert result.passed_nodes == 3
    assert result.steps_to_complete == 1


def test_each_node_is_tried_at_most_once_per_step(
    diamond: tuple[GraphEvaluator, dict[str, Evaluator]],
) -> None:
    graph, _ = diamond
    progress, judge = graph.start(), Judge()
    judge.state = {"a"}
    progress.step(judge, 1)
    assert sorted(judge.ran) == ["a", "b", "c"]


def test_passed_node_stays_passed_and_is_not_rerun() -> None:
    verdicts = iter([True, False, False])
    runs: list[int] = []

    @evaluator
    def flaky() -> bool:
        runs.append(1)
        return next(verdicts)

    gate = holds(key="gate")
    graph = nx.DiGraph()
    graph.add_edge(flaky, gate)
    progress, judge = GraphEvaluator(graph).start(), Judge()

    def run(node: Evaluator) -> bool:
        return node.evaluate() if node is flaky else judge(node)

    assert progress.step(run, 1).passed_nodes == 1
    assert progress.step(run, 2).passed_nodes == 1  # flaky would say False now
    assert flaky in progress.passed
    assert len(runs) == 1
    judge.state = {"gate"}
    assert progress.step(run, 3).success


def test_sink_passed_means_success_even_if_state_reverts() -> None:
    progress, judge = GraphEvaluator(holds(key="x")).start(), Judge()
    judge.state = {"x"}
    assert progress.step(judge, 1).success
    judge.state = set()
    result = progress.step(judge, 2)
    assert result.success
    assert result.steps_to_complete == 1
    assert judge.ran == ["x"]


def test_success_is_only_the_sink() -> None:
    n = nodes("a", "b")
    progress, judge = GraphEvaluator([n["a"], n["b"]]).start(), Judge()
    judge.state = {"a"}
    result = progress.step(judge, 1)
    assert not result.success
    assert not progress.success
    assert result.completeness == 0.5


def test_each_start_is_independent() -> None:
    graph = GraphEvaluator(holds(key="x"))
    first, judge = graph.start(), Judge()
    judge.state = {"x"}
    first.step(judge, 1)
    second = graph.start()
    assert first.success
    assert not second.success
    assert second.stats().passed_nodes == 0


def test_judge_errors_propagate() -> None:
    def judge(node: Evaluator) -> bool:
        raise RuntimeError("judge broke")

    with pytest.raises(RuntimeError, match="judge broke"):
        GraphEvaluator(holds(key="x")).start().step(judge, 1)


# -- stats on the diamond, step by step -----------------------------------------------------


def test_diamond_stats_at_each_step(
    diamond: tuple[GraphEvaluator, dict[str, Evaluator]],
) -> None:
    graph, _ = diamond
    progress, judge = graph.start(), Judge()

    assert progress.stats() == stats(passed=0, actions=0, longest=3)

    # step 1: nothing holds
    assert progress.step(judge, 1) == stats(passed=0, actions=1, longest=3)

    # step 2: a holds -> a passes; b, c tried and fail
    judge.state = {"a"}
    assert progress.step(judge, 2) == stats(passed=1, actions=2, longest=2)

    # step 3: a no longer holds (stays passed), b holds -> b passes; d waits for c
    judge.state = {"b", "d"}
    assert progress.step(judge, 3) == stats(passed=2, actions=3, longest=2)

    # step 4: c and d hold -> c passes, d cascades in the same step
    judge.state = {"c", "d"}
    assert progress.step(judge, 4) == stats(passed=4, actions=4, longest=0, steps_to_complete=4)

    # step 5: nothing holds, nothing changes but the per-action ratio
    judge.state = set()
    assert progress.step(judge, 5) == stats(passed=4, actions=5, longest=0, steps_to_complete=4)


def test_longest_unfinished_path_counts_nodes() -> None:
    n = nodes("a", "b", "c", "d")
    chain = GraphEvaluator([n["a"], n["b"], n["c"], n["d"]])
    progress, judge = chain.start(), Judge()
    assert progress.stats().longest_unfinished_path == 4
    judge.state = {"a", "b"}
    assert progress.step(judge, 1).longest_unfinished_path == 2


def test_completeness_per_action_with_zero_actions_does_not_divide_by_zero() -> None:
    progress, judge = GraphEvaluator(holds(key="x")).start(), Judge()
    judge.state = {"x"}
    result = progress.step(judge, 0)
    assert result.completeness == 1.0
    assert result.completeness_per_action == 1.0
    assert result.steps_to_complete == 0


@pytest.mark.parametrize("passed", [(), ("a",), ("a", "c"), ("a", "b", "c", "d")])
def test_order_and_longest_path_are_networkx_own(passed: tuple[str, ...]) -> None:
    """Kept without networkx, the graph orders and measures as networkx does."""
    n = nodes("a", "b", "c", "d", "e", "f")
    graph: nx.DiGraph[Evaluator] = nx.DiGraph()
    graph.add_nodes_from([n["f"], n["c"], n["a"], n["b"], n["d"], n["e"]])
    for u, v in ["ab", "ac", "bd", "cd", "fe", "de", "cf"]:
        graph.add_edge(n[u], n[v])
    definition = GraphEvaluator(graph)
    assert definition.order == list(nx.topological_sort(graph))
    progress = definition.start()
    progress.passed = {n[k] for k in passed}
    unfinished = graph.subgraph(node for node in graph if node not in progress.passed)
    assert progress.stats().longest_unfinished_path == len(nx.dag_longest_path(unfinished))
    assert sorted(definition.edges, key=str) == sorted(definition.graph.edges, key=str)


def test_a_task_of_one_evaluator_is_judged_and_pickled_without_networkx() -> None:
    """Every Ray worker unpickles the tasks it runs (as Ray does, with cloudpickle).

    networkx is half a second of import, in the driver and in every worker.
    """
    program = (
        "import sys\n"
        "from ray import cloudpickle\n"
        "from crabray.actions import path_exists\n"
        "from crabray import Task\n"
        "task = Task(id='t', description='d', evaluator=[path_exists(path='a'),"
        " path_exists(path='b')])\n"
        "copy = cloudpickle.loads(cloudpickle.dumps(task))\n"
        "stats = copy.evaluator.start().step(lambda node: True, 1)\n"
        "print(stats.success, stats.total_nodes, 'networkx' in sys.modules)\n"
        "copy.evaluator.graph\n"
        "print('networkx' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["True", "2", "False", "True"]
