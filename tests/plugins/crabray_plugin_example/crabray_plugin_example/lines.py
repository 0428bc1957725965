"""The ``example-lines`` format: a ``.lines`` file, one ``id: text`` task per line.

Each task asks for ``text`` in ``answer.txt``, in a sandbox of the chosen
backend (the plugin's ``example`` backend unless ``--backend`` says otherwise).
"""

from __future__ import annotations

from pathlib import Path

from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, file_contains, path_exists, write_file
from crabray.core.errors import ConfigError
from crabray.formats import SuiteFormat
from crabray.formats.suite import Suite, SuiteErrors, SuiteRef, suite_name


class LinesFormat(SuiteFormat):
    """One task per ``id: text`` line; takes a backend, nothing else."""

    options = frozenset({"backend"})
    default_backend = "example"

    def detect(self, path: Path) -> bool:
        return path.is_file() and path.suffix == ".lines"

    def load(self, path: Path, **options: str) -> Suite:
        backend = options.get("backend", self.default_backend or "example")
        tasks: list[Task] = []
        errors: list[ConfigError] = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            task_id, sep, text = (part.strip() for part in line.partition(":"))
            if not sep or not task_id or not text:
                errors.append(
                    ConfigError("expected 'id: text'", file=str(path), field=f"line {number}")
                )
                continue
            tasks.append(
                Task(
                    id=task_id,
                    description=f"Write the text '{text}' into answer.txt.",
                    evaluator=file_contains(path="answer.txt", text=text)
                    & path_exists(path="PLUGIN"),
                    solution=[write_file(path="answer.txt", content=text)],
                )
            )
        if errors:
            raise SuiteErrors(str(path), errors)
        sandbox = EnvironmentConfig(
            name="sandbox", backend=backend, action_space=[*SHELL_ACTIONS, *FILE_ACTIONS]
        )
        suite = Suite(SuiteRef(path=str(path), format=self.name, backend=backend), suite_name(path))
        suite.add(
            BenchmarkConfig(
                name=suite.name,
                tasks=tasks,
                environments=[sandbox],
                default_env="sandbox",
                step_limit=5,
            ),
            str(path),
        )
        return suite
