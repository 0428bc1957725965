"""Load a task-folder suite: one folder per task, each with its own Dockerfile.

A suite is one task folder (holding ``task.md``) or a folder of them. Every
task becomes an ordinary ``Task`` in a benchmark of its own, whose one docker
environment builds the task's Dockerfile; its setup resets the services it
depends on, puts the format's files into the sandbox and runs the init
scripts; its scorer runs ``evaluator.py`` there after the agent is done.
Every problem of every task is reported before anything runs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS
from crabray.core import BenchmarkConfig, EnvironmentConfig, Task
from crabray.core.errors import ConfigError
from crabray.core.task import graded_by_scorer
from crabray.formats.base import SuiteFormat, register_format
from crabray.formats.folders import docker_only, holds_tasks, task_folders
from crabray.formats.suite import Suite, SuiteErrors, SuiteRef, suite_name
from crabray.formats.task_folder._checks import (
    DOCKERFILE,
    TaskChecker,
    TaskFiles,
    is_task_folder,
    looks_like_task,
)
from crabray.formats.task_folder._grading import grading_action
from crabray.formats.task_folder._sandbox import (
    setup_actions,
    solution_actions,
    teardown_actions,
)
from crabray.formats.task_folder._services import (
    REGISTRY_FILE,
    ServiceRegistry,
    load_registry,
    stop_services,
)

logger = logging.getLogger(__name__)

FORMAT = "task-folder"
DEFAULT_BACKEND = "docker"
BACKENDS = ("docker",)
"""The only backend: each task's Dockerfile defines its sandbox."""
ENV_NAME = "sandbox"
WORKDIR = "/workspace"


def detect(path: Path) -> bool:
    """Whether ``path`` is a task folder, or a folder holding task folders."""
    return holds_tasks(path, is_task_folder)


def load(
    path: Path,
    backend: str = DEFAULT_BACKEND,
    base_image: str | None = None,
    services: str | None = None,
) -> Suite:
    """Load and validate every task of the suite at ``path``.

    Args:
        path: A task folder, or a folder whose subfolders are task folders.
        backend: Must be ``docker``.
        base_image: Replaces the image of every ``FROM`` line of every Dockerfile.
        services: The service registry file; ``services.yml`` at the suite root when unset.

    Raises:
        ConfigError: The backend is not docker.
        SuiteErrors: Every problem, each naming its file and field.
    """
    check_backend(backend)
    ref = SuiteRef(
        path=str(path), format=FORMAT, backend=backend, base_image=base_image, services=services
    )
    errors: list[ConfigError] = []
    registry, registry_ok = _registry(path, services, errors)
    checked: list[TaskFiles] = []
    for folder in _task_folders(path, errors):
        checker = TaskChecker(folder, registry, base_image, check_services=registry_ok)
        files = checker.check()
        errors += checker.problems
        if files is not None:
            checked.append(files)
    if errors:
        raise SuiteErrors(str(path), errors)
    suite = Suite(ref, suite_name(path))
    for files in checked:
        suite.add(_benchmark(suite.name, files, registry), str(files.folder))
    logger.info("loaded task-folder suite %s: %d tasks", path, len(suite.entries))
    return suite


def check_backend(backend: str) -> None:
    """Refuse any backend but docker.

    Raises:
        ConfigError: Naming ``--backend`` and why.
    """
    docker_only("task-folder suites", backend)


@register_format(FORMAT)
class TaskFolderFormat(SuiteFormat):
    """Task-folder suites: docker only; a base image may replace every ``FROM``, and a
    service registry file may replace the suite's ``services.yml``."""

    options = frozenset({"backend", "base_image", "services"})
    default_backend = DEFAULT_BACKEND
    detect_priority = 20
    ends_runs = True

    def detect(self, path: Path) -> bool:
        return detect(path)

    def load(self, path: Path, **options: Any) -> Suite:
        return load(path, **options)

    def end_run(self, ref: SuiteRef) -> None:
        """Stop the services the run's episodes reset on this host (``stop_services``)."""
        errors: list[ConfigError] = []
        registry, _ = _registry(Path(ref.path), ref.services, errors)
        if registry is not None:
            stopped = stop_services(registry)
            if stopped:
                logger.info("stopped the services the run started: %s", ", ".join(stopped))

    def check_backend(self, backend: str) -> None:
        check_backend(backend)


def _task_folders(path: Path, errors: list[ConfigError]) -> list[Path]:
    return task_folders(
        path,
        is_task=is_task_folder,
        looks_like_task=looks_like_task,
        layout="task folder: a task folder has task.md, evaluator.py, Dockerfile and "
        "dependencies.yml",
        errors=errors,
    )


def _registry(
    path: Path, services: str | None, errors: list[ConfigError]
) -> tuple[ServiceRegistry | None, bool]:
    """The suite's service registry, if any, and whether it loaded without problems."""
    if services is not None:
        file: Path | None = Path(services)
    else:
        places = [path, path.parent] if is_task_folder(path) else [path]
        file = next((p / REGISTRY_FILE for p in places if (p / REGISTRY_FILE).is_file()), None)
    if file is None:
        return None, True
    try:
        return load_registry(file), True
    except SuiteErrors as exc:
        errors += exc.errors
    except ConfigError as exc:
        errors.append(exc)
    return None, False


def _benchmark(name: str, files: TaskFiles, registry: ServiceRegistry | None) -> BenchmarkConfig:
    """A benchmark of the one task, with the docker environment its Dockerfile defines."""
    task = Task(
        id=files.folder.name,
        description=files.instruction,
        environments=[ENV_NAME],
        setup=setup_actions(files, registry),
        teardown=teardown_actions(files, registry),
        evaluator=graded_by_scorer,
        scorer=grading_action(files.folder),
        solution=solution_actions(files),
        metadata={
            "format": FORMAT,
            "folder": str(files.folder),
            "dockerfile": str(files.folder / DOCKERFILE),
            "dependencies": files.dependencies,
            "init_scripts": files.init_scripts,
            "checkpoints": files.checkpoints,
            "scenarios": files.scenarios,
        },
    )
    return BenchmarkConfig(name=name, tasks=[task], environments=[_environment(files)])


def _environment(files: TaskFiles) -> EnvironmentConfig:
    settings: dict[str, object] = {
        "build_context": str(files.folder.resolve()),
        "dockerfile": DOCKERFILE,
        "network": "host" if files.dependencies else "none",
        "workdir": WORKDIR,
    }
    if files.base_image is not None:
        settings["base_image"] = files.base_image
    return EnvironmentConfig(
        name=ENV_NAME,
        backend="docker",
        description=(
            "A Linux container built for this task; the instruction is also in "
            "/instruction/task.md, commands start in /workspace."
        ),
        action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
        backend_settings=settings,
    )
