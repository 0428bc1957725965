"""Load a CRAB composed-task dataset (crab-benchmark-v0's layout) as a suite.

A dataset is a folder with Python modules at its root, defining ``SubTask``
templates (module-level, alone or in lists), and task files, ``*.json`` in the
folder or any folder below it, each ``{"description", "tasks", "adjlist",
"id"}``. Detection: a folder with a module at its root and a JSON file below it
holding both ``tasks`` and ``adjlist``. See ``docs/crab-datasets.md``.

Environments: a module-level ``BenchmarkConfig`` in one of the modules (as
CRAB's ``main.py`` builds one with ``tasks=[]``) gives the environments, root
actions and limits, and its own tasks join the JSON ones. Without one, the
environment names the subtasks' actions give resolve to CRAB's own
environments (``_environments.py``: ``ubuntu`` is its Ubuntu desktop on the
crab-desktop image), any other name to a local-backend environment
(``sandbox`` when none is named). Tasks using an environment crabray cannot
provide (CRAB's ``android``) are listed in ``Suite.unsupported``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import itertools
import json
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from crabray.actions import ROOT_ACTIONS, submit
from crabray.core import ROOT_ENV, Action, BenchmarkConfig, EnvironmentConfig, SubTask, Task
from crabray.core.benchmark import TaskProblems
from crabray.core.errors import ActionError, ConfigError
from crabray.core.session import benchmark_configs
from crabray.formats import python as python_format
from crabray.formats.base import SuiteFormat, register_format
from crabray.formats.crab_dataset._compose import Composed, Subtasks, compose, where
from crabray.formats.crab_dataset._environments import ROOT_ACTIONS as CRAB_ROOT_ACTIONS
from crabray.formats.crab_dataset._environments import UNSUPPORTED_ENVIRONMENTS, environment
from crabray.formats.crab_dataset._missing import standing_in
from crabray.formats.suite import Suite, SuiteErrors, SuiteRef

logger = logging.getLogger(__name__)

FORMAT = "crab-dataset"
DEFAULT_ENV = "sandbox"
DETECT_LIMIT = 50
"""JSON files detection reads at most before deciding a folder is not a dataset."""


def detect(path: Path) -> bool:
    """Whether ``path`` is a composed-task dataset: a folder with a Python module at its root
    and, in it or below, a JSON file holding ``tasks`` and ``adjlist``."""
    if not path.is_dir() or not python_format._modules(path):
        return False
    return any(_looks_composed(f) for f in itertools.islice(_json_files(path), DETECT_LIMIT))


def _looks_composed(file: Path) -> bool:
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(raw, dict) and "tasks" in raw and "adjlist" in raw


def _json_files(path: Path) -> Any:
    """Task files: ``*.json`` at any depth, leaving out hidden and ``_``-prefixed folders."""
    for file in path.rglob("*.json"):
        if not any(p.startswith((".", "_")) for p in file.relative_to(path).parts):
            yield file


def load(path: Path) -> Suite:
    """Import the dataset's modules, build every task file's task, and collect the problems.

    Raises:
        SuiteErrors: Every problem, each naming its file, line and field; the tasks
            that did load travel with it as ``partial``.
    """
    errors: list[ConfigError] = []
    modules = _import_modules(path, errors)
    broken = [Path(e.file).name for e in errors if e.file]
    subtasks = _subtasks(modules, errors)
    subtasks.broken_modules = broken
    composed: list[Composed] = []
    for file in sorted(_json_files(path)):
        try:
            composed.append(compose(file, subtasks))
        except SuiteErrors as exc:
            errors += exc.errors
        except ConfigError as exc:
            errors.append(exc)
    template = _template(modules, errors)
    written = _python_tasks(modules, template)
    composed = _unique_ids(composed, written, errors)
    if not errors and not composed and not written:
        errors.append(
            ConfigError("holds no task files (*.json with tasks and adjlist)", file=str(path))
        )
    suite = Suite(SuiteRef(path=str(path), format=FORMAT), path.name)
    provided = {e.name for e in template[1].environments} if template is not None else set()
    composed, written = _supported(composed, written, provided, suite.unsupported)
    benchmark = _benchmark(path, template, composed, written, errors)
    if benchmark is not None and benchmark.tasks:
        suite.add(benchmark, str(path))
    if errors:
        raise SuiteErrors(str(path), errors, partial=suite if suite.entries else None)
    return suite


@register_format(FORMAT)
class CrabDatasetFormat(SuiteFormat):
    """CRAB's composed-task datasets; tried before Python suites, whose modules they also hold.
    They take no options: a module's ``BenchmarkConfig`` names other backends."""

    detect_priority = 40

    def detect(self, path: Path) -> bool:
        return detect(path)

    def load(self, path: Path, **options: Any) -> Suite:
        return load(path, **options)


def _import_modules(path: Path, errors: list[ConfigError]) -> list[tuple[Path, ModuleType]]:
    """Import the dataset's modules as one package, so that they may import one another
    relatively (crab-benchmark-v0's ``from .ubuntu_subtasks import *``) or by name."""
    package = _package(path)
    modules = []
    with standing_in(path) as stood_in:
        for file in python_format._modules(path):
            try:
                modules.append((file, importlib.import_module(f"{package}.{file.stem}")))
            except Exception as exc:
                errors += python_format._load_errors(file, file.resolve(), exc)
    for module, importer in stood_in.items():
        logger.info("%s: module '%s' is not installed; tasks needing it fail", importer, module)
    return modules


def _package(path: Path) -> str:
    """A package named for the folder (unique per path) whose modules are the folder's files."""
    folder = str(path.resolve())
    name = f"crabray_dataset_{hashlib.sha1(folder.encode()).hexdigest()[:12]}"
    if name not in sys.modules:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [folder]
        sys.modules[name] = importlib.util.module_from_spec(spec)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return name


def _subtasks(modules: list[tuple[Path, ModuleType]], errors: list[ConfigError]) -> Subtasks:
    """Every module-level ``SubTask`` (alone or in a list or tuple), by id."""
    found = Subtasks()
    for file, module in modules:
        for value in vars(module).values():
            items = value if isinstance(value, list | tuple) else [value]
            for subtask in items:
                if not isinstance(subtask, SubTask):
                    continue
                known = found.by_id.get(subtask.id)
                if known is not None and known.description != subtask.description:
                    errors.append(
                        ConfigError(
                            f"subtask id '{subtask.id}' is also defined by "
                            f"{found.origin[subtask.id]}",
                            file=str(file),
                        )
                    )
                elif known is None:
                    found.by_id[subtask.id] = subtask
                    found.origin[subtask.id] = file.name
    return found


def _template(
    modules: list[tuple[Path, ModuleType]], errors: list[ConfigError]
) -> tuple[Path, BenchmarkConfig] | None:
    """The dataset's module-level ``BenchmarkConfig``, if a module defines one."""
    found = [
        (file, config)
        for file, module in modules
        for config in benchmark_configs(vars(module).values())
    ]
    if len(found) > 1:
        errors.append(
            ConfigError(
                "define at most one BenchmarkConfig in a dataset's modules; found "
                + ", ".join(f"'{b.name}' ({f.name})" for f, b in found),
                file=str(found[1][0]),
            )
        )
    return found[0] if found else None


def _python_tasks(
    modules: list[tuple[Path, ModuleType]], template: tuple[Path, BenchmarkConfig] | None
) -> list[tuple[Task, Path]]:
    """Tasks written in Python (CRAB's ``handmade_tasks``): the template's and module-level."""
    seen: dict[int, tuple[Task, Path]] = {}
    if template is not None:
        seen.update({id(t): (t, template[0]) for t in template[1].tasks})
    for file, module in modules:
        for value in vars(module).values():
            items = value if isinstance(value, list | tuple) else [value]
            for task in items:
                if isinstance(task, Task):
                    seen.setdefault(id(task), (task, file))
    return list(seen.values())


def _supported(
    composed: list[Composed],
    written: list[tuple[Task, Path]],
    provided: set[str],
    unsupported: dict[str, str],
) -> tuple[list[Composed], list[tuple[Task, Path]]]:
    """The tasks crabray can run; the others go to ``unsupported`` with the reason: they use
    one of CRAB's environments crabray has no backend for (Android), and the dataset's
    ``BenchmarkConfig`` does not define it."""

    def reason(names: set[str]) -> str | None:
        missing = sorted(n for n in names if n in UNSUPPORTED_ENVIRONMENTS and n not in provided)
        return "; ".join(UNSUPPORTED_ENVIRONMENTS[n] for n in missing) or None

    kept: list[Composed] = []
    for item in composed:
        why = reason(item.env_names)
        if why is None:
            kept.append(item)
        else:
            unsupported[item.task.id] = why
    kept_written: list[tuple[Task, Path]] = []
    for task, file in written:
        why = reason(_env_names(task))
        if why is None:
            kept_written.append((task, file))
        else:
            unsupported[task.id] = why
    return kept, kept_written


def _env_names(task: Task) -> set[str]:
    """The environments a task written in Python acts on, by its evaluators and actions."""
    acts = [*task.evaluators, *task.setup, *task.teardown, *task.extra_actions]
    return {a.env_name for a in acts if a.env_name and a.env_name != ROOT_ENV}


def _unique_ids(
    composed: list[Composed], written: list[tuple[Task, Path]], errors: list[ConfigError]
) -> list[Composed]:
    owners = {task.id: str(file) for task, file in written}
    kept = []
    for item in composed:
        other = owners.get(item.task.id)
        if other is not None:
            errors.append(
                ConfigError(
                    f"task id '{item.task.id}' is also used by {other}",
                    file=where(item.file, item.lines, "id"),
                    field="id",
                )
            )
            continue
        owners[item.task.id] = str(item.file)
        kept.append(item)
    return kept


def _benchmark(
    path: Path,
    template: tuple[Path, BenchmarkConfig] | None,
    composed: list[Composed],
    written: list[tuple[Task, Path]],
    errors: list[ConfigError],
) -> BenchmarkConfig | None:
    """The suite's one benchmark: the template's settings, or local environments."""
    if template is not None:
        fields = {name: getattr(template[1], name) for name in BenchmarkConfig.model_fields}
        source = template[0]
        if not template[1].multienv:  # a task uses the environments its actions name
            composed = [_with_environments(c) for c in composed]
    else:
        names = sorted({n for c in composed for n in c.env_names}) or [DEFAULT_ENV]
        fields = {
            "name": path.name,
            "environments": [environment(n) for n in names],
            "root_action_space": list(CRAB_ROOT_ACTIONS),
        }
        composed = [_with_environments(c) for c in composed]
        source = path
    environments: list[EnvironmentConfig] = fields["environments"]
    tasks: list[tuple[Task, str]] = [(t, str(f)) for t, f in written]
    for item in composed:
        task = _with_solution(item, environments, fields.get("root_action_space", []), errors)
        if task is not None:
            tasks.append((task, str(item.file)))
    for _ in range(2):  # a second pass without the tasks the first one refused
        try:
            return BenchmarkConfig(**{**fields, "tasks": [t for t, _ in tasks]})
        except ValidationError as exc:
            refused = _refused_tasks(exc, tasks, source, errors)
            if not refused:
                return None
            tasks = [t for i, t in enumerate(tasks) if i not in refused]
    return None


def _refused_tasks(
    exc: ValidationError, tasks: list[tuple[Task, str]], source: Path, errors: list[ConfigError]
) -> set[int]:
    refused: set[int] = set()
    for err in exc.errors():
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, TaskProblems):
            for index, message in cause.problems:
                refused.add(index)
                errors.append(ConfigError(message, file=tasks[index][1]))
        else:
            loc = ".".join(str(p) for p in err["loc"])
            errors.append(ConfigError(err["msg"], file=str(source), field=loc or None))
    return refused


def _with_environments(item: Composed) -> Composed:
    if not item.env_names:
        return item
    task = item.task.model_copy(update={"environments": sorted(item.env_names)})
    return Composed(task, item.file, item.solution, item.lines, item.env_names)


def _with_solution(
    item: Composed,
    environments: list[EnvironmentConfig],
    root_space: list[Action],
    errors: list[ConfigError],
) -> Task | None:
    """The task with its ``solution`` steps bound to actions; ``None`` if a step is bad."""
    if not item.solution:
        return item.task
    task_envs = item.task.environments or [e.name for e in environments[:1]]
    spaces = {e.name: {a.name: a for a in e.action_space} for e in environments}
    roots = {a.name: a for a in (*ROOT_ACTIONS, submit, *root_space, *item.task.extra_actions)}
    steps: list[Action] = []
    for index, step in enumerate(item.solution):
        field = f"solution.{index}"
        env = step.env or (task_envs[0] if len(task_envs) == 1 else None)
        found = spaces.get(env or "", {}).get(step.action) or roots.get(step.action)
        if found is None:
            offered = sorted({*spaces.get(env or "", {}), *roots})
            reason = (
                f"no action '{step.action}' in environment '{env}'; known: {offered}"
                if env
                else f"the task uses environments {task_envs}: say in which with 'env'"
            )
            errors.append(
                ConfigError(
                    reason,
                    file=where(item.file, item.lines, field),
                    field=f"{field}.action",
                )
            )
            continue
        try:
            bound = found(**step.arguments)
            bound.validate_arguments({})
        except ActionError as exc:
            errors.append(
                ConfigError(str(exc), file=where(item.file, item.lines, field), field=field)
            )
            continue
        steps.append(bound.on(env) if env and found.name not in roots else bound)
    if len(steps) != len(item.solution):
        return None
    return item.task.model_copy(update={"solution": steps})
