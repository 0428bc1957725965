"""Load a task-JSON suite: ``examples/<tool>/<id>/<id>.json`` files into ordinary ``Task``s.

Every problem of every task is collected (file, dotted field, reason) before
anything runs. Python files at the suite's root (``functions.py``) are
imported first, so their registered functions are known when tasks validate.
"""

from __future__ import annotations

import glob
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, complete, fail, submit
from crabray.core import Action, BenchmarkConfig, EnvironmentConfig, Task
from crabray.core.env import Env
from crabray.core.environment import SettingsSource
from crabray.core.errors import ActionError, ConfigError
from crabray.core.task import graded_by_scorer
from crabray.formats import python as python_format
from crabray.formats.base import SuiteFormat, register_format
from crabray.formats.steps import closed_action
from crabray.formats.suite import Suite, SuiteErrors, SuiteRef
from crabray.formats.task_json import _evaluation, _notebooks, _setup  # noqa: F401 (registers)
from crabray.formats.task_json._legacy import LegacyEvaluator, plan_evaluator, score_plan
from crabray.formats.task_json._registry import TaskContext, lookup
from crabray.formats.task_json._snapshots import (
    SHARED_FOLDER,
    SnapshotSettings,
    backend_of_snapshots,
    collect_shared_folder,
    load_snapshot_settings,
)
from crabray.formats.task_json._summary import summary_files

logger = logging.getLogger(__name__)

FORMAT = "task-json"
DEFAULT_BACKEND = "local"
EXAMPLES_DIR = "examples"
DEFAULT_ENV = "sandbox"


class FunctionCall(BaseModel):
    """A ``{"func", "arguments"}`` entry of ``config`` or ``evaluation``."""

    model_config = ConfigDict(extra="forbid")

    func: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class SolutionStep(BaseModel):
    """One step of the reference solution (crabray's extra field): an action and its arguments."""

    model_config = ConfigDict(extra="forbid")

    action: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class TaskDocument(BaseModel):
    """A task-JSON file. Unknown fields are allowed and kept in the task's metadata."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1)
    snapshot: str | None = None
    instruction: str = Field(min_length=1)
    source: list[str] | str = Field(default_factory=list)
    related_apps: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    action_number: int | None = Field(default=None, gt=0)
    config: list[dict[str, Any]] = Field(default_factory=list)
    evaluation: FunctionCall | None = None
    evaluator: LegacyEvaluator | None = None
    counterpart: str | None = None
    solution: list[SolutionStep] = Field(default_factory=list)


def detect(path: Path) -> bool:
    """Whether ``path`` is a task-JSON suite: a folder with ``examples/``, an index beside it,
    the ``examples/`` folder itself, or one ``examples/<tool>/`` folder of it."""
    if path.is_file() and path.suffix != ".json":
        return False
    root, tool = suite_root(path)
    examples = root / EXAMPLES_DIR
    pattern = f"{glob.escape(tool)}/*/*.json" if tool is not None else "*/*/*.json"
    return examples.is_dir() and any(examples.glob(pattern))


def suite_root(path: Path) -> tuple[Path, str | None]:
    """The suite folder (holding ``examples/``) that ``path`` names, and the one tool it
    selects, if any: ``path`` may be the suite folder, an index file in it, its
    ``examples/`` folder or one ``examples/<tool>/`` folder."""
    if path.is_file():
        return path.parent, None
    if (path / EXAMPLES_DIR).is_dir():
        return path, None
    if path.name == EXAMPLES_DIR:
        return path.parent, None
    if path.parent.name == EXAMPLES_DIR:
        return path.parent.parent, path.name
    return path, None


def load(path: Path, backend: str = DEFAULT_BACKEND, index: str | None = None) -> Suite:
    """Load and validate every selected task of the suite at ``path``.

    Args:
        path: The suite folder (holding ``examples/``), or an index file beside it.
        backend: The sandbox backend every task runs on.
        index: An index file ``{"tool": [task ids]}`` selecting the tasks to load.

    Raises:
        SuiteErrors: Every problem, each naming its file and field.
    """
    root, tool = suite_root(path)
    index_file = Path(index) if index else (path if path.is_file() else None)
    ref = SuiteRef(path=str(path), format=FORMAT, backend=backend, index=index)
    errors: list[ConfigError] = []
    try:
        snapshot_settings = load_snapshot_settings(root, backend)
    except ConfigError as exc:
        errors.append(exc)
        snapshot_settings = SnapshotSettings(None, {})
    for module in sorted(root.glob("*.py")):
        if not module.name.startswith(("_", ".")):
            try:
                python_format._import(module)
            except ConfigError as exc:
                errors.append(exc)
    loaded: dict[str, tuple[Task, dict[str, Any]]] = {}
    for task_tool, file in _task_files(root, index_file, errors):
        if tool is not None and task_tool != tool:
            continue
        try:
            task, raw = _load_task(file, task_tool)
            if backend != DEFAULT_BACKEND:
                task = task.model_copy(update={"teardown": [*task.teardown, _collect_step()]})
        except SuiteErrors as exc:
            errors += exc.errors
            continue
        except ConfigError as exc:
            errors.append(exc)
            continue
        if task.id in loaded:
            errors.append(
                ConfigError(
                    f"task id '{task.id}' is also used by {loaded[task.id][1]['_file']}",
                    file=str(file),
                    field="id",
                )
            )
            continue
        warnings = task.metadata.get("warnings", [])
        loaded[task.id] = (task, {**raw, "_file": str(file), "_warnings": warnings})
    if not errors and not loaded:
        errors.append(
            ConfigError("holds no task files examples/<tool>/<id>/<id>.json", file=str(path))
        )
    if errors:
        raise SuiteErrors(str(path), errors)
    tasks = [task for task, _ in loaded.values()]
    snapshots = {_env_name(t.metadata["snapshot"]): t.metadata["snapshot"] for t in tasks}
    benchmark = BenchmarkConfig(
        name=root.name,
        tasks=tasks,
        environments=[
            _environment(
                name,
                backend,
                snapshot_settings.for_snapshot(snapshots[name], backend),
                snapshot_settings.source_of(backend, snapshots[name]),
            )
            for name in sorted(snapshots)
        ],
    )
    raws = {task_id: raw for task_id, (_, raw) in loaded.items()}
    suite = Suite(ref, root.name, record_files=summary_files(raws))
    suite.add(benchmark, str(path))
    return suite


@register_format(FORMAT)
class TaskJsonFormat(SuiteFormat):
    """Task-JSON suites: run on one backend (given, else the one their snapshots need:
    ``backend_for``), optionally through an index file selecting tasks."""

    options = frozenset({"backend", "index"})
    default_backend = DEFAULT_BACKEND
    detect_priority = 10

    def detect(self, path: Path) -> bool:
        return detect(path)

    def load(self, path: Path, **options: Any) -> Suite:
        return load(path, **options)

    def backend_for(self, path: Path) -> str:
        """``docker`` for a suite whose every snapshot has a docker image (GUI-OS's
        ``jupyter``), else ``local`` (``backend_of_snapshots``)."""
        root, _ = suite_root(path)
        backend = backend_of_snapshots(root, _snapshots_named(root))
        logger.info("task-json suite %s runs on %s unless --backend says otherwise", root, backend)
        return backend


def _snapshots_named(root: Path) -> set[str | None]:
    """The snapshots the suite's task files name. A file that cannot be read names none
    here: loading the suite reports it, with its file and reason."""
    named: set[str | None] = set()
    for _, file in _task_files(root, None, []):
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(doc, dict):
            snapshot = doc.get("snapshot")
            named.add(snapshot if isinstance(snapshot, str) and snapshot else None)
    return named


def _environment(
    name: str, backend: str, settings: dict[str, Any], source: SettingsSource | None
) -> EnvironmentConfig:
    return EnvironmentConfig(
        name=name,
        backend=backend,
        backend_settings=settings,
        settings_source=source,
        description="A Linux machine; the task's files are where its instruction says.",
        action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
    )


def _collect_step() -> Action:
    """Hands the sandbox's shared folder back as artifacts (not on the local backend, where
    an absolute path would be the host's)."""
    return closed_action(
        "collect_shared_folder",
        f"hand the files of {SHARED_FOLDER} back as the episode's artifacts",
        collect_shared_folder,
    )


def _env_name(snapshot: str | None) -> str:
    if not snapshot:
        return DEFAULT_ENV
    name = re.sub(r"\W", "_", snapshot)
    name = f"s_{name}" if name[0].isdigit() else name
    return f"{name}_env" if name == "root" else name


def _task_files(
    root: Path, index: Path | None, errors: list[ConfigError]
) -> list[tuple[str, Path]]:
    examples = root / EXAMPLES_DIR
    if index is None:
        return [
            (file.parent.parent.name, file)
            for file in sorted(examples.glob("*/*/*.json"))
            if file.stem == file.parent.name
        ]
    try:
        selection = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        errors.append(ConfigError(f"cannot read the index: {exc!r}", file=str(index)))
        return []
    if not isinstance(selection, dict) or not all(
        isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in selection.values()
    ):
        errors.append(
            ConfigError(
                'must map each tool to a list of task ids: {"tool": ["id"]}', file=str(index)
            )
        )
        return []
    files = []
    for tool, ids in selection.items():
        for position, task_id in enumerate(ids):
            file = examples / tool / task_id / f"{task_id}.json"
            if file.is_file():
                files.append((tool, file))
            else:
                errors.append(
                    ConfigError(f"no task file {file}", file=str(index), field=f"{tool}.{position}")
                )
    return files


def _load_task(file: Path, tool: str) -> tuple[Task, dict[str, Any]]:
    """One task file as a ``Task``, and its raw fields.

    Raises:
        ConfigError: The file is not JSON or not an object.
        SuiteErrors: Its fields do not validate (every problem, file and field).
    """
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", file=str(file)) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", file=str(file)
        ) from exc
    except RecursionError as exc:
        raise ConfigError(
            "is nested too deeply to read (arrays or objects inside one another past "
            f"Python's limit of about {sys.getrecursionlimit()} levels); a task needs a few "
            "levels at most: flatten or remove the deep value",
            file=str(file),
        ) from exc
    if not isinstance(raw, dict):
        raise ConfigError("must hold a JSON object (the task)", file=str(file))
    problems: list[tuple[str, str]] = []
    try:
        doc = TaskDocument.model_validate(raw)
    except ValidationError as exc:
        problems = [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()]
        # Check the rest too, so one pass reports every problem of the file.
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
        rest = {"id": file.stem, "instruction": "-"} | {
            k: v for k, v in raw.items() if k not in bad
        }
        try:
            doc = TaskDocument.model_validate(rest)
        except ValidationError:
            doc = None
    builder = _TaskBuilder(file, tool, doc) if doc is not None else None
    task = builder.build() if builder is not None else None
    problems += builder.problems if builder is not None else []
    if problems or task is None:
        raise SuiteErrors(str(file), [ConfigError(m, file=str(file), field=f) for f, m in problems])
    return task, raw


class _TaskBuilder:
    """Turns a validated document into a ``Task``, collecting (field, problem) pairs."""

    def __init__(self, file: Path, tool: str, doc: TaskDocument) -> None:
        self.file, self.tool, self.doc = file, tool, doc
        self.task_dir = file.parent
        self.problems: list[tuple[str, str]] = []
        self.warnings: list[str] = []
        self.func_style = any(isinstance(e, dict) and "func" in e for e in doc.config)

    def build(self) -> Task | None:
        doc = self.doc
        if doc.id != self.file.stem:
            self.problems.append(
                ("id", f"'{doc.id}' does not match the file name '{self.file.name}'")
            )
        if (doc.evaluation is None) == (doc.evaluator is None):
            self.problems.append(
                ("evaluation", "give exactly one of 'evaluation' or the older 'evaluator' block")
            )
        setup = [self._setup_step(i, entry) for i, entry in enumerate(doc.config)]
        scorer = self._scorer()
        solution = [self._solution_step(i, step) for i, step in enumerate(doc.solution)]
        if self.problems:
            return None
        known = set(TaskDocument.model_fields)
        metadata = {
            "format": FORMAT,
            "tool": self.tool,
            "file": str(self.file),
            "snapshot": doc.snapshot,
            "source": doc.source,
            "related_apps": doc.related_apps,
            "counterpart": doc.counterpart,
            "action_number": doc.action_number,
            "warnings": self.warnings,
            **{k: v for k, v in (doc.model_extra or {}).items() if k not in known},
        }
        try:
            return Task(
                id=doc.id,
                description=doc.instruction,
                environments=[_env_name(doc.snapshot)],
                setup=[a for a in setup if a is not None],
                evaluator=graded_by_scorer,
                scorer=scorer,
                max_steps=doc.action_number,
                tags=doc.tags,
                metadata=metadata,
                solution=[a for a in solution if a is not None],
            )
        except ValidationError as exc:
            self.problems += [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()]
            return None

    def _setup_step(self, index: int, entry: dict[str, Any]) -> Action | None:
        where = f"config.{index}"
        if "func" in entry:
            name, arguments, args_field = entry.get("func"), entry.get("arguments", {}), "arguments"
            extra = set(entry) - {"func", "arguments"}
        elif "type" in entry and self.func_style:
            return self._skipped_step(where, entry)
        elif "type" in entry:
            name, arguments, args_field = (
                entry.get("type"),
                entry.get("parameters", {}),
                "parameters",
            )
            extra = set(entry) - {"type", "parameters"}
        else:
            self.problems.append(
                (where, 'needs "func" (with "arguments") or "type" (with "parameters")')
            )
            return None
        if extra:
            self.problems.append((where, f"unknown keys {sorted(extra)}"))
        return self._call("setup", str(name), arguments, f"{where}.{args_field}", f"{where}.func")

    def _skipped_step(self, where: str, entry: dict[str, Any]) -> Action:
        """A ``{"type", "parameters"}`` step among ``func`` steps: the GUI-OS orchestrator
        skips it (it has no ``func``) with a log line, and so does crabray, recording why."""
        warning = (
            f"{self.file}: {where}: skipped the step {json.dumps(entry, default=str)}: a "
            "'type' step in a config of 'func' steps (the GUI-OS orchestrator skips it too)"
        )
        self.warnings.append(warning)

        def run(env: Env) -> str:
            logger.warning("%s", warning)
            return warning

        return closed_action("skipped_step", warning, run)

    def _call(
        self, kind: str, name: str, arguments: Any, args_where: str, name_where: str
    ) -> Action | None:
        try:
            function = lookup(kind, name)  # type: ignore[arg-type]
        except ConfigError as exc:
            self.problems.append((name_where, exc.reason))
            return None
        values, bad = function.validate(arguments, self.task_dir)
        self.problems += [(f"{args_where}.{f}".rstrip("."), m) for f, m in bad]
        if bad:
            return None
        task_dir = self.task_dir

        def run(env: Env) -> Any:
            return function.func(TaskContext(env, task_dir), **values)

        return closed_action(name, f"{kind} step {name}({json.dumps(arguments, default=str)})", run)

    def _scorer(self) -> Action | None:
        doc = self.doc
        if doc.evaluation is not None:
            return self._call(
                "evaluation",
                doc.evaluation.func,
                doc.evaluation.arguments,
                "evaluation.arguments",
                "evaluation.func",
            )
        if doc.evaluator is None:
            return None
        block = doc.evaluator
        post = [
            self._call(
                "setup",
                step.type,
                step.parameters,
                f"evaluator.postconfig.{i}.parameters",
                f"evaluator.postconfig.{i}.type",
            )
            for i, step in enumerate(block.postconfig)
        ]
        plan, bad = plan_evaluator(block, self.task_dir)
        self.problems += [(f"evaluator.{f}", m) for f, m in bad]
        task_dir = self.task_dir

        def run(env: Env) -> float:
            for step in post:
                if step is not None:
                    step.run(env)
            return score_plan(TaskContext(env, task_dir), plan, block.conj)

        funcs = block.func if isinstance(block.func, list) else [block.func]
        return closed_action("+".join(funcs), f"evaluator {block.conj} of {funcs}", run)

    def _solution_step(self, index: int, step: SolutionStep) -> Action | None:
        actions: dict[str, Action] = {
            a.name: a for a in (*SHELL_ACTIONS, *FILE_ACTIONS, complete, fail, submit)
        }
        found = actions.get(step.action)
        if found is None:
            self.problems.append(
                (
                    f"solution.{index}.action",
                    f"unknown action '{step.action}'; known: {', '.join(sorted(actions))}",
                )
            )
            return None
        try:
            bound = found(**step.arguments)
            bound.validate_arguments({})
        except ActionError as exc:
            self.problems.append((f"solution.{index}.arguments", str(exc)))
            return None
        return bound
