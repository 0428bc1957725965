"""``crabray tasks validate``: every problem of every file it can load, at the task's line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crabray import Task
from crabray.actions import path_exists
from crabray.cli import app
from crabray.core.errors import ConfigError
from crabray.formats import SuiteErrors, load_suite, resolve_suite
from crabray.run import load_checked_suite
from tests.conftest import ROOT

INCONSISTENT = textwrap.dedent(
    """\
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import path_exists

    ENV = EnvironmentConfig(name="box")
    bad = BenchmarkConfig(
        name="bad",
        environments=[ENV],
        tasks=[
            Task(id="fine", description="d", evaluator=path_exists(path="x")),
            Task(id="t1", description="d", evaluator=path_exists(path="x"), environments=["a"]),
            Task(
                id="t2",
                description="d",
                evaluator=path_exists(path="x"),
                environments=["b"],
            ),
        ],
    )
    """
)

UNSOLVABLE = textwrap.dedent(
    """\
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import path_exists, run_command

    ENV = EnvironmentConfig(name="box", action_space=[])
    b = BenchmarkConfig(
        name="b",
        environments=[ENV],
        tasks=[
            Task(id="s1", description="d", evaluator=path_exists(path="x"),
                 solution=[run_command(command="touch x")]),
            Task(id="s2", description="d", evaluator=path_exists(path="x"),
                 solution=[run_command(command="touch y")]),
        ],
    )
    """
)


def write_suite(folder: Path) -> Path:
    folder.mkdir()
    (folder / "inconsistent.py").write_text(INCONSISTENT)
    (folder / "unsolvable.py").write_text(UNSOLVABLE)
    (folder / "broken.py").write_text("x = 1\nraise RuntimeError('boom at import')\n")
    return folder


def test_validate_shows_every_problem_of_every_file_at_its_task(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite")
    result = CliRunner().invoke(
        app, ["tasks", "validate", str(suite)], env={"COLUMNS": "300", "NO_COLOR": "1"}
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("✗")]
    assert len(lines) == 5, result.output
    assert f"{suite}/broken.py:2: RuntimeError: boom at import" in lines[0]
    assert (
        f"{suite}/inconsistent.py:10: BenchmarkConfig.tasks.1 (id 't1'): environments" in (lines[1])
    )
    assert f"{suite}/inconsistent.py:11: BenchmarkConfig.tasks.2 (id 't2')" in lines[2]
    # The broken module does not hide the loaded modules' problems, found only by the check.
    assert f"{suite}/unsolvable.py:9: tasks[s1].solution: step 0 calls 'run_command'" in lines[3]
    assert f"{suite}/unsolvable.py:11: tasks[s2].solution" in lines[4]
    assert "5 problems" in result.output


def test_a_run_refuses_the_suite_with_the_same_problems(tmp_path: Path) -> None:
    suite = write_suite(tmp_path / "suite")
    with pytest.raises(SuiteErrors) as info:
        load_checked_suite(resolve_suite(suite))
    assert len(info.value.errors) == 5
    assert all(isinstance(e, ConfigError) for e in info.value.errors)


def test_a_task_knows_the_line_it_was_written_at() -> None:
    task = Task(id="here", description="d", evaluator=path_exists(path="x"))
    assert task.defined_at == (__file__, 98)


def test_tasks_built_by_crabray_loaders_carry_no_line() -> None:
    suite = load_suite(resolve_suite(ROOT / "tasks" / "task_json_demo"))
    assert all(entry.task.defined_at is None for entry in suite.entries.values())
