"""Suite loaders: each format turns files on disk into ordinary ``Task`` objects.

``load_suite`` detects the format (or takes it), loads and validates every
task, and reports all problems at once. Workers call it with the same
``SuiteRef`` the driver used; a loaded suite is cached per process.
"""

from __future__ import annotations

import functools
from pathlib import Path

from crabray.core.errors import ConfigError
from crabray.formats import python
from crabray.formats.suite import Suite, SuiteEntry, SuiteErrors, SuiteRef

_LOADERS = {python.FORMAT: python}


def available_formats() -> list[str]:
    """The names of the suite formats crabray reads."""
    return sorted(_LOADERS)


def resolve_suite(path: str | Path, format: str | None = None) -> SuiteRef:
    """Where the suite is and its format, detected when not given.

    Raises:
        ConfigError: The path does not exist, the format is unknown, or none matches.
    """
    resolved = Path(path).resolve()
    if not resolved.exists():
        raise ConfigError("no such file or folder", file=str(path))
    if format is not None:
        if format not in _LOADERS:
            raise ConfigError(
                f"unknown format '{format}'; known: {', '.join(available_formats())}",
                field="--format",
            )
        return SuiteRef(path=str(resolved), format=format)
    for name, loader in _LOADERS.items():
        if loader.detect(resolved):
            return SuiteRef(path=str(resolved), format=name)
    raise ConfigError(
        f"is not a suite in any known format ({', '.join(available_formats())})", file=str(path)
    )


def load_suite(ref: SuiteRef) -> Suite:
    """Load and validate a suite (cached per process, so workers load it once).

    Raises:
        SuiteErrors: Every problem in every task, each with file and field.
    """
    return _load_cached(ref.path, ref.format)


@functools.lru_cache(maxsize=16)
def _load_cached(path: str, format: str) -> Suite:
    return _LOADERS[format].load(Path(path))


__all__ = [
    "Suite",
    "SuiteEntry",
    "SuiteErrors",
    "SuiteRef",
    "available_formats",
    "load_suite",
    "resolve_suite",
]
