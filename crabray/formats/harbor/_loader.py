"""Load a Harbor suite: a task folder (``task.toml``, ``instruction.md``, ``environment/``,
``tests/``, ``solution/``) or a folder of them, as Terminal-Bench 2.0 ships them.

Every task becomes an ordinary ``Task`` in a benchmark of its own, whose one
docker environment builds ``environment/Dockerfile`` (the docker backend's
``build_context``, as task folders do; ``--base-image`` replaces every
``FROM`` where the original cannot be pulled). ``task.toml`` sets the
agent's time limit, the container's CPUs, memory and network, and the
verifier's limit; the scorer is Harbor's verifier (``_verifier``); the oracle
replays ``solution/solve.sh`` (``_oracle``). Every problem of every task is
reported before anything runs. A valid Harbor task this format cannot run (a
multi-step task, a docker compose environment) is listed as unsupported, with
the reason, and skipped.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS
from crabray.core import Action, BenchmarkConfig, EnvironmentConfig, Task
from crabray.core.errors import ConfigError
from crabray.core.task import graded_by_scorer
from crabray.formats.base import SuiteFormat, register_format
from crabray.formats.folders import docker_only, holds_tasks, task_folders
from crabray.formats.harbor._checks import (
    DOCKERFILE,
    ENVIRONMENT_DIR,
    HarborChecker,
    HarborTask,
    is_harbor_task,
    looks_like_task,
)
from crabray.formats.harbor._oracle import solution_actions
from crabray.formats.harbor._verifier import verifier_action
from crabray.formats.suite import Suite, SuiteErrors, SuiteRef, suite_name

logger = logging.getLogger(__name__)

FORMAT = "harbor"
DEFAULT_BACKEND = "docker"
BACKENDS = ("docker",)
"""The only backend: each task's Dockerfile defines its sandbox."""
ENV_NAME = "sandbox"
ONLINE_NETWORK = "crabray-net"
"""The docker backend's isolated network: outbound access, never the host's services
(Harbor's ``allow_internet = true``, its default)."""


def detect(path: Path) -> bool:
    """Whether ``path`` is a Harbor task folder, or a folder holding some."""
    return holds_tasks(path, is_harbor_task)


def load(path: Path, backend: str = DEFAULT_BACKEND, base_image: str | None = None) -> Suite:
    """Load and validate every task of the Harbor suite at ``path``.

    Args:
        path: A Harbor task folder, or a folder whose subfolders are task folders.
        backend: Must be ``docker``.
        base_image: Replaces the image of every ``FROM`` line of every Dockerfile.

    Raises:
        ConfigError: The backend is not docker.
        SuiteErrors: Every problem, each naming its file and field.
    """
    check_backend(backend)
    ref = SuiteRef(path=str(path), format=FORMAT, backend=backend, base_image=base_image)
    errors: list[ConfigError] = []
    checked: list[HarborTask] = []
    unsupported: dict[str, str] = {}
    for folder in _task_folders(path, errors):
        checker = HarborChecker(folder)
        task = checker.check()
        errors += checker.problems
        if task is not None:
            checked.append(task)
        elif checker.unsupported is not None:
            unsupported[folder.name] = checker.unsupported
    if errors:
        raise SuiteErrors(str(path), errors)
    suite = Suite(ref, suite_name(path))
    suite.unsupported.update(unsupported)
    for task in checked:
        suite.add(_benchmark(suite.name, task, base_image), str(task.folder))
    logger.info("loaded harbor suite %s: %d tasks", path, len(suite.entries))
    return suite


def check_backend(backend: str) -> None:
    """Refuse any backend but docker.

    Raises:
        ConfigError: Naming ``--backend`` and why.
    """
    docker_only("harbor suites", backend)


@register_format(FORMAT)
class HarborFormat(SuiteFormat):
    """Harbor (Terminal-Bench 2.0) task folders: docker only; a base image may replace
    every ``FROM`` of their Dockerfiles."""

    options = frozenset({"backend", "base_image"})
    default_backend = DEFAULT_BACKEND
    detect_priority = 20

    def detect(self, path: Path) -> bool:
        return detect(path)

    def load(self, path: Path, **options: Any) -> Suite:
        return load(path, **options)

    def check_backend(self, backend: str) -> None:
        check_backend(backend)


def _task_folders(path: Path, errors: list[ConfigError]) -> list[Path]:
    return task_folders(
        path,
        is_task=is_harbor_task,
        looks_like_task=looks_like_task,
        layout="Harbor task folder: a task folder has task.toml, instruction.md, "
        "environment/Dockerfile and tests/test.sh",
        errors=errors,
    )


def _benchmark(name: str, task: HarborTask, base_image: str | None) -> BenchmarkConfig:
    """A benchmark of the one task, with the docker environment its Dockerfile defines."""
    config = task.config
    solution = (
        solution_actions(task.solution, config.solution.env, config.agent.timeout_sec)
        if task.has_solution
        else []
    )
    crab_task = Task(
        id=task.folder.name,
        description=task.instruction,
        environments=[ENV_NAME],
        evaluator=graded_by_scorer,
        scorer=_scorer(task),
        solution=solution,
        time_limit_sec=config.agent.timeout_sec,
        tags=[str(tag) for tag in config.metadata.get("tags", []) if isinstance(tag, str)],
        metadata={
            "format": FORMAT,
            "folder": str(task.folder),
            "dockerfile": str(task.environment / DOCKERFILE),
            "harbor_metadata": config.metadata,
            "verifier_timeout_sec": config.verifier.timeout_sec,
            "docker_image": config.environment.docker_image,
        },
    )
    return BenchmarkConfig(
        name=name, tasks=[crab_task], environments=[_environment(task, base_image)]
    )


def _scorer(task: HarborTask) -> Action:
    verifier = task.config.verifier
    return verifier_action(task.tests, verifier.timeout_sec, verifier.env)


def _environment(task: HarborTask, base_image: str | None) -> EnvironmentConfig:
    resources = task.config.environment
    settings: dict[str, object] = {
        "build_context": str(task.environment.resolve()),
        "dockerfile": DOCKERFILE,
        "network": ONLINE_NETWORK if resources.online else "none",
        "cpus": resources.cpus,
        "memory_mb": resources.memory_mb,
        "env": dict(resources.env),
    }
    if base_image is not None:
        settings["base_image"] = base_image
    return EnvironmentConfig(
        name=ENV_NAME,
        backend="docker",
        description=(
            f"A Linux container built from the task's {ENVIRONMENT_DIR}/{DOCKERFILE}; commands "
            "start in its working directory."
        ),
        action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
        backend_settings=settings,
    )
