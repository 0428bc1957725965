"""The Docker engine and the busybox image the docker backend's tests run against.

No registry is reachable where these tests run: the image ``crabray/busybox``
is built from Debian's ``busybox-static`` by ``envs/busybox/build.sh`` the
first time a test needs it (once per session).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crabray.backends import Backend, create_backend
from crabray.backends.episode_env import EpisodeEnv
from crabray.core.env import AgentSignals
from crabray.core.environment import EnvironmentConfig

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[3]
BUSYBOX_IMAGE = "crabray/busybox:latest"
BUILD_SCRIPT = ROOT / "envs" / "busybox" / "build.sh"
INSTALL_HINT = "apt-get install docker.io busybox-static and start dockerd (`dockerd &`)"


@functools.cache
def docker_missing() -> str | None:
    """``None`` when the engine answers and the busybox image exists (built if need be).

    Otherwise what to install or start. Cached: the answer holds for the session.
    """
    try:
        import docker
    except ImportError:
        return "pip install 'crabray[docker]'"
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        return f"{INSTALL_HINT} (the engine did not answer: {exc})"
    try:
        try:
            client.images.get(BUSYBOX_IMAGE)
            return None
        except docker.errors.ImageNotFound:
            pass
        if not Path("/bin/busybox").exists() or shutil.which("docker") is None:
            return INSTALL_HINT
        done = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            return f"{INSTALL_HINT} ({BUILD_SCRIPT} failed: {done.stderr.strip()[-500:]})"
        return None
    finally:
        client.close()


def require_docker() -> None:
    """Skip the calling test (fail it under ``CI=true``) when Docker is not usable."""
    import os

    hint = docker_missing()
    if hint is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Docker is required under CI=true: {hint}")
    pytest.skip(f"Docker not usable here: {hint}")


def docker_settings(_tmp_path: Path) -> dict[str, Any]:
    """Default settings of a contract-test container."""
    return {"image": BUSYBOX_IMAGE}


def docker_leftovers(described: dict[str, Any], _pids: list[int]) -> list[str]:
    """Containers or a snapshot image of the closed sandbox that still exist.

    Processes die with their container, so the pids need no check of their own.
    """
    import docker

    client = docker.from_env()
    try:
        found = [
            f"container {c.name} still exists"
            for c in client.containers.list(
                all=True, filters={"label": f"crabray.sandbox={described['sandbox']}"}
            )
        ]
        if described.get("snapshot"):
            try:
                client.images.get(described["snapshot"])
                found.append(f"snapshot image {described['snapshot']} still exists")
            except docker.errors.ImageNotFound:
                pass
        return found
    finally:
        client.close()


ENV_IMAGE_HINT = (
    "apt-get install debootstrap docker.io, then as root: crabray envs build {name} "
    "(builds crabray/debian with debootstrap from the Debian mirror first)"
)


@functools.cache
def env_image_missing(name: str) -> str | None:
    """``None`` when ``crabray/NAME:latest`` exists, built from ``envs/NAME`` if need be.

    Images deriving from ``crabray/debian`` need root and ``debootstrap`` the
    first time (a few minutes: the packages come from the Debian mirror).
    Otherwise what to install or run. Cached: the answer holds for the session.
    """
    hint = docker_missing()
    if hint is not None:
        return hint
    import os

    import docker

    from crabray.backends.docker import ensure_env_image, env_image_current

    client = docker.from_env()
    try:
        if env_image_current(client, name):
            return None
        if shutil.which("debootstrap") is None or os.geteuid() != 0:
            return ENV_IMAGE_HINT.format(name=name)
        from crabray.core.errors import CrabrayError

        try:
            # As the backend does on first use: built, or rebuilt when envs/NAME changed,
            # under the same host-wide lock.
            ensure_env_image(name, client)
        except CrabrayError as exc:
            return f"{ENV_IMAGE_HINT.format(name=name)} (the build failed: {str(exc)[-800:]})"
        return None
    finally:
        client.close()


def require_env_image(name: str) -> None:
    """Skip the calling test (fail it under ``CI=true``) without ``crabray/NAME:latest``."""
    import os

    hint = env_image_missing(name)
    if hint is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"crabray/{name}:latest is required under CI=true: {hint}")
    pytest.skip(f"crabray/{name}:latest not available: {hint}")


def desktop_backend(name: str, build: str, screen: str, **settings: Any) -> Backend:
    """An unstarted docker sandbox of desktop image ``build`` (an env under ``envs/``).

    Args:
        name: The environment's name.
        build: The env whose image it runs (``desktop``, ``crab-desktop``).
        screen: The Xvfb screen, ``WIDTHxHEIGHTxDEPTH``.
        settings: More backend settings; they override these.
    """
    config = EnvironmentConfig(
        name=name,
        backend="docker",
        backend_settings={
            "build": build,
            "env": {"CRABRAY_SCREEN": screen},
            "warm_spare": False,
            **settings,
        },
    )
    return create_backend(config)


@contextlib.contextmanager
def started(backend: Backend) -> Iterator[EpisodeEnv]:
    """``backend`` started, as actions receive it (``env``); closed afterwards."""
    backend.start()
    try:
        yield EpisodeEnv(backend.config.name, backend, AgentSignals())
    finally:
        backend.close()
