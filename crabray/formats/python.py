"""Python suites: a ``.py`` file, or a folder of them, defining ``BenchmarkConfig`` objects.

Each module is imported from its file (its folder goes on ``sys.path`` so
sibling modules import); every ``BenchmarkConfig`` bound at module level joins
the suite. A module that fails to import is reported with its file, line and
the exception (or, for a validation error, every bad field), not a traceback.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import sys
import traceback
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from crabray.core import BenchmarkConfig, Task
from crabray.core.benchmark import TaskProblems
from crabray.core.errors import ConfigError, SuiteLoadError
from crabray.core.session import Benchmark, benchmark_configs
from crabray.core.words import counted
from crabray.formats.base import SuiteFormat, register_format
from crabray.formats.suite import Suite, SuiteErrors, SuiteRef, suite_name

logger = logging.getLogger(__name__)

FORMAT = "python"


def detect(path: Path) -> bool:
    """Whether ``path`` is a Python suite."""
    if path.is_file():
        return path.suffix == ".py"
    return path.is_dir() and any(_modules(path))


def load(
    path: Path, backend: str | None = None, backend_settings: dict[str, Any] | None = None
) -> Suite:
    """Import every module of the suite and collect its benchmarks.

    Args:
        path: A ``.py`` file, or a folder of them.
        backend: Replaces the backend of every environment (try a suite on docker).
        backend_settings: Every environment's backend settings: replacing its own when
            ``backend`` changes its kind, else updating them.

    Raises:
        SuiteErrors: Any module failed to import or validate; lists them all.
    """
    ref = SuiteRef(
        path=str(path), format=FORMAT, backend=backend, backend_settings=backend_settings
    )
    suite = Suite(ref, suite_name(path))
    errors: list[ConfigError] = []
    for file in _modules(path) if path.is_dir() else [path]:
        try:
            module = _import(file)
            for benchmark in _benchmarks(module):
                suite.add(_on_backend(benchmark, backend, backend_settings), str(file))
        except SuiteErrors as exc:
            errors += exc.errors
        except ConfigError as exc:
            errors.append(exc)
    if not errors and not suite.entries:
        errors.append(SuiteLoadError("defines no BenchmarkConfig at module level", file=str(path)))
    if errors:
        raise SuiteErrors(str(path), errors, partial=suite if suite.entries else None)
    return suite


@register_format(FORMAT)
class PythonFormat(SuiteFormat):
    """Python suites; tried last, since any ``.py`` file would do. Their environments name
    their own backends; ``backend`` and ``backend_settings`` replace them for a run."""

    options = frozenset({"backend", "backend_settings"})
    detect_priority = 90

    def detect(self, path: Path) -> bool:
        return detect(path)

    def load(self, path: Path, **options: Any) -> Suite:
        return load(path, **options)


def _on_backend(
    benchmark: BenchmarkConfig, backend: str | None, settings: dict[str, Any] | None
) -> BenchmarkConfig:
    """``benchmark`` with its environments moved to ``backend`` and given ``settings``."""
    if backend is None and settings is None:
        return benchmark
    moved = []
    for env in benchmark.environments:
        kind = backend or env.backend
        own = env.backend_settings if kind == env.backend else {}
        moved.append(
            env.model_copy(
                update={
                    "backend": kind,
                    "backend_settings": {**own, **(settings or {})},
                    "settings_source": None,
                }
            )
        )
    logger.info(
        "benchmark %s: its %s run on %s",
        benchmark.name,
        counted(len(moved), "environment"),
        backend or "their own backends",
    )
    return benchmark.model_copy(update={"environments": moved})


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith(("_", ".")))


def _benchmarks(module: ModuleType) -> list[BenchmarkConfig]:
    """The module's benchmarks, each once even when bound to several names."""
    return benchmark_configs(vars(module).values())


_IMPORTING: ContextVar[Path | None] = ContextVar("crabray_importing_suite", default=None)
"""The suite file this thread is importing, while it does."""


def importing_suite() -> Path | None:
    """The suite file being imported right now in this thread, or None.

    A run started while its own suite file is imported (``crabray.evaluate``
    called at a script's top level) would start again in every process that
    loads the suite: ``evaluate`` asks this first and refuses.
    """
    return _IMPORTING.get()


def defining_file(benchmark: BenchmarkConfig | Benchmark) -> Path:
    """The ``.py`` file whose module binds ``benchmark`` at module level: the suite a run
    of it loads, in the driver and on every worker (objects do not cross to workers).

    A module crabray imported as a suite counts last, the ``__main__`` of a
    script just before it: the module that defined the benchmark comes first.

    Raises:
        ConfigError: No imported module with a file binds it (made in a function, in a
            notebook or an interactive session).
    """
    wanted = {id(benchmark), id(benchmark_configs([benchmark])[0])}
    found: list[tuple[bool, bool, str, Path]] = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file.endswith(".py"):
            continue
        try:
            values = list(vars(module).values())
        except Exception:  # a module object of an odd kind: not where a suite lives
            continue
        if any(id(value) in wanted for value in values):
            found.append((name.startswith("crabray_suite_"), name == "__main__", name, Path(file)))
    if not found:
        config = benchmark_configs([benchmark])[0]
        raise ConfigError(
            f"benchmark '{config.name}' is bound at module level in no Python file, and a "
            "run loads its suite from a file in every process that runs its episodes: bind "
            "it at module level in a .py file and import it from there, or give that "
            "file's path"
        )
    return min(found)[3]


def _import(file: Path) -> ModuleType:
    """Import ``file`` as a uniquely named module.

    Raises:
        SuiteLoadError: Naming the file, the line and what went wrong.
    """
    resolved = file.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:8]
    name = f"crabray_suite_{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise SuiteLoadError("cannot be imported as a Python module", file=str(file))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    importing = _IMPORTING.set(resolved)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        problems: list[ConfigError] = [*_load_errors(file, resolved, exc)]
        raise (problems[0] if len(problems) == 1 else SuiteErrors(str(file), problems)) from exc
    finally:
        _IMPORTING.reset(importing)
    logger.debug("imported suite module %s as %s", file, name)
    return module


def _load_errors(file: Path, resolved: Path, exc: Exception) -> list[SuiteLoadError]:
    """What went wrong importing ``file``: at the failing line, or at each bad task's line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == resolved]
    where = f"{file}:{frames[-1].lineno}" if frames else str(file)
    if not isinstance(exc, ValidationError):
        return [SuiteLoadError(f"{type(exc).__name__}: {exc}", file=where)]
    problems = []
    for err in exc.errors():
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, TaskProblems):
            tasks = err["input"].get("tasks", []) if isinstance(err["input"], dict) else []
            problems += [
                SuiteLoadError(
                    f"{exc.title}.{message}", file=_task_line(file, resolved, tasks, index, where)
                )
                for index, message in cause.problems
            ]
            continue
        loc = ".".join(str(p) for p in (exc.title, *err["loc"]))
        problems.append(SuiteLoadError(f"{loc}: {_clean(err['msg'])}", file=where))
    return problems


def _task_line(file: Path, resolved: Path, tasks: object, index: int, default: str) -> str:
    """``file:line`` of task ``index`` of a benchmark's ``tasks``, if it was written in ``file``."""
    task = tasks[index] if isinstance(tasks, list | tuple) and index < len(tasks) else None
    site = task.defined_at if isinstance(task, Task) else None
    if site is None or Path(site[0]).resolve() != resolved:
        return default
    return f"{file}:{site[1]}"


def _clean(message: str) -> str:
    return message.removeprefix("Value error, ")
