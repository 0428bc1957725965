"""Static checks of one task folder, on the host, before anything runs.

Nothing of the task is executed here: ``evaluator.py`` is parsed with ``ast``
(it imports ``scoring`` and ``common``, which exist only in the sandbox), the
Dockerfile is read for its ``FROM`` lines, and the YAML and JSON files are
parsed. Every problem is collected with its file and field, so one pass
reports all of them.
"""

from __future__ import annotations

import ast
import json
import platform
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crabray.core.errors import ConfigError
from crabray.formats.task_folder._services import REGISTRY_FILE, ServiceRegistry, read_yaml

TASK_MD = "task.md"
CHECKPOINTS_MD = "checkpoints.md"
EVALUATOR = "evaluator.py"
DOCKERFILE = "Dockerfile"
DEPENDENCIES = "dependencies.yml"
SCENARIOS = "scenarios.json"
SOLUTION = "solution.sh"
INIT_SCRIPTS = ("pre_init.py", "populate_data.py", "post_init.py")
"""Init scripts, in the order they run."""

TASK_MARKERS = (TASK_MD, EVALUATOR, DOCKERFILE, DEPENDENCIES, CHECKPOINTS_MD)
"""Files that make a subfolder of a suite a task folder (even one missing task.md)."""

GRADER_FUNCTION = "grade_checkpoints"

ORIGINAL_BASE_IMAGE = re.compile(
    r"^(?:ghcr\.io/)?(?:theagentcompany|li-boxuan)/task-base-image(:[\w.-]+)?(@\S+)?$",
    re.IGNORECASE,
)
"""Every published name of the original format's base image (TheAgentCompany's 175
Dockerfiles say ``ghcr.io/li-boxuan/task-base-image:1.0.0``), which cannot be pulled here."""

CRABRAY_BASE_IMAGE = "crabray/task-base:latest"
"""What replaces the original base image: built from ``envs/task-base``."""

_FROM_LINE = re.compile(
    r"^FROM\s+(?:--\S+\s+)*(?P<image>\S+)(?:\s+AS\s+(?P<alias>\S+))?\s*$", re.IGNORECASE
)


@dataclass(frozen=True)
class TaskFiles:
    """What the checks read from a valid task folder."""

    folder: Path
    instruction: str
    checkpoints: str | None
    scenarios: Any
    dependencies: list[str]
    base_image: str | None
    init_scripts: list[str] = field(default_factory=list)
    solution: str | None = None


IMAGE_PYTHON_TIMEOUT_SEC = 60.0
_PARSE = (
    "import ast, sys\n"
    "try:\n"
    "    tree = ast.parse(sys.stdin.read(), filename='evaluator.py')\n"
    "except SyntaxError as e:\n"
    "    print(f'line {e.lineno}, column {e.offset}: {e.msg}')\n"
    "    sys.exit(2)\n"
    "names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]\n"
    "sys.exit(0 if sys.argv[1] in names else 3)\n"
)
_NO_GRADER = 3
_BAD_SYNTAX = 2
_DOCKER_RUN = ("docker", "run", "--rm", "-i", "--network", "none")


def syntax_problem(error: SyntaxError, source: str, image: str | None) -> str | None:
    """What is wrong with an evaluator the host's Python cannot parse, or ``None``.

    The evaluator runs on the image's Python, which may be newer than the
    host's (TheAgentCompany's evaluators use Python 3.12 f-strings): when the
    sandbox image is known, its ``python3`` has the last word. ``None`` means
    it parses there.
    """
    where = f"line {error.lineno}, column {error.offset}: {error.msg}"
    if image is None:
        return f"has a syntax error at {where}"
    try:
        done = subprocess.run(
            [*_DOCKER_RUN, image, "python3", "-c", _PARSE, GRADER_FUNCTION],
            input=source,
            capture_output=True,
            text=True,
            timeout=IMAGE_PYTHON_TIMEOUT_SEC,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return (
            f"does not parse on the host's Python {platform.python_version()} ({where}) and "
            f"cannot be checked with the python3 of its image {image}: {exc}"
        )
    if done.returncode == 0:
        return None
    if done.returncode == _NO_GRADER:
        return (
            f"defines no {GRADER_FUNCTION} function at module level: it must define "
            f'`def {GRADER_FUNCTION}(trajectory="") -> Result`'
        )
    if done.returncode == _BAD_SYNTAX and done.stdout.startswith("line "):
        return f"has a syntax error at {done.stdout.strip()} (the python3 of its image {image})"
    last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    hint = " (build it with `crabray envs build task-base`)" if image == CRABRAY_BASE_IMAGE else ""
    return (
        f"does not parse on the host's Python {platform.python_version()} ({where}) and "
        f"cannot be checked with the python3 of its image {image}{hint}: {last}"
    )


def is_task_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a task: its ``task.md``, or its evaluator and Dockerfile."""
    if not folder.is_dir():
        return False
    return (folder / TASK_MD).is_file() or (
        (folder / EVALUATOR).is_file() and (folder / DOCKERFILE).is_file()
    )


def looks_like_task(folder: Path) -> bool:
    """Whether a suite's subfolder is meant as a task: it holds any task file."""
    return folder.is_dir() and any((folder / name).is_file() for name in TASK_MARKERS)


class TaskChecker:
    """Checks one task folder, collecting every problem.

    Args:
        folder: The task folder.
        registry: The suite's service registry, if it has one.
        base_image: ``--base-image``: replaces every ``FROM`` when given.
        check_services: Check dependencies against the registry (off when the
            registry itself is broken: its own problems say enough).
    """

    def __init__(
        self,
        folder: Path,
        registry: ServiceRegistry | None,
        base_image: str | None,
        *,
        check_services: bool = True,
    ) -> None:
        self.folder = folder
        self.registry = registry
        self.check_services = check_services
        self.base_image_override = base_image
        self.problems: list[ConfigError] = []

    def check(self) -> TaskFiles | None:
        """The task's files, or ``None`` when ``problems`` says what is wrong."""
        instruction = self._instruction()
        base_image = self._dockerfile()
        self._evaluator(base_image)
        dependencies = self._dependencies()
        scenarios = self._scenarios()
        checkpoints = self._optional_text(CHECKPOINTS_MD)
        solution = self._optional_text(SOLUTION)
        if self.problems or instruction is None:
            return None
        return TaskFiles(
            folder=self.folder,
            instruction=instruction,
            checkpoints=checkpoints,
            scenarios=scenarios,
            dependencies=dependencies,
            base_image=base_image,
            init_scripts=[n for n in INIT_SCRIPTS if (self.folder / n).is_file()],
            solution=solution,
        )

    def _problem(self, name: str, reason: str, field: str | None = None) -> None:
        self.problems.append(ConfigError(reason, file=str(self.folder / name), field=field))

    def _read(self, name: str, what: str) -> str | None:
        file = self.folder / name
        if not file.is_file():
            self._problem(name, f"is missing: every task folder needs {what}")
            return None
        try:
            return file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._problem(name, f"cannot be read: {exc}")
            return None

    def _optional_text(self, name: str) -> str | None:
        if not (self.folder / name).is_file():
            return None
        return self._read(name, "")

    def _instruction(self) -> str | None:
        text = self._read(TASK_MD, "a task.md with the instruction for the agent")
        if text is not None and not text.strip():
            self._problem(TASK_MD, "is empty: it must hold the instruction for the agent")
            return None
        return text.strip() if text is not None else None

    def _evaluator(self, image: str | None) -> None:
        source = self._read(EVALUATOR, f"an evaluator.py defining {GRADER_FUNCTION}()")
        if source is None:
            return
        try:
            tree = ast.parse(source, filename=str(self.folder / EVALUATOR))
        except SyntaxError as exc:
            problem = syntax_problem(exc, source, image)
            if problem is not None:
                self._problem(EVALUATOR, problem)
            return
        if not any(
            isinstance(node, ast.FunctionDef) and node.name == GRADER_FUNCTION for node in tree.body
        ):
            self._problem(
                EVALUATOR,
                f"defines no {GRADER_FUNCTION} function at module level: it must define "
                f'`def {GRADER_FUNCTION}(trajectory="") -> Result`',
                GRADER_FUNCTION,
            )

    def _dockerfile(self) -> str | None:
        """The image that replaces the ``FROM`` images (``None``: build as written)."""
        text = self._read(DOCKERFILE, "a Dockerfile defining the task's sandbox")
        if text is None:
            return None
        stages = from_lines(text)
        if not stages:
            self._problem(DOCKERFILE, "has no FROM line: it must start from a base image", "FROM")
            return None
        if self.base_image_override is not None:
            return self.base_image_override
        aliases = {alias.lower() for _, alias in stages if alias}
        images = [image for image, _ in stages if image.lower() not in aliases]
        original = [image for image in images if ORIGINAL_BASE_IMAGE.match(image)]
        if not original:
            return None
        if len(original) != len(images):
            others = sorted(set(images) - set(original))
            self._problem(
                DOCKERFILE,
                f"mixes the original base image {original[0]} with other images {others}; "
                "crabray can only replace every FROM image: pass --base-image IMAGE",
                "FROM",
            )
            return None
        return CRABRAY_BASE_IMAGE

    def _dependencies(self) -> list[str]:
        file = self.folder / DEPENDENCIES
        if not file.is_file():
            self._problem(
                DEPENDENCIES,
                "is missing: every task folder needs one, listing the services it uses "
                "(an empty file when it uses none)",
            )
            return []
        try:
            raw = read_yaml(file)
        except ConfigError as exc:
            self.problems.append(exc)
            return []
        if raw is None:
            return []
        if not isinstance(raw, list) or not all(isinstance(n, str) and n for n in raw):
            self._problem(
                DEPENDENCIES,
                f"must be a YAML list of service names (e.g. `- gitlab`), got {raw!r}",
            )
            return []
        for index, name in enumerate(raw):
            self._known_service(index, name)
        return list(dict.fromkeys(raw))

    def _known_service(self, index: int, name: str) -> None:
        if not self.check_services:
            return
        if self.registry is None:
            self._problem(
                DEPENDENCIES,
                f"names service '{name}' but the suite has no service registry: put a "
                f"{REGISTRY_FILE} at the suite root or pass --services FILE",
                str(index),
            )
        elif name not in self.registry.services:
            self._problem(
                DEPENDENCIES,
                f"unknown service '{name}'; the registry {self.registry.file} knows: "
                f"{self.registry.known()}",
                str(index),
            )

    def _scenarios(self) -> Any:
        if not (self.folder / SCENARIOS).is_file():
            return None
        text = self._read(SCENARIOS, "")
        if text is None:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            self._problem(
                SCENARIOS, f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            )
            return None


def from_lines(dockerfile: str) -> list[tuple[str, str | None]]:
    """The ``(image, stage alias)`` of every ``FROM`` instruction of a Dockerfile."""
    instructions: list[str] = []
    current = ""
    for line in dockerfile.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # comments and blank lines, even inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        instructions.append(current + stripped)
        current = ""
    if current:
        instructions.append(current)
    found = []
    for instruction in instructions:
        match = _FROM_LINE.match(instruction)
        if match:
            found.append((match["image"], match["alias"]))
    return found
