"""Fixtures for the desktop tests: a local sandbox with a real Xvfb screen, and
the ``crabray/crab-desktop`` image (CRAB's Ubuntu environment) for docker.

Outside CI a host without Xvfb, xdotool or xwd skips these tests with the
command that installs them; under ``CI=true`` it fails them instead.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import create_backend
from crabray.backends.display import INSTALL_HINT, missing_tools
from crabray.backends.envs import build_env
from crabray.backends.episode_env import EpisodeEnv
from crabray.backends.local import LocalBackend
from crabray.core.env import AgentSignals
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import CrabrayError
from tests.backends.docker.dockerd import docker_missing

WIDTH, HEIGHT = 640, 480


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test here needs an X server (Xvfb) or a desktop container: a ``component`` test
    (tests/conftest.py). pytest calls this hook for the tests of this folder only."""
    item.add_marker(pytest.mark.component)


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
def desk_env(desktop: LocalBackend) -> EpisodeEnv:
    """What desktop actions receive as ``env``."""
    return EpisodeEnv("desk", desktop, AgentSignals())


CRAB_DESKTOP_HINT = (
    "apt-get install docker.io debootstrap, then as root: crabray envs build crab-desktop "
    "(Debian packages from the mirror apt uses and pyautogui's wheels from PyPI)"
)


@functools.cache
def crab_desktop_missing() -> str | None:
    """``None`` once ``crabray/crab-desktop`` is up to date with ``envs/crab-desktop``.

    The build script does nothing when the image's inputs are unchanged, so
    this costs a fraction of a second after the first build on a machine.
    """
    hint = docker_missing()
    if hint is not None:
        return hint
    try:
        build_env("crab-desktop")  # under the host-wide lock the backend's builds take
    except CrabrayError as exc:
        return f"{CRAB_DESKTOP_HINT} (the build failed: {str(exc)[-800:]})"
    return None


@pytest.fixture(scope="session")
def crab_desktop_image() -> str:
    """``crabray/crab-desktop:latest``, built if need be; skip (fail under CI) without it."""
    hint = crab_desktop_missing()
    if hint is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"crabray/crab-desktop:latest is required under CI=true: {hint}")
        pytest.skip(f"crabray/crab-desktop:latest not available: {hint}")
    return "crabray/crab-desktop:latest"
