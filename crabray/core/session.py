"""``Benchmark``: CRAB's step-by-step controller, for loops that drive episodes themselves.

``crabray run`` drives episodes with its own loop. Code written against CRAB
(its ``Experiment``, a custom agent, an RL trainer) drives them itself:
``start_task``, then ``step`` / ``observe`` until a step says ``terminated``,
then ``close_task``. ``create_benchmark(config)`` returns this object, as in
CRAB; ``Benchmark.config`` is the ``BenchmarkConfig`` it was made from, for
code that used the returned value as the config.

The environments are CRAB's in-process ``Environment`` objects plus a ``root``
one holding the root actions (``submit``, a task's ``extra_action`` of
``env_name="root"``). Evaluation follows the episode's rules: after every
step the ready nodes of the task's evaluator graph run, each in the
environment ``crabray run`` would run it in, and a passed node stays passed.

Where it differs from CRAB, it does as ``crabray run`` does: the environments'
trajectories and the root's signals start empty with every task (CRAB keeps
them, so a former task's ``submit`` could pass the next one), a task's own
``max_steps`` bounds its steps, and an evaluator waiting for a submission
(``require_submit``) runs only after ``submit``.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from crabray.core.actions import Action
from crabray.core.benchmark import BenchmarkConfig
from crabray.core.env import AgentSignals
from crabray.core.environment import ROOT_ENV, Environment, create_environment
from crabray.core.errors import ActionError
from crabray.core.evaluators import Evaluator
from crabray.core.graph import GraphProgress
from crabray.core.naming import split_qualified
from crabray.core.task import Task

logger = logging.getLogger(__name__)

COMPLETE = "complete"
"""The action name that ends a task as it stands, whatever environment has it (CRAB's rule)."""


class StepResult(BaseModel):
    """What one ``Benchmark.step`` did, under CRAB's field names.

    ``info["terminate_reason"]`` says why a terminated step ended the task,
    with CRAB's words: ``success``, ``agent_complete``, ``agent_fail``,
    ``reach_max_step``, ``action_format_error``, ``env_exception``,
    ``evaluator_exception`` (then ``info["exception_detail"]`` holds the
    traceback).
    """

    truncated: bool = Field(description="Always False, as in CRAB.")
    terminated: bool = Field(description="The task is over; call start_task for the next.")
    action_returns: Any = Field(description="What the action returned (None if it did not run).")
    evaluation_results: dict[str, Any] = Field(
        description="The evaluator graph's progress: CRAB's total_nodes, complete_nodes, "
        "completeness, completeness_per_action, and crabray's success and steps_to_complete."
    )
    info: dict[str, Any] = Field(description="terminate_reason and exception_detail, if any.")
    success: bool = Field(default=False, description="The graph's final evaluator passed.")


class Benchmark:
    """CRAB's benchmark controller over in-process environments.

    Args:
        config: The benchmark.
        prompting_tools: CRAB's prompting tools for ``observe_with_prompt``: by
            environment name, by observation name, an action taking the observation.

    Raises:
        ActionError: In single-environment mode, two environments have an action
            or observation of the same name.
    """

    def __init__(
        self,
        config: BenchmarkConfig,
        prompting_tools: dict[str, dict[str, Action]] | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.tasks = config.tasks
        self.multienv = config.multienv
        self.step_limit = config.step_limit
        self.common_setup = config.common_setup
        self.prompting_tools = dict(prompting_tools or {})
        environments = [create_environment(env) for env in config.environments]
        self.root_env = Environment(
            name=ROOT_ENV,
            action_space=list(config.root_action_space),
            observation_space=[],
            description="The crab benchmark root. You can submit your answer or "
            "complete the task using this environment.",
        )
        self.root_env.contained_envs = {env.name: env for env in environments}  # type: ignore[attr-defined]
        self.environment_map: dict[str, Environment] = {
            env.name: env for env in [*environments, self.root_env]
        }
        self.default_env = config.default_env or (
            environments[0].name if not self.multienv and len(environments) == 1 else ROOT_ENV
        )
        self.action_map: dict[str, Environment] = {}
        if not self.multienv:
            self._verify_spaces()
            self._generate_action_map()
        self.current_task: Task | None = None
        self.current_evaluator: GraphProgress | None = None
        self.step_cnt = 0

    def start_task(self, task_id: str) -> tuple[Task, dict[str, list[Action]]]:
        """Reset the environments, set up task ``task_id`` and return it with its action space.

        Raises:
            RuntimeError: A task is running (``close_task`` it first).
            KeyError: The benchmark has no task ``task_id``.
        """
        if self.current_task is not None:
            raise RuntimeError(
                f"task '{self.current_task.id}' is running; call close_task() before starting "
                "another"
            )
        try:
            task = self.config.task(task_id)
        except KeyError:
            known = [t.id for t in self.tasks]
            raise KeyError(
                f"benchmark '{self.name}' has no task '{task_id}'; its tasks: {known}"
            ) from None
        self.current_task = task
        self._reset_environments()
        for act in [*self.common_setup, *task.setup]:
            self._env_of(act).take_action(act)
        for act in task.extra_actions:
            env = self._env_of(act)
            env.set_action(act)
            if not self.multienv:
                self.action_map[act.name] = env
        self.current_evaluator = task.evaluator.start()
        self.step_cnt = 0
        return task, self.export_action_space()

    def close_task(self) -> None:
        """Run the task's teardown and end it.

        Raises:
            RuntimeError: No task is running.
        """
        task = self._running()
        self.current_task = None
        for act in task.teardown:
            self._env_of(act).take_action(act)

    def step(
        self,
        action: str,
        parameters: dict[str, Any] | None = None,
        env_name: str | None = None,
    ) -> StepResult:
        """Run one agent action, then the evaluators that are ready.

        A failure of the action, of finding it or of an evaluator ends the
        task (CRAB's rule) with the traceback in ``info``; it does not raise.

        Args:
            action: The action's name; in multi-environment mode also
                ``<env>-<action>``, the name ``crabray run`` gives agents.
            parameters: Its arguments.
            env_name: The environment it runs in; found from the name when None.

        Raises:
            RuntimeError: No task is running.
        """
        task = self._running()
        progress = self._progress()
        if action == COMPLETE:
            return self._result(None, "agent_complete", close=False)
        if env_name is None and self.multienv:
            env_name, action = split_qualified(action)
        try:
            environment = self._get_env(env_name, action)
        except KeyError:
            return self._failed(None, "action_format_error")
        try:
            returns = environment.step(action, dict(parameters or {}))
        except Exception:
            environment.reset()
            return self._failed(None, "env_exception")
        self.step_cnt += 1
        try:
            progress.step(self._judge, self.step_cnt)
        except Exception:
            environment.reset()
            return self._failed(returns, "evaluator_exception")
        reason = None
        if progress.success:
            reason = "success"
        elif self.root_env.signals.failed:
            reason = "agent_fail"
        elif self.root_env.signals.completed:
            reason = "agent_complete"
        elif self.step_cnt >= self.config.step_limit_of(task):
            reason = "reach_max_step"
        if reason is None:
            return self._result(returns, None)
        environment.reset()
        return self._result(returns, reason)

    def evaluate(self) -> dict[str, Any]:
        """Run the ready evaluators now and return the graph's progress (CRAB's ``stat``)."""
        self._running()
        progress = self._progress()
        progress.step(self._judge, self.step_cnt)
        return _stat(progress)

    def observe(self) -> dict[str, dict[str, Any]]:
        """Every environment's observations, by environment then observation name.

        In single-environment mode they are merged under ``default_env``.
        """
        observations = {name: env.observe() for name, env in self.environment_map.items()}
        return observations if self.multienv else self._merge_dicts(observations)

    def observe_with_prompt(
        self,
    ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """The observations, and the prompting tools' renderings of them.

        Returns:
            (observations, prompts), both by environment then observation name;
            an observation without a prompting tool has no prompt.
        """
        observations: dict[str, dict[str, Any]] = {}
        prompts: dict[str, dict[str, Any]] = {}
        for name, env in self.environment_map.items():
            tools = self.prompting_tools.get(name, {})
            observations[name], prompts[name] = env.observe_with_prompt(tools)
        if self.multienv:
            return observations, prompts
        return self._merge_dicts(observations), self._merge_dicts(prompts)

    def reset(self) -> None:
        """Forget the running task's progress and reset every environment."""
        self.current_evaluator = None
        self._reset_environments()

    def export_action_space(self) -> dict[str, list[Action]]:
        """The actions an agent may call, by environment.

        In single-environment mode they are merged under ``default_env``.
        """
        spaces = {name: env.action_space for name, env in self.environment_map.items()}
        if self.multienv:
            return spaces
        return {self.default_env: [act for space in spaces.values() for act in space]}

    def get_env_descriptions(self) -> dict[str, str]:
        """Each environment's description, by name."""
        return {name: env.description for name, env in self.environment_map.items()}

    def _running(self) -> Task:
        if self.current_task is None:
            raise RuntimeError("no task is running; call start_task(task_id) first")
        return self.current_task

    def _progress(self) -> GraphProgress:
        if self.current_evaluator is None:
            raise RuntimeError("the task's evaluators were reset; call start_task(task_id) again")
        return self.current_evaluator

    def _judge(self, node: Evaluator) -> bool:
        """One evaluator's verdict, in the environment ``crabray run`` runs it in."""
        signals = self.root_env.signals
        if node.require_submit and not signals.submitted:
            return False
        return node.evaluate(self._env_of(node), signals.submission)

    def _env_of(self, act: Action) -> Environment:
        """Where a setup, teardown, extra action or evaluator of the running task runs."""
        return self.environment_map[self.config.resolve_env(act, self._running())]

    def _get_env(self, env_name: str | None, action_name: str) -> Environment:
        if env_name is not None:
            return self.environment_map[env_name]
        if not self.multienv:
            return self.action_map[action_name]
        return self.environment_map[self.default_env]

    def _failed(self, returns: Any, reason: str) -> StepResult:
        detail = traceback.format_exc()
        logger.warning("task '%s' ended by %s:\n%s", self._running().id, reason, detail)
        return self._result(returns, reason, detail=detail)

    def _result(
        self, returns: Any, reason: str | None, detail: str | None = None, close: bool = True
    ) -> StepResult:
        progress = self._progress()
        info: dict[str, Any] = {}
        if reason is not None:
            info["terminate_reason"] = reason
        if detail is not None:
            info["exception_detail"] = detail
        if reason is not None and close:
            self.close_task()
        return StepResult(
            truncated=False,
            terminated=reason is not None,
            action_returns=returns,
            evaluation_results=_stat(progress),
            info=info,
            success=progress.success,
        )

    def _verify_spaces(self) -> None:
        for space in ("action_space", "observation_space"):
            names = [a.name for env in self.environment_map.values() for a in getattr(env, space)]
            doubled = sorted({n for n in names if names.count(n) > 1})
            if doubled:
                raise ActionError(
                    f"benchmark '{self.name}': {space} names {doubled} are in several "
                    "environments; rename them or set multienv=True"
                )

    def _generate_action_map(self) -> None:
        self.action_map = {
            act.name: env for env in self.environment_map.values() for act in env.action_space
        }

    def _reset_environments(self) -> None:
        for env in self.environment_map.values():
            env.reset()
            env.trajectory.clear()
            env.signals = AgentSignals()
        if not self.multienv:
            self._generate_action_map()

    def _merge_dicts(self, by_env: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        merged: dict[str, Any] = {}
        for values in by_env.values():
            merged.update(values)
        return {self.default_env: merged}


def _stat(progress: GraphProgress) -> dict[str, Any]:
    """CRAB's ``GraphEvaluator.stat()`` keys, with crabray's success and steps_to_complete."""
    stats = progress.stats()
    return {
        "total_nodes": stats.total_nodes,
        "complete_nodes": stats.passed_nodes,
        "completeness": stats.completeness,
        "completeness_per_action": stats.completeness_per_action,
        "success": stats.success,
        "steps_to_complete": stats.steps_to_complete,
    }


def create_benchmark(config: BenchmarkConfig) -> Benchmark:
    """CRAB's factory: the ``Benchmark`` that drives ``config``'s tasks step by step.

    ``crabray run FILE`` finds the benchmark in a module either way: as a
    ``BenchmarkConfig`` or as the ``Benchmark`` made from it.

    Raises:
        TypeError: ``config`` is not a ``BenchmarkConfig``.
    """
    if not isinstance(config, BenchmarkConfig):
        raise TypeError(f"create_benchmark takes a BenchmarkConfig, not {type(config).__name__}")
    return Benchmark(config)


def benchmark_configs(values: Iterable[object]) -> list[BenchmarkConfig]:
    """The ``BenchmarkConfig`` objects among a module's values, each once.

    A CRAB module binds ``create_benchmark(config)`` as often as the config
    itself; a loader finds the benchmark either way (``Benchmark.config``).
    """
    found: dict[int, BenchmarkConfig] = {}
    for value in values:
        config = value.config if isinstance(value, Benchmark) else value
        if isinstance(config, BenchmarkConfig):
            found.setdefault(id(config), config)
    return list(found.values())
