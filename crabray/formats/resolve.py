"""Which format a suite is, how to read it (``resolve_suite``), and loading it (``load_suite``).

``load_suite`` detects the format (or takes it), loads and validates every
task, and reports all problems at once. Workers call it with the same
``SuiteRef`` the driver used; a loaded suite is cached per process.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from crabray.core.errors import ConfigError
from crabray.formats.base import (
    available_formats,
    detect_format,
    suite_format,
)
from crabray.formats.suite import Suite, SuiteRef

_OPTION_FLAGS = {
    "backend_settings": "--backend-setting",
    "index": "--index",
    "base_image": "--base-image",
    "services": "--services",
}
"""The options a format may refuse, and the command-line flag each comes from."""


def resolve_suite(
    path: str | Path,
    format: str | None = None,
    *,
    backend: str | None = None,
    backend_settings: dict[str, Any] | None = None,
    index: str | Path | None = None,
    base_image: str | None = None,
    services: str | Path | None = None,
) -> SuiteRef:
    """Where the suite is and its format, detected when not given.

    Args:
        path: The suite.
        format: Its format; detected when ``None``.
        backend: Sandbox backend for formats that name none; their default when ``None``.
            For python suites, the backend replacing their environments' own.
        backend_settings: Python suites: settings for every environment's backend.
        index: Task-JSON index file selecting tasks (relative to the working directory,
            else to the suite).
        base_image: Task folders and Harbor suites: the image replacing every ``FROM`` of
            their Dockerfiles.
        services: Task folders: the service registry file (relative to the working
            directory, else to the suite).

    Raises:
        ConfigError: The path does not exist, the format is unknown, none matches, or
            the format takes no (or not this) backend, index, base image or services.
    """
    resolved = _resolved(Path(path), "SUITE")
    if not resolved.exists():
        raise ConfigError("no such file or folder", file=str(path))
    loader = suite_format(format) if format is not None else detect_format(resolved)
    if loader is None:
        raise ConfigError(
            f"is not a suite in any known format ({', '.join(available_formats())})",
            file=str(path),
        )
    format = loader.name
    if backend is not None and "backend" not in loader.options:
        raise ConfigError(
            f"{format} suites name their own backends in their environments", field="--backend"
        )
    if backend is not None:
        loader.check_backend(backend)
    given = {
        "backend_settings": backend_settings,
        "index": index,
        "base_image": base_image,
        "services": services,
    }
    for option, value in given.items():
        if value is not None and option not in loader.options:
            flag = _OPTION_FLAGS[option]
            raise ConfigError(f"{format} suites take no {flag[2:]} option", field=flag)
    return SuiteRef(
        path=str(resolved),
        format=format,
        backend=backend or loader.backend_for(resolved),
        backend_settings=backend_settings,
        index=None if index is None else _find_file(Path(index), resolved, "--index"),
        base_image=base_image,
        services=None if services is None else _find_file(Path(services), resolved, "--services"),
    )


def _find_file(file: Path, suite: Path, option: str) -> str:
    """``file`` relative to the working directory, else to the suite's folder."""
    for candidate in (file, (suite if suite.is_dir() else suite.parent) / file):
        if candidate.is_file():
            return str(_resolved(candidate, option))
    raise ConfigError(f"no such {option[2:]} file", file=str(file), field=option)


def _resolved(path: Path, option: str) -> Path:
    """``path`` made absolute with its links followed; a link loop is a ``ConfigError``.

    ``Path.resolve`` raises ``RuntimeError`` (Python 3.11) or ``OSError`` (3.13) on
    a loop of symbolic links, which must not reach the user as a traceback.
    """
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:
        raise ConfigError(
            f"cannot follow this path ({exc}): it is a loop of symbolic links or unreadable; "
            "point to the real file or folder",
            file=str(path),
            field=option,
        ) from exc


def load_suite(ref: SuiteRef) -> Suite:
    """Load and validate a suite (cached per process, so workers load it once).

    Raises:
        SuiteErrors: Every problem in every task, each with file and field.
    """
    settings = None if ref.backend_settings is None else json.dumps(ref.backend_settings)
    return _load_cached(
        ref.path, ref.format, ref.backend, settings, ref.index, ref.base_image, ref.services
    )


@functools.lru_cache(maxsize=16)
def _load_cached(
    path: str,
    format: str,
    backend: str | None,
    backend_settings: str | None,
    index: str | None,
    base_image: str | None,
    services: str | None,
) -> Suite:
    options: dict[str, Any] = {
        "backend": backend,
        "backend_settings": None if backend_settings is None else json.loads(backend_settings),
        "index": index,
        "base_image": base_image,
        "services": services,
    }
    return suite_format(format).load(
        Path(path), **{k: v for k, v in options.items() if v is not None}
    )
