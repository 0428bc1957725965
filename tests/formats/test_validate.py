"""``crabray.formats.validate``: what a loaded suite is checked for before anything runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from crabray.core import EnvironmentConfig
from crabray.core.errors import ConfigError
from crabray.formats import SuiteErrors, load_suite, resolve_suite
from crabray.formats.validate import validate_suite

SUITE = """\
from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import path_exists, submit, write_file

bench = BenchmarkConfig(
    name="checked",
    environments=[EnvironmentConfig(name="box", action_space=[write_file])],
    tasks=[
        Task(
            id="good",
            description="make good",
            evaluator=path_exists(path="good"),
            solution=[write_file(path="good", content="x")],
        ),
        Task(
            id="bad",
            description="make bad",
            evaluator=path_exists(path="bad"),
            solution=[submit(content="bad")],
        ),
    ],
)
"""


def load(tmp_path: Path):
    path = tmp_path / "suite.py"
    path.write_text(textwrap.dedent(SUITE))
    return path, load_suite(resolve_suite(path))


def test_a_solution_step_the_agent_cannot_call_is_reported_with_file_and_field(
    tmp_path: Path,
) -> None:
    path, suite = load(tmp_path)
    with pytest.raises(SuiteErrors) as caught:
        validate_suite(suite)
    (error,) = caught.value.errors
    lines = path.read_text().splitlines()
    task_line = next(n for n, line in enumerate(lines, 1) if 'id="bad"' in line) - 1
    assert lines[task_line - 1].strip() == "Task("
    # reported at the line of the task, not of the BenchmarkConfig that holds it
    assert (error.file, error.field) == (f"{path.resolve()}:{task_line}", "tasks[bad].solution")
    assert "step 0 calls 'submit'" in error.reason


def test_environment_checks_are_reported_under_the_environment_once(tmp_path: Path) -> None:
    _, suite = load(tmp_path)
    seen: list[str] = []

    def refuse(env: EnvironmentConfig) -> None:
        seen.append(env.name)
        raise ConfigError("no such thing", field="backend_settings.size")

    with pytest.raises(SuiteErrors) as caught:
        validate_suite(suite, check_environment=refuse)
    fields = [error.field for error in caught.value.errors]
    assert fields == ["environments[box].backend_settings.size", "tasks[bad].solution"]
    assert seen == ["box"]
