"""What suites of task folders share (task folders, Harbor): finding the folders, docker only.

Such a suite is one task folder or a folder of them; a subfolder that looks
like a task but is not a valid one is reported, never skipped. Each task's
own Dockerfile defines its sandbox, so the docker backend is the only one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from crabray.core.errors import ConfigError

DOCKER = "docker"


def subfolders(path: Path) -> list[Path]:
    """``path``'s subfolders, sorted, without hidden (``.x``) or private (``_x``) ones."""
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def holds_tasks(path: Path, is_task: Callable[[Path], bool]) -> bool:
    """Whether ``path`` is a task folder or a folder holding one."""
    if not path.is_dir():
        return False
    return is_task(path) or any(is_task(sub) for sub in subfolders(path))


def task_folders(
    path: Path,
    *,
    is_task: Callable[[Path], bool],
    looks_like_task: Callable[[Path], bool],
    layout: str,
    errors: list[ConfigError],
) -> list[Path]:
    """The task folders of the suite at ``path``; none found is a problem added to ``errors``.

    Args:
        path: The suite: a task folder or a folder of them.
        is_task: Whether a folder is a task folder.
        looks_like_task: Whether a subfolder is meant as a task (checked, even if broken).
        layout: What a task folder holds, for the message when there is none.
        errors: Where the problem goes.
    """
    if is_task(path):
        return [path]
    found = [sub for sub in subfolders(path) if looks_like_task(sub)] if path.is_dir() else []
    if not found:
        errors.append(ConfigError(f"holds no {layout}", file=str(path)))
    return found


def docker_only(suites: str, backend: str) -> None:
    """Refuse any backend but docker for ``suites`` (``"task-folder suites"``).

    Raises:
        ConfigError: Naming ``--backend`` and why.
    """
    if backend != DOCKER:
        raise ConfigError(
            f"{suites} run only on the docker backend (each task's Dockerfile "
            f"defines its sandbox), not '{backend}': omit --backend or pass --backend docker",
            field="--backend",
        )
