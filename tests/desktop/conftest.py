"""Fixtures for the desktop tests: a local sandbox with a real Xvfb screen.

Outside CI a host without Xvfb, xdotool or xwd skips these tests with the
command that installs them; under ``CI=true`` it fails them instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import create_backend
from crabray.backends.display import INSTALL_HINT, missing_tools
from crabray.backends.environment import AgentSignals, Environment
from crabray.backends.local import LocalBackend
from crabray.core.environment import EnvironmentConfig

WIDTH, HEIGHT = 640, 480


def require_screen_tools() -> None:
    """Skip (fail under CI) when the host lacks what a screen needs."""
    missing = missing_tools()
    if not missing:
        return
    message = f"{', '.join(missing)} missing; install with: {INSTALL_HINT}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def make_desktop(tmp_path: Path, display: bool | str = f"{WIDTH}x{HEIGHT}x24") -> LocalBackend:
    """An unstarted local backend with a screen."""
    require_screen_tools()
    config = EnvironmentConfig(
        name="desk",
        backend_settings={"root_dir": str(tmp_path / "sandboxes"), "display": display},
    )
    backend = create_backend(config)
    assert isinstance(backend, LocalBackend)
    return backend


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[LocalBackend]:
    backend = make_desktop(tmp_path)
    backend.start()
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture
def desk_env(desktop: LocalBackend) -> Environment:
    """What desktop actions receive as ``env``."""
    return Environment("desk", desktop, AgentSignals())
