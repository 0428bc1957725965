"""Small suites the preflight tests write into a temporary folder, as a user would."""

from __future__ import annotations

from pathlib import Path

DOCKER_SUITE = """
from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import FILE_ACTIONS, file_equals, write_file

BOX = EnvironmentConfig(
    name="box",
    action_space=FILE_ACTIONS,
    backend="docker",
    backend_settings={{"image": "{image}"}},
)

suite = BenchmarkConfig(
    name="typo",
    environments=[BOX],
    default_env="box",
    tasks=[
        Task(
            id="hello-box",
            description="Write hi to hi.txt.",
            evaluator=file_equals(path="hi.txt", content="hi"),
            solution=[write_file(path="hi.txt", content="hi")],
        )
    ],
)
"""


def docker_suite(folder: Path, image: str) -> Path:
    """A one-task docker suite whose container runs ``image``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "suite.py"
    path.write_text(DOCKER_SUITE.format(image=image))
    return path


HOST_ERROR_SUITE = '''
from crabray import BenchmarkConfig, EnvironmentConfig, Task, action
from crabray.actions import FILE_ACTIONS, file_equals, write_file
from crabray.core.errors import SandboxHostError


@action(local=True)
def needs_frobnicator() -> None:
    """Stands for a sandbox that found its host lacks a tool, after the preflight passed."""
    raise SandboxHostError("frobnicator not found on PATH (install with: apt-get install frob)")


WORK = EnvironmentConfig(name="work", action_space=FILE_ACTIONS, backend="local")

suite = BenchmarkConfig(
    name="hostless",
    environments=[WORK],
    default_env="work",
    tasks=[
        Task(
            id=f"task-{{n}}",
            description="Write hi to hi.txt.",
            setup=[needs_frobnicator()],
            evaluator=file_equals(path="hi.txt", content="hi"),
            solution=[write_file(path="hi.txt", content="hi")] if n else [],
        )
        for n in range({tasks})
    ],
)
'''


def host_error_suite(folder: Path, tasks: int) -> Path:
    """A local suite whose every task's setup meets a ``SandboxHostError``; task-0 has no
    solution."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "suite.py"
    path.write_text(HOST_ERROR_SUITE.format(tasks=tasks))
    return path


EVALUATOR_SUITE = '''
from crabray import BenchmarkConfig, EnvironmentConfig, Task, evaluator
from crabray.actions import FILE_ACTIONS, write_file


@evaluator
def line_count_is(path: str, lines: int) -> bool:
    """Whether the file has that many lines."""
    return True


WORK = EnvironmentConfig(name="work", action_space=FILE_ACTIONS, backend="local")

suite = BenchmarkConfig(
    name="typed",
    environments=[WORK],
    default_env="work",
    tasks=[
        Task(
            id="fine",
            description="Write two lines.",
            evaluator=line_count_is(path="a.txt", lines=2),
            solution=[write_file(path="a.txt", content="1\\n2\\n")],
        ),
        Task(
            id="wrong-type",
            description="Write three lines.",
            evaluator=line_count_is(path="a.txt", lines="three"),
        ),
        Task(
            id="no-solution",
            description="Write one line.",
            evaluator=line_count_is(path="a.txt", lines=1),
        ),
    ],
)
'''


def evaluator_suite(folder: Path) -> Path:
    """Three local tasks: one fine, one with a wrongly typed evaluator argument, one
    without a solution."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "suite.py"
    path.write_text(EVALUATOR_SUITE)
    return path
