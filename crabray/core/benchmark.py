"""``BenchmarkConfig``: environments + tasks + limits; and the agent's view of one task.

``action_space`` computes exactly what an agent may call in a task, under the
names it calls them by: sandbox actions qualified ``<env>-<action>`` when the
task has several environments, root actions (``submit``, ``complete``,
``fail``) always bare. Root actions the suite gives (``root_action_space``,
a task's ``extra_actions``) take the place of crabray's defaults of the same
name, and a task's extra action replaces a benchmark root action of its name,
as CRAB's ``set_action`` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from crabray.core.actions import Action
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


class TaskProblems(ValueError):
    """Every task of a benchmark that is inconsistent with it, by index, in one error.

    Pydantic carries it as the ``error`` of the benchmark's validation error,
    so a loader can report each task at its own line (``Task.defined_at``).

    Args:
        problems: (index in ``tasks``, message) of each inconsistent task.
    """

    def __init__(self, problems: list[tuple[int, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


class BenchmarkConfig(BaseModel):
    """A benchmark: what a run executes.

    Args:
        name: The suite's name in results and leaderboards.
        tasks: The tasks; ids unique.
        description: What the benchmark measures, in a sentence or two; the results
            site shows it under the suite's name.
        environments: The sandboxes tasks may use; names unique.
        default_env: The environment of tasks that name none (the only one if
            there is one).
        multienv: Tasks that name no environment use all of them.
        root_action_space: Extra actions of the root environment for every task;
            they replace crabray's default root actions of the same name.
        step_limit: Step budget of tasks that set none.
        time_limit_sec: Time budget in seconds of tasks that set none;
            ``DEFAULT_TIME_LIMIT_SEC`` (one hour) when unset.
        common_setup: Closed actions run before every task's own setup.
        prompting_tools: CRAB's field, refused when set: ``crabray run`` shows
            observations to agents as they are; give the tools to
            ``Benchmark(config, prompting_tools=...)`` for ``observe_with_prompt``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str = Field(min_length=1)
    tasks: list[Task]
    description: str = ""
    environments: list[EnvironmentConfig] = Field(default_factory=list)
    default_env: str | None = None
    multienv: bool = False
    root_action_space: list[Action] = Field(default_factory=list)
    step_limit: int = Field(default=DEFAULT_STEP_LIMIT, gt=0)
    time_limit_sec: float | None = Field(default=None, gt=0)
    common_setup: list[Action] = Field(default_factory=list)
    prompting_tools: dict[str, dict[str, Action]] = Field(default_factory=dict)

    @field_validator("prompting_tools")
    @classmethod
    def _no_prompting_tools(
        cls, value: dict[str, dict[str, Action]]
    ) -> dict[str, dict[str, Action]]:
        if value:
            raise ValueError(
                "CRAB's prompting tools (observations rewritten before the agent sees them) "
                "are not supported; leave it empty"
            )
        return {}

    @model_validator(mode="after")
    def _consistent(self) -> BenchmarkConfig:
        _unique("task id", [t.id for t in self.tasks])
        _unique("environment name", [e.name for e in self.environments])
        names = {e.name for e in self.environments}
        if self.default_env is not None and self.default_env not in names:
            raise ValueError(f"default_env '{self.default_env}' is not one of {sorted(names)}")
        problems = []
        for index, task in enumerate(self.tasks):
            try:
                self._check_task(task)
            except ValueError as exc:
                problems.append((index, f"tasks.{index} (id '{task.id}'): {exc}"))
        if problems:
            raise TaskProblems(problems)
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
        for act in _merged(task.extra_actions, self.root_action_space, list(root_actions)):
            env_name = self._home_env(act, envs)
            name = (
                act.name if env_name == ROOT_ENV or not qualified else qualify(env_name, act.name)
            )
            space.append(BoundAction(call_name=name, env=env_name, action=act))
        _unique("action name", [b.call_name for b in space])
        return space

    def _home_env(self, act: Action, envs: list[EnvironmentConfig]) -> str:
        """The environment an action outside an action space runs in.

        Its ``env_name`` when it names one, also when it is ``local`` (as in CRAB:
        a local evaluator of environment X runs in the episode with ``env`` the
        environment X, e.g. to read X's ``trajectory``); else the root environment
        for a local action, else the task's only environment.
        """
        if act.env_name:
            return act.env_name
        if act.local:
            return ROOT_ENV
        if len(envs) == 1:
            return envs[0].name
        raise ValueError(
            f"action '{act.name}' must say where it runs (env_name=... or .on(ENV)): "
            f"the task has environments {[e.name for e in envs]}"
        )

    def reset_env(self, act: Action, env: EnvironmentConfig) -> str:
        """The environment a reset action of ``env`` runs in.

        ``env`` itself, unless the action names another environment.
        """
        return act.env_name or env.name

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
        for env in envs:
            for act in env.reset:
                if self.reset_env(act, env) not in names:
                    raise ValueError(
                        f"reset '{act.name}' of environment '{env.name}' runs in environment "
                        f"'{act.env_name}', which the task does not use "
                        f"({sorted(names - {ROOT_ENV})})"
                    )
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


def _merged(
    task_actions: list[Action], suite_actions: list[Action], defaults: list[Action]
) -> list[Action]:
    """Root and extra actions by precedence.

    The task's, then the benchmark's, then crabray's defaults; a later one whose
    name an earlier list has is left out.
    """
    task_names = {a.name for a in task_actions}
    suite = [a for a in suite_actions if a.name not in task_names]
    given = task_names | {a.name for a in suite}
    return [*task_actions, *suite, *(a for a in defaults if a.name not in given)]


def _unique(what: str, names: list[str]) -> None:
    doubled = sorted(n for n, count in Counter(names).items() if count > 1)
    if doubled:
        raise ValueError(f"duplicate {what}s: {', '.join(doubled)}")
