"""Fixtures for the task-JSON tests: a real local sandbox and a task folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import create_backend
from crabray.backends.environment import AgentSignals, Environment
from crabray.core import EnvironmentConfig
from crabray.formats.task_json import TaskContext


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    backend = create_backend(
        EnvironmentConfig(name="box", backend_settings={"root_dir": str(tmp_path / "sandboxes")})
    )
    backend.start()
    try:
        yield Environment("box", backend, AgentSignals())
    finally:
        backend.close()


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "task"
    folder.mkdir()
    return folder


@pytest.fixture
def ctx(env: Environment, task_dir: Path) -> TaskContext:
    return TaskContext(env, task_dir)
