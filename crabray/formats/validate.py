"""What loading a suite does not check: every task as an episode would set it up.

A loader validates each task's own fields. What only an episode would
otherwise find out is checked here, for every task of a loaded suite at once,
so that a run starts only on a suite without such problems: the agent's
action space can be built (no two actions under one name), and every step of
the task's reference solution calls an action the agent can call in the
environment it names, and every argument bound to an evaluator, setup step,
solution step or scorer validates against the action's parameters. Checks
that need a layer this package must not import (a backend's settings) come
in as ``check_environment`` from the caller, ``crabray.run.check_suite``.
"""

from __future__ import annotations

from collections.abc import Callable

from crabray.actions.root import root_actions
from crabray.core import Action, BenchmarkConfig, BoundAction, EnvironmentConfig, Task
from crabray.core.errors import ConfigError, MissingDependencyError
from crabray.formats.suite import Suite, SuiteErrors

EnvironmentCheck = Callable[[EnvironmentConfig], None]
"""Checks one environment without starting it; raises ``ConfigError`` naming the field."""


def solution_bindings(
    benchmark: BenchmarkConfig, task: Task, space: list[BoundAction]
) -> list[BoundAction]:
    """The action of ``space`` each step of the task's reference solution calls, in order.

    Raises:
        ConfigError: A solution step is not in the agent's action space.
    """
    bindings = []
    for index, step in enumerate(task.solution):
        env = benchmark.resolve_env(step, task)
        match = next((b for b in space if b.env == env and b.action.name == step.name), None)
        if match is None:
            offered = ", ".join(b.call_name for b in space)
            raise ConfigError(
                f"step {index} calls '{step.name}' in environment '{env}', which the agent "
                f"cannot call there; its action space: {offered}",
                field=f"tasks[{task.id}].solution",
            )
        bindings.append(match)
    return bindings


def check_task(benchmark: BenchmarkConfig, task: Task, source: str | None = None) -> None:
    """Check what only an episode would otherwise find: the action space and the solution.

    Raises:
        ConfigError: Naming the task and what is wrong with it.
    """
    try:
        space = benchmark.action_space(task, root_actions(task))
    except ValueError as exc:
        raise ConfigError(str(exc), file=source, field=f"tasks[{task.id}]") from exc
    try:
        solution_bindings(benchmark, task, space)
    except ConfigError as exc:
        raise ConfigError(exc.reason, file=source, field=exc.field) from exc


def argument_problems(task: Task, source: str | None = None) -> list[ConfigError]:
    """The arguments bound to the task's evaluators, setup, teardown, solution and scorer
    that their parameter models refuse (a string where an int is wanted).

    An episode would find each only when it runs the action: an evaluator
    with such an argument fails at every step as an ``evaluator_error``.
    Checked against each action's pydantic parameters, as running it does.
    """
    groups: list[tuple[str, list[Action]]] = [
        ("evaluator", list(task.evaluators)),
        ("setup", task.setup),
        ("teardown", task.teardown),
        ("solution", task.solution),
        ("scorer", [task.scorer] if task.scorer is not None else []),
    ]
    problems = []
    for group, actions in groups:
        for action in actions:
            for where, message in action.bound_problems():
                problems.append(
                    ConfigError(
                        f"{action.label}: {message}",
                        file=source,
                        field=f"tasks[{task.id}].{group}.{where}",
                    )
                )
    return problems


def tasks_without_solution(suite: Suite, task_ids: list[str] | None = None) -> list[str]:
    """The tasks (of ``task_ids``, else all) without a reference solution for the oracle."""
    wanted = suite.task_ids if task_ids is None else task_ids
    return [task_id for task_id in wanted if not suite.entry(task_id).task.solution]


def oracle_problems(suite: Suite, task_ids: list[str] | None = None) -> list[ConfigError]:
    """One problem per task the oracle agent has nothing to replay for (no ``solution``)."""
    return [
        ConfigError(
            "no reference solution: the oracle agent (`--agent oracle`) has nothing to "
            "replay; add a `solution` to the task, or leave it out of oracle runs",
            file=_where(suite.entry(task_id).task, suite.ref.path),
            field=f"tasks[{task_id}].solution",
        )
        for task_id in tasks_without_solution(suite, task_ids)
    ]


def validate_suite(suite: Suite, check_environment: EnvironmentCheck | None = None) -> None:
    """Check every task of a loaded suite as an episode would; report all problems at once.

    Args:
        suite: A loaded suite.
        check_environment: Also run on each environment once (e.g. its backend's
            settings); a ``ConfigError`` it raises is reported under the environment.

    Raises:
        SuiteErrors: One entry per task or environment that would fail before its agent
            starts.
    """
    problems: list[ConfigError] = []
    checked: set[object] = set()
    missing: dict[str, list[int]] = {}  # a missing package: [its problem's index, environments]
    for entry in suite.entries.values():
        source = _where(entry.task, suite.ref.path)
        try:
            check_task(entry.benchmark, entry.task, source=source)
        except ConfigError as exc:
            problems.append(exc)
        problems += argument_problems(entry.task, source)
        if check_environment is None:
            continue
        for env in entry.benchmark.task_environments(entry.task):
            # settings read from one file's table are checked (and reported) once
            key = env.settings_source or id(env)
            if key in checked:
                continue
            checked.add(key)
            found = _environment_problem(env, check_environment, suite.ref.path)
            if found is None:
                continue
            problem, package = found
            if package is None:
                problems.append(problem)
            elif package in missing:  # one missing package is one problem, said once
                missing[package][1] += 1
            else:
                missing[package] = [len(problems), 1]
                problems.append(problem)
    for index, environments in missing.values():
        if environments > 1:
            problems[index] = _needed_by_more(problems[index], environments - 1)
    if problems:
        raise SuiteErrors(suite.ref.path, problems)


def _needed_by_more(problem: ConfigError, others: int) -> ConfigError:
    """``problem`` (a missing package) saying how many more environments need the package."""
    if others == 1:
        more = "1 other environment of the suite needs"
    else:
        more = f"{others} other environments of the suite need"
    return ConfigError(f"{problem.reason} ({more} it too)", file=problem.file, field=problem.field)


def _environment_problem(
    env: EnvironmentConfig, check: EnvironmentCheck, source: str
) -> tuple[ConfigError, str | None] | None:
    """The problem ``check`` finds in ``env``, reported where its settings were written, and
    the package it misses when it is a missing package (None otherwise); None without one.

    Settings a suite format read from a file of its own are reported against
    that file and table (``env.settings_source``), else against the environment.
    """
    try:
        check(env)
    except ConfigError as exc:
        package = exc.missing if isinstance(exc, MissingDependencyError) else None
        origin = env.settings_source
        if origin is not None:
            setting = (exc.field or "").removeprefix("backend_settings").lstrip(".")
            where = ".".join(part for part in (origin.field, setting) if part)
            return ConfigError(exc.reason, file=origin.file, field=where), package
        where = f"environments[{env.name}]" + (f".{exc.field}" if exc.field else "")
        return ConfigError(exc.reason, file=source, field=where), package
    return None


def _where(task: Task, default: str) -> str:
    """``file:line`` of the ``Task(...)`` call of a Python suite; the suite's path otherwise."""
    site = task.defined_at
    return default if site is None else f"{site[0]}:{site[1]}"
