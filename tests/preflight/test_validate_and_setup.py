"""What ``crabray tasks validate`` finds without running anything, and how a failed setup
command is told: through the real CLI and a real sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import Backend, create_backend
from crabray.core.environment import EnvironmentConfig
from crabray.formats.task_json import TaskContext, lookup
from crabray.formats.task_json._setup import SetupCommandError
from tests.conftest import crabray
from tests.preflight.suites import evaluator_suite, host_error_suite

pytestmark = pytest.mark.slow  # the real CLI, real sandboxes: seconds each


def test_validate_names_an_evaluator_argument_of_the_wrong_type(tmp_path: Path) -> None:
    suite = evaluator_suite(tmp_path / "suite")
    done = crabray("tasks", "validate", str(suite))
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    problems = [line for line in done.stderr.splitlines() if line.startswith("✗")]
    assert len(problems) == 1, done.stderr
    (problem,) = problems
    assert f"{suite}:" in problem, "names the file and the line of the task"
    assert "tasks[wrong-type].evaluator.line_count_is.lines" in problem
    assert "valid integer" in problem


def test_validate_for_the_oracle_lists_tasks_without_a_solution(tmp_path: Path) -> None:
    suite = host_error_suite(tmp_path / "suite", tasks=3)
    plain = crabray("tasks", "validate", str(suite))
    assert plain.returncode == 0, f"{plain.stdout}\n{plain.stderr}"
    done = crabray("tasks", "validate", str(suite), "--oracle")
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    problems = [line for line in done.stderr.splitlines() if line.startswith("✗")]
    assert len(problems) == 1, done.stderr
    assert "tasks[task-0].solution: no reference solution" in problems[0]


SETUP_SCRIPT = """
echo 'Creating virtual environment for package installation...'
for i in 10 40 80 100; do printf 'Downloading %s%%\\r' $i; done; echo
echo
gnome-terminal --version
echo 'Done with exit hooks'
exit 127
"""


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Backend]:
    """A real local sandbox (confined by bubblewrap where it works, else unconfined)."""
    from crabray.backends.local._bwrap import probe

    isolation = "auto" if probe()[0] else "none"
    backend = create_backend(
        EnvironmentConfig(
            name="setup",
            backend="local",
            backend_settings={"root_dir": str(tmp_path), "isolation": isolation},
        )
    )
    backend.start()
    yield backend
    backend.close()


def test_a_failed_setup_command_shows_command_exit_code_and_cause(
    sandbox: Backend, tmp_path: Path
) -> None:
    sandbox.put_file("setup.sh", SETUP_SCRIPT.encode())
    ctx = TaskContext(env=sandbox, task_dir=tmp_path)
    with pytest.raises(SetupCommandError) as caught:
        lookup("setup", "execute").func(ctx, command="sh setup.sh", timeout_sec=30)
    message = str(caught.value)
    head, *rest = message.splitlines()
    assert head.startswith("command 'sh setup.sh' exited 127: "), message
    assert head.endswith("gnome-terminal: not found"), "the cause is on the first line"
    assert "  Creating virtual environment for package installation..." in rest, message
    assert "  Done with exit hooks" in rest, message
    assert not any("Downloading" in line for line in rest), "progress lines are left out"
    assert all(line.strip() for line in rest), "blank lines are left out"
