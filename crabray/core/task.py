"""``Task``: an instruction, the environments it needs, setup, evaluation and limits."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from crabray.core.actions import Action
from crabray.core.errors import GraphError
from crabray.core.evaluators import Evaluator, evaluator
from crabray.core.graph import GraphEvaluator, is_digraph


@evaluator(local=True)
def graded_by_scorer() -> bool:
    """Stands for a task's scorer in its evaluator graph: never passes during the episode.

    A task graded once after the agent is done (``Task.scorer``) has no
    per-step evaluators; this node keeps the graph well-formed.
    """
    return False


class Task(BaseModel):
    """One task of a benchmark.

    CRAB's field names (``setup_action``, ``teardown_action``, ``extra_action``)
    are accepted as aliases, so a CRAB task ports by changing its imports.

    Args:
        id: Unique within the benchmark.
        description: The instruction the agent gets.
        environments: Names of the benchmark environments the task uses;
            empty means the benchmark's default (or all, in multi-env mode).
        setup: Closed actions run before the agent starts (after reset).
        teardown: Closed actions run after the episode, whatever its outcome.
        evaluator: An evaluator, a list of evaluators (a chain), a networkx
            DAG of evaluators, or a ``GraphEvaluator``.
        extra_actions: Actions added to the agent's action space for this task
            (such as ``submit``).
        max_steps: Step budget; the benchmark's ``step_limit`` when unset.
        time_limit_sec: Wall-clock budget of the episode in seconds, setup included; the
            benchmark's ``time_limit_sec`` when unset.
        tags: Labels for filtering and leaderboard breakdowns.
        metadata: Anything else worth keeping with the task.
        solution: A reference solution: closed actions the oracle agent replays.
        scorer: A closed action run once after the agent is done (whatever ended the
            episode, except a setup or sandbox failure), before teardown; it returns
            the score, a float in [0, 1] (or a bool), or a ``Score`` that also carries
            the checkpoints graded; success means 1. A scorer parameter named
            ``trajectory`` receives the episode's steps as JSON text. When set,
            ``evaluator`` may be omitted (it defaults to ``graded_by_scorer``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True, frozen=True)

    id: str = Field(min_length=1)
    description: str = Field(min_length=1)
    environments: list[str] = Field(default_factory=list)
    setup: list[Action] = Field(default_factory=list, alias="setup_action")
    teardown: list[Action] = Field(default_factory=list, alias="teardown_action")
    evaluator: GraphEvaluator
    extra_actions: list[Action] = Field(default_factory=list, alias="extra_action")
    max_steps: int | None = Field(default=None, gt=0)
    time_limit_sec: float | None = Field(default=None, gt=0)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    solution: list[Action] = Field(default_factory=list)
    scorer: Action | None = None

    _defined_at: tuple[str, int] | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        """Record the file and line of the ``Task(...)`` call, when a suite author wrote it.

        Validation reports a problem found later (by the benchmark, or before
        a run) at the task's own line, not at the line of the call holding it.
        """
        self._defined_at = _author_call_site()

    @property
    def defined_at(self) -> tuple[str, int] | None:
        """(file, line) of the ``Task(...)`` call in a suite module; None when a loader built it."""
        return self._defined_at

    @model_validator(mode="before")
    @classmethod
    def _scored_needs_no_graph(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("scorer") is not None and "evaluator" not in data:
            return {**data, "evaluator": graded_by_scorer}
        return data

    @field_validator("scorer")
    @classmethod
    def _scorer_closed(cls, scorer: Action | None) -> Action | None:
        if scorer is not None and not scorer.is_closed:
            raise ValueError(f"'{scorer.name}' needs arguments {scorer.required_parameters}")
        return scorer

    @field_validator("setup", "teardown", "extra_actions", "solution", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, Action) else value

    @field_validator("setup", "teardown", "solution")
    @classmethod
    def _closed(cls, actions: list[Action]) -> list[Action]:
        for index, act in enumerate(actions):
            if not act.is_closed:
                raise ValueError(
                    f"item {index} ('{act.name}') needs arguments {act.required_parameters}; "
                    f"bind them, e.g. {act.name}({act.required_parameters[0]}=...)"
                )
        return actions

    @field_validator("evaluator", mode="before")
    @classmethod
    def _as_graph(cls, value: Any) -> GraphEvaluator:
        if isinstance(value, GraphEvaluator):
            return value
        if not (isinstance(value, Evaluator | list | tuple) or is_digraph(value)):
            raise ValueError(
                "must be an evaluator, a list of evaluators, a networkx DiGraph of "
                f"evaluators or a GraphEvaluator, not {type(value).__name__}"
            )
        try:
            graph = GraphEvaluator(value)
        except GraphError as exc:
            raise ValueError(str(exc)) from exc
        for node in graph.nodes:
            if not node.is_closed:
                raise ValueError(
                    f"evaluator '{node.label}' needs arguments {node.required_parameters}; "
                    f"bind them, e.g. {node.name}({node.required_parameters[0]}=...)"
                )
        return graph

    @property
    def evaluators(self) -> list[Evaluator]:
        """Every evaluator node of the task's graph."""
        return self.evaluator.nodes

    @property
    def requires_submit(self) -> bool:
        """Whether any evaluator waits for the agent's submission."""
        return any(node.require_submit for node in self.evaluators)


def _author_call_site() -> tuple[str, int] | None:
    """The first caller outside pydantic and crabray.core; None when that is crabray's own code.

    crabray's loaders (task-JSON, task folders) build tasks from files of their
    own and name those files themselves.
    """
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if not module.startswith(("pydantic", "crabray.core", "typing")):
            if module == "crabray" or module.startswith("crabray."):
                return None
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None
