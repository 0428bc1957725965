"""Setup and reference solution of a task folder: what runs in (and for) its sandbox.

The original format's base image carried ``/utils`` with ``init.sh``; here
crabray puts the files there itself before the agent starts: the sandbox
modules (``scoring.py``, ``common.py``, ``eval.py``), the task's own
``dependencies.yml`` and init scripts, and ``/instruction/task.md``. Then the
init scripts run in order. ``evaluator.py`` stays out until grading, so the
agent cannot read the rubric.
"""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import Any

from crabray.actions import run_command
from crabray.actions.limits import MAX_TIMEOUT_SEC
from crabray.core import Action
from crabray.core.commands import command_failure
from crabray.core.errors import ActionError
from crabray.formats.steps import closed_action
from crabray.formats.task_folder._checks import DEPENDENCIES, INIT_SCRIPTS, TASK_MD, TaskFiles
from crabray.formats.task_folder._services import (
    ServiceRegistry,
    lock_service,
    output_tail,
    prepare_service,
    unlock_service,
)

logger = logging.getLogger(__name__)

UTILS_DIR = "/utils"
INSTRUCTION_DIR = "/instruction"
SANDBOX_DIRS = (UTILS_DIR, INSTRUCTION_DIR, "/workspace", "/outputs")
"""Folders the format expects in every sandbox; created when the image lacks them."""

SANDBOX_MODULES = ("scoring.py", "common.py", "eval.py")
"""crabray's stdlib-only modules that evaluators and eval.py import in the sandbox."""

INIT_TIMEOUT_SEC = 600.0
SOLUTION_TIMEOUT_SEC = MAX_TIMEOUT_SEC
"""The oracle replays ``solution.sh`` as an agent's ``run_command``, within an agent's bound."""


def sandbox_modules() -> dict[str, bytes]:
    """The sandbox modules by file name, read from crabray's package data.

    Raises:
        ActionError: One is missing: the crabray installation is incomplete.
    """
    folder = resources.files("crabray.formats.task_folder") / "utils"
    found: dict[str, bytes] = {}
    for name in SANDBOX_MODULES:
        entry = folder / name
        if not entry.is_file():
            raise ActionError(
                f"crabray's sandbox module {name} is missing from {folder}: reinstall crabray "
                "(the package data crabray/formats/task_folder/utils/*.py)"
            )
        found[name] = entry.read_bytes()
    return found


def setup_actions(files: TaskFiles, registry: ServiceRegistry | None) -> list[Action]:
    """The task's setup: its services (locked in sorted order, so two tasks sharing
    several cannot deadlock), the files in the sandbox, its init scripts."""
    steps: list[Action] = []
    if registry is not None:
        steps += [_service_step(registry, name) for name in sorted(files.dependencies)]
    steps.append(_put_files_step(files.folder))
    steps += [_init_step(files.folder, script) for script in files.init_scripts]
    return steps


def teardown_actions(files: TaskFiles, registry: ServiceRegistry | None) -> list[Action]:
    """The task's teardown: release the services its setup locked."""
    if registry is None or not files.dependencies:
        return []
    names = sorted(files.dependencies)

    def entry(env: Any) -> None:
        for name in names:
            unlock_service(registry, name)

    return [
        closed_action("release_services", f"release services {', '.join(names)}", entry, local=True)
    ]


def solution_actions(files: TaskFiles) -> list[Action]:
    """The reference solution: ``solution.sh`` as one command the oracle runs."""
    if files.solution is None:
        return []
    return [run_command(command=files.solution, timeout_sec=SOLUTION_TIMEOUT_SEC)]


def put_sandbox_modules(env: Any) -> None:
    """Write crabray's sandbox modules to ``/utils`` (again at grading, undoing any edit)."""
    for name, data in sandbox_modules().items():
        env.put_file(f"{UTILS_DIR}/{name}", data)


def _service_step(registry: ServiceRegistry, name: str) -> Action:
    def entry(env: Any) -> None:
        lock_service(registry, name)
        prepare_service(registry, name)

    return closed_action(
        "prepare_service",
        f"lock service '{name}' for this episode, reset it and wait for its health "
        "(on the worker host)",
        entry,
        local=True,
    )


def _put_files_step(folder: Path) -> Action:
    def entry(env: Any) -> None:
        made = env.exec(["mkdir", "-p", *SANDBOX_DIRS], timeout_sec=60)
        if not made.ok:
            raise ActionError(
                f"cannot create {', '.join(SANDBOX_DIRS)} in the sandbox "
                f"(exit {made.exit_code}){output_tail(made.stdout + made.stderr)}"
            )
        put_sandbox_modules(env)
        for name in (DEPENDENCIES, *INIT_SCRIPTS):
            if (folder / name).is_file():
                env.put_file(f"{UTILS_DIR}/{name}", (folder / name).read_bytes())
        env.put_file(f"{INSTRUCTION_DIR}/{TASK_MD}", (folder / TASK_MD).read_bytes())

    return closed_action(
        "put_task_files",
        f"put crabray's sandbox modules and the task's files into {UTILS_DIR} and "
        f"{INSTRUCTION_DIR}",
        entry,
    )


def _init_step(folder: Path, script: str) -> Action:
    command = f"cd {UTILS_DIR} && python3 {UTILS_DIR}/{script}"

    def entry(env: Any) -> None:
        done = env.exec(command, timeout_sec=INIT_TIMEOUT_SEC)
        if done.timed_out or done.exit_code != 0:
            raise ActionError(
                command_failure(
                    f"init script {script}",
                    done.exit_code,
                    f"{done.stdout}\n{done.stderr}",
                    timed_out=done.timed_out,
                    timeout_sec=INIT_TIMEOUT_SEC,
                )
            )
        logger.debug("init script %s of %s ran in %.1f s", script, folder, done.duration_sec)

    return closed_action("run_init_script", f"run the init script {script}: {command}", entry)
