"""CRAB's ``TaskGenerator`` path (``crab.core.task_generator``): composed tasks from subtasks.

crab-benchmark-v0 builds its tasks with ``TaskGenerator(subtasks=...)`` and
``get_task_from_file``; this keeps that API, with the graph composition the
``crab-dataset`` suite format uses (:func:`compose_evaluators`). CRAB's
LLM-driven generation of new task files (random walks over subtasks) is not
part of crabray.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from crabray.core.actions import Action
from crabray.core.errors import ConfigError
from crabray.core.evaluators import Evaluator
from crabray.core.subtask import SubTask
from crabray.core.task import Task

if TYPE_CHECKING:
    import networkx as nx


class SubTaskInstance(BaseModel):
    """A subtask with its attribute values, one node of a composed task (CRAB's model)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: SubTask
    attribute: dict[str, Any]
    output: Any = None
    id: str = Field(default_factory=lambda: str(uuid.uuid4()))

    def __hash__(self) -> int:
        """Instances are keyed by id, as in CRAB."""
        return hash(self.id)


def compose_evaluators(
    graphs: list[nx.DiGraph[Evaluator]], order: Iterable[tuple[int, int]]
) -> nx.DiGraph[Evaluator]:
    """One evaluator graph from the subtasks' graphs, as CRAB's ``generate_evaluator``.

    The union of ``graphs``, plus for each edge (u, v) of ``order`` an edge from
    every sink of ``graphs[u]`` to every source of ``graphs[v]``.

    Raises:
        networkx.NetworkXError: Two graphs share an evaluator object.
    """
    import networkx as nx  # CRAB's composed tasks only: every other task runs without it

    combined: nx.DiGraph[Evaluator] = nx.DiGraph(nx.union_all(graphs))
    for before, after in order:
        sinks = [n for n, degree in graphs[before].out_degree() if degree == 0]
        sources = [n for n, degree in graphs[after].in_degree() if degree == 0]
        combined.add_edges_from(itertools.product(sinks, sources))
    return combined


def parse_order(adjlist: str) -> nx.DiGraph[int]:
    """The subtask order of a task file's ``adjlist``: ``u v`` means u before v.

    Raises:
        TypeError, ValueError: The text is not an adjacency list of integers.
    """
    import networkx as nx  # CRAB's composed tasks only: every other task runs without it

    return nx.DiGraph(nx.parse_adjlist(adjlist.split("\n"), nodetype=int, create_using=nx.DiGraph))


def unique_actions(actions: Iterable[Action]) -> list[Action]:
    """Each action once (CRAB gathers them in a set), in the order first met."""
    return list(dict.fromkeys(actions))


class TaskGenerator:
    """Builds tasks from composed-task files over ``subtasks`` (CRAB's class).

    Args:
        attribute_pool: Attribute values by type; kept for CRAB's signature.
        subtasks: The subtask templates the files name by id.
    """

    def __init__(
        self,
        attribute_pool: dict[str, list[Any]] | None = None,
        subtasks: list[SubTask] | None = None,
    ) -> None:
        self.attribute_pool = dict(attribute_pool or {})
        self.task_mapping: dict[str, SubTask] = {t.id: t for t in subtasks or []}

    @staticmethod
    def generate_evaluator(subtasks_graph: nx.DiGraph[SubTaskInstance]) -> nx.DiGraph[Evaluator]:
        """The evaluator graph of a graph of subtask instances (CRAB's method)."""
        nodes = list(subtasks_graph.nodes)
        graphs = [n.task.evaluator_generator(**n.attribute) for n in nodes]  # type: ignore[misc]
        index = {node.id: i for i, node in enumerate(nodes)}
        return compose_evaluators(
            graphs, [(index[u.id], index[v.id]) for u, v in subtasks_graph.edges]
        )

    def get_task_from_file(self, file_name: str | Path) -> Task:
        """The task a composed-task JSON file describes (CRAB's method).

        Raises:
            ConfigError: Naming the file, the field and the reason.
        """
        file = str(file_name)
        try:
            config = json.loads(Path(file_name).read_text(encoding="utf-8"))
            order = parse_order(config["adjlist"])
            instances = [
                SubTaskInstance(
                    task=self.task_mapping[entry["task"]],
                    attribute=entry["attribute"],
                    output=entry.get("output"),
                )
                for entry in config["tasks"]
            ]
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(f"cannot read the task: {exc}", file=file) from exc
        except KeyError as exc:
            raise ConfigError(f"no {exc} here or among the subtasks", file=file) from exc
        import networkx as nx  # parse_order loaded it already

        graph: nx.DiGraph[SubTaskInstance] = nx.DiGraph()
        graph.add_nodes_from(instances[i] for i in order.nodes)
        graph.add_edges_from((instances[u], instances[v]) for u, v in order.edges)
        chosen = [n.task for n in graph.nodes]
        try:
            return Task(
                id=config["id"],
                description=config["description"],
                evaluator=self.generate_evaluator(graph),
                setup=unique_actions(a for t in chosen for a in t.setup),
                teardown=unique_actions(a for t in chosen for a in t.teardown),
                extra_action=unique_actions(a for t in chosen for a in t.extra_action),
            )
        except (KeyError, ValidationError) as exc:
            raise ConfigError(f"not a composed task: {exc}", file=file) from exc
