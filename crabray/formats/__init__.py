"""Suite loaders: each format turns files on disk into ordinary ``Task`` objects.

``load_suite`` detects the format (or takes it), loads and validates every
task, and reports all problems at once. Workers call it with the same
``SuiteRef`` the driver used; a loaded suite is cached per process.
"""

from __future__ import annotations

import functools
from pathlib import Path

from crabray.core.errors import ConfigError
from crabray.formats import python, task_json
from crabray.formats.suite import Suite, SuiteEntry, SuiteErrors, SuiteRef

_LOADERS = {task_json.FORMAT: task_json, python.FORMAT: python}
"""Loaders in detection order. A loader that defines ``DEFAULT_BACKEND`` takes a
``backend`` (its format names no sandbox); one that defines ``SUPPORTS_INDEX``
takes an ``index`` file."""


def available_formats() -> list[str]:
    """The names of the suite formats crabray reads."""
    return sorted(_LOADERS)


def resolve_suite(
    path: str | Path,
    format: str | None = None,
    *,
    backend: str | None = None,
    index: str | Path | None = None,
) -> SuiteRef:
    """Where the suite is and its format, detected when not given.

    Args:
        path: The suite.
        format: Its format; detected when ``None``.
        backend: Sandbox backend for formats that name none; their default when ``None``.
        index: Task-JSON index file selecting tasks (relative to the working directory,
            else to the suite).

    Raises:
        ConfigError: The path does not exist, the format is unknown, none matches, or
            the format takes no backend or index.
    """
    resolved = Path(path).resolve()
    if not resolved.exists():
        raise ConfigError("no such file or folder", file=str(path))
    if format is not None and format not in _LOADERS:
        raise ConfigError(
            f"unknown format '{format}'; known: {', '.join(available_formats())}",
            field="--format",
        )
    if format is None:
        format = next((n for n, loader in _LOADERS.items() if loader.detect(resolved)), None)
    if format is None:
        raise ConfigError(
            f"is not a suite in any known format ({', '.join(available_formats())})",
            file=str(path),
        )
    loader = _LOADERS[format]
    default_backend = getattr(loader, "DEFAULT_BACKEND", None)
    if backend is not None and default_backend is None:
        raise ConfigError(
            f"{format} suites name their own backends in their environments", field="--backend"
        )
    if index is not None and not getattr(loader, "SUPPORTS_INDEX", False):
        raise ConfigError(f"{format} suites take no index file", field="--index")
    return SuiteRef(
        path=str(resolved),
        format=format,
        backend=backend or default_backend,
        index=None if index is None else _find_index(Path(index), resolved),
    )


def _find_index(index: Path, suite: Path) -> str:
    for candidate in (index, (suite if suite.is_dir() else suite.parent) / index):
        if candidate.is_file():
            return str(candidate.resolve())
    raise ConfigError("no such index file", file=str(index), field="--index")


def load_suite(ref: SuiteRef) -> Suite:
    """Load and validate a suite (cached per process, so workers load it once).

    Raises:
        SuiteErrors: Every problem in every task, each with file and field.
    """
    return _load_cached(ref.path, ref.format, ref.backend, ref.index)


@functools.lru_cache(maxsize=16)
def _load_cached(path: str, format: str, backend: str | None, index: str | None) -> Suite:
    options = {"backend": backend, "index": index}
    return _LOADERS[format].load(Path(path), **{k: v for k, v in options.items() if v})


__all__ = [
    "Suite",
    "SuiteEntry",
    "SuiteErrors",
    "SuiteRef",
    "available_formats",
    "load_suite",
    "resolve_suite",
]
