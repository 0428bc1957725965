"""Static checks of one Harbor task folder, on the host, before anything runs.

A Harbor task folder holds ``task.toml``, ``instruction.md``,
``environment/Dockerfile``, ``tests/test.sh`` and, for the oracle,
``solution/solve.sh``. Nothing is executed here: the TOML is parsed, the
Dockerfile is read for its ``FROM`` lines (with the task-folder format's
reader), and every problem is collected with its file and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crabray.core.errors import ConfigError
from crabray.formats.harbor._config import TASK_TOML, HarborTaskConfig, read_task_toml
from crabray.formats.task_folder import from_lines

INSTRUCTION = "instruction.md"
ENVIRONMENT_DIR = "environment"
DOCKERFILE = "Dockerfile"
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
TESTS_DIR = "tests"
TEST_SCRIPT = "test.sh"
SOLUTION_DIR = "solution"
SOLVE_SCRIPT = "solve.sh"
STEPS_DIR = "steps"

TASK_MARKERS = (TASK_TOML, INSTRUCTION, ENVIRONMENT_DIR, TESTS_DIR, SOLUTION_DIR)
"""Entries that make a suite's subfolder a (possibly broken) Harbor task folder."""


@dataclass(frozen=True)
class HarborTask:
    """What the checks read from a valid Harbor task folder."""

    folder: Path
    config: HarborTaskConfig
    instruction: str
    has_solution: bool

    @property
    def environment(self) -> Path:
        return self.folder / ENVIRONMENT_DIR

    @property
    def tests(self) -> Path:
        return self.folder / TESTS_DIR

    @property
    def solution(self) -> Path:
        return self.folder / SOLUTION_DIR


def is_harbor_task(folder: Path) -> bool:
    """Whether ``folder`` is a Harbor task: its ``task.toml`` beside ``instruction.md``
    or ``environment/``."""
    return (
        folder.is_dir()
        and (folder / TASK_TOML).is_file()
        and ((folder / INSTRUCTION).is_file() or (folder / ENVIRONMENT_DIR).is_dir())
    )


def looks_like_task(folder: Path) -> bool:
    """Whether a suite's subfolder is meant as a task: it holds ``task.toml`` or
    ``instruction.md`` (a folder of only tests or a solution is not a task)."""
    return folder.is_dir() and any((folder / name).is_file() for name in (TASK_TOML, INSTRUCTION))


class HarborChecker:
    """Checks one Harbor task folder, collecting every problem."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.problems: list[ConfigError] = []
        self.unsupported: str | None = None
        """Why a well-formed task cannot run here (listed as unsupported, not an error)."""

    def check(self) -> HarborTask | None:
        """The task, or ``None`` when ``problems`` or ``unsupported`` says why not."""
        self.unsupported = self._unsupported()
        if self.unsupported is not None:
            return None
        config = self._config()
        instruction = self._instruction()
        self._environment()
        self._script(
            TESTS_DIR,
            TEST_SCRIPT,
            "the verifier's tests/test.sh, which writes /logs/verifier/reward.txt or reward.json",
        )
        has_solution = (self.folder / SOLUTION_DIR).exists()
        if has_solution:
            self._script(SOLUTION_DIR, SOLVE_SCRIPT, "solution/solve.sh (the oracle runs it)")
        if self.problems or config is None or instruction is None:
            return None
        return HarborTask(self.folder, config, instruction, has_solution)

    def _problem(self, name: str, reason: str, field: str | None = None) -> None:
        self.problems.append(ConfigError(reason, file=str(self.folder / name), field=field))

    def _config(self) -> HarborTaskConfig | None:
        file = self.folder / TASK_TOML
        if not file.is_file():
            self._problem(TASK_TOML, "is missing: every Harbor task folder needs a task.toml")
            return None
        config, problems = read_task_toml(file)
        self.problems += problems
        return config

    def _instruction(self) -> str | None:
        file = self.folder / INSTRUCTION
        if not file.is_file():
            self._problem(INSTRUCTION, "is missing: it holds the instruction for the agent")
            return None
        try:
            text = file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            self._problem(INSTRUCTION, f"cannot be read: {exc}")
            return None
        if not text:
            self._problem(INSTRUCTION, "is empty: it must hold the instruction for the agent")
            return None
        return text

    def _unsupported(self) -> str | None:
        """Why this task, valid for Harbor, is one crabray's harbor format does not run."""
        if (self.folder / STEPS_DIR).is_dir() and not (self.folder / TESTS_DIR).is_dir():
            return (
                f"{STEPS_DIR}/ holds a multi-step (multi-turn) task; crabray runs single-step "
                "tasks (instruction.md, tests/test.sh)"
            )
        folder = self.folder / ENVIRONMENT_DIR
        compose = [name for name in COMPOSE_FILES if (folder / name).is_file()]
        if compose:
            return (
                f"{ENVIRONMENT_DIR}/{compose[0]} defines a multi-container environment "
                "(docker compose); crabray builds environment/Dockerfile alone"
            )
        return None

    def _environment(self) -> None:
        folder = self.folder / ENVIRONMENT_DIR
        dockerfile = folder / DOCKERFILE
        name = f"{ENVIRONMENT_DIR}/{DOCKERFILE}"
        if not dockerfile.is_file():
            self._problem(name, "is missing: the task's container is built from it")
            return
        try:
            text = dockerfile.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._problem(name, f"cannot be read: {exc}")
            return
        if not from_lines(text):
            self._problem(name, "has no FROM line: it must start from a base image", "FROM")

    def _script(self, folder: str, script: str, what: str) -> None:
        path = self.folder / folder / script
        if not path.is_file():
            self._problem(f"{folder}/{script}", f"is missing: the task needs {what}")
