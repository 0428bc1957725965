"""``BenchmarkConfig``: environments + tasks + limits; and the agent's view of one task.

``action_space`` computes exactly what an agent may call in a task, under the
names it calls them by: sandbox actions qualified ``<env>-<action>`` when the
task has several environments, root actions (``submit``, ``complete``,
``fail``) always bare.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from crabray.core.action import Action
from crabray.core.environment import ROOT_ENV, EnvironmentConfig
from crabray.core.naming import check_identifier, qualify
from crabray.core.task import Task

DEFAULT_STEP_LIMIT = 30

DEFAULT_TIME_LIMIT_SEC = 3600.0
"""Time budget of an episode whose task and benchmark set none: an evaluator or a command
that never ends holds a sweep for an hour at most, not forever."""


class BoundAction(BaseModel):
    """An action as one task's agent sees it: the name it calls, the env it runs in."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    call_name: str
    env: str
    action: Action


class BenchmarkConfig(BaseModel):
    """A benchmark: what a run executes.

    Args:
        name: The suite's name in results and leaderboards.
        tasks: The tasks; ids unique.
        environments: The sandboxes tasks may use; names unique.
        default_env: The environment of tasks that name none (the only one if
            there is one).
        multienv: Tasks that name no environment use all of them.
        root_action_space: Extra actions of the root environment for every task.
        step_limit: Step budget of tasks that set none.
        time_limit_sec: Time budget in seconds of tasks that set none;
            ``DEFAULT_TIME_LIMIT_SEC`` (one hour) when unset.
        common_setup: Closed actions run before every task's own setup.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str = Field(min_length=1)
    tasks: list[Task]
    environments: list[EnvironmentConfig] = Field(default_factory=list)
    default_env: str | None = None
    multienv: bool = False
    root_action_space: list[Action] = Field(default_factory=list)
    step_limit: int = Field(default=DEFAULT_STEP_LIMIT, gt=0)
    time_limit_sec: float | None = Field(default=None, gt=0)
    common_setup: list[Action] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> BenchmarkConfig:
        _unique("task id", [t.id for t in self.tasks])
        _unique("environment name", [e.name for e in self.environments])
        names = {e.name for e in self.environments}
        if self.default_env is not None and self.default_env not in names:
            raise ValueError(f"default_env '{self.default_env}' is not one of {sorted(names)}")
        for index, task in enumerate(self.tasks):
            try:
                self._check_task(task)
            except ValueError as exc:
                raise ValueError(f"tasks.{index} (id '{task.id}'): {exc}") from None
        return self

    def environment(self, name: str) -> EnvironmentConfig:
        """The environment called ``name``; ``KeyError`` when there is none."""
        for env in self.environments:
            if env.name == name:
                return env
        raise KeyError(name)

    def task(self, task_id: str) -> Task:
        """The task with id ``task_id``; ``KeyError`` when there is none."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def task_environments(self, task: Task) -> list[EnvironmentConfig]:
        """The sandbox environments ``task`` runs with, in a stable order."""
        if task.environments:
            return [self.environment(name) for name in task.environments]
        if self.multienv:
            return list(self.environments)
        if self.default_env is not None:
            return [self.environment(self.default_env)]
        return list(self.environments[:1])

    def step_limit_of(self, task: Task) -> int:
        """The step budget of ``task``."""
        return task.max_steps or self.step_limit

    def time_limit_of(self, task: Task) -> float:
        """The time budget of ``task`` in seconds (``DEFAULT_TIME_LIMIT_SEC`` if none is set)."""
        return task.time_limit_sec or self.time_limit_sec or DEFAULT_TIME_LIMIT_SEC

    def action_space(self, task: Task, root_actions: Iterable[Action] = ()) -> list[BoundAction]:
        """What the agent may call in ``task``, under the names it calls them.

        Args:
            task: The task.
            root_actions: The episode's root actions (submit/complete/fail).

        Raises:
            ValueError: Two actions end up with the same name.
        """
        envs = self.task_environments(task)
        qualified = len(envs) > 1
        space: list[BoundAction] = []
        for env in envs:
            for act in env.action_space:
                name = qualify(env.name, act.name) if qualified else act.name
                space.append(BoundAction(call_name=name, env=env.name, action=act))
        for act in [*task.extra_actions, *self.root_action_space, *root_actions]:
            env_name = self._home_env(act, envs)
            name = (
                act.name if env_name == ROOT_ENV or not qualified else qualify(env_name, act.name)
            )
            space.append(BoundAction(call_name=name, env=env_name, action=act))
        _unique("action name", [b.call_name for b in space])
        return space

    def _home_env(self, act: Action, envs: list[EnvironmentConfig]) -> str:
        """The environment an action outside an action space runs in."""
        if act.local or act.env_name == ROOT_ENV:
            return ROOT_ENV
        if act.env_name:
            return act.env_name
        if len(envs) == 1:
            return envs[0].name
        raise ValueError(
            f"action '{act.name}' must say where it runs (env_name=... or .on(ENV)): "
            f"the task has environments {[e.name for e in envs]}"
        )

    def resolve_env(self, act: Action, task: Task) -> str:
        """The environment a setup action, evaluator or solution step of ``task`` runs in."""
        return self._home_env(act, self.task_environments(task))

    def _check_task(self, task: Task) -> None:
        known = {e.name for e in self.environments}
        missing = [name for name in task.environments if name not in known]
        if missing:
            raise ValueError(f"environments {missing} are not declared; known: {sorted(known)}")
        envs = self.task_environments(task)
        if not envs:
            raise ValueError("the benchmark declares no environment for it to run in")
        names = {e.name for e in envs} | {ROOT_ENV}
        for role, acts in (
            ("setup", [*self.common_setup, *task.setup]),
            ("teardown", task.teardown),
            ("evaluator", task.evaluators),
            ("solution", task.solution),
            ("scorer", [task.scorer] if task.scorer is not None else []),
        ):
            for act in acts:
                env_name = self._home_env(act, envs)
                if env_name not in names:
                    raise ValueError(
                        f"{role} '{act.name}' runs in environment '{env_name}', "
                        f"which the task does not use ({sorted(names - {ROOT_ENV})})"
                    )
        for act in task.extra_actions:
            check_identifier(act.name, "action name")
        self.action_space(task)


def _unique(what: str, names: list[str]) -> None:
    doubled = sorted(n for n, count in Counter(names).items() if count > 1)
    if doubled:
        raise ValueError(f"duplicate {what}s: {', '.join(doubled)}")
