"""The Docker engine itself: connecting with a clear error, labels, and pruning orphans.

Every container and snapshot image crabray makes carries ``crabray=1`` and an
owner label (host, pid and start time of the process that made it); pruning
removes those whose owner is dead on this host, or all of them when asked.
"""

from __future__ import annotations

import logging
import os

import docker
import requests
from docker.errors import DockerException, NotFound

from crabray.backends.ownership import owner_tag_is_dead
from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

ENGINE_ERRORS: tuple[type[Exception], ...] = (DockerException, requests.RequestException)
"""What a failing engine raises: the SDK's own errors, and the HTTP layer's for a
connection that drops or is refused (the SDK does not wrap those)."""

LABEL = "crabray"
"""Label every crabray container and snapshot image carries (value ``1``)."""
LABEL_ENV, LABEL_RUN, LABEL_OWNER = "crabray.env", "crabray.run", "crabray.owner"
LABEL_SANDBOX = "crabray.sandbox"
"""Identifies one backend instance: its container, its spare and its snapshot image."""
LABEL_SNAPSHOT = "crabray.snapshot"


_API_VERSIONS: dict[str, str] = {}
"""The API version each engine (by ``DOCKER_HOST``) answered; asking costs a round trip."""


def connect() -> docker.DockerClient:
    """A client of the engine ``DOCKER_HOST`` (or the local socket) names.

    The first client of an engine in this process asks it for its API version,
    which is where an unreachable engine fails; later clients reuse the answer,
    so their first real request is where a dead engine shows (see
    :func:`unreachable`).

    Raises:
        SandboxError: The engine is unreachable; says what to check.
    """
    where = _where()
    try:
        client = docker.from_env(version=_API_VERSIONS.get(where))
    except ENGINE_ERRORS as exc:
        raise unreachable(exc) from exc
    _API_VERSIONS[where] = client.api.api_version
    return client


def unreachable(exc: Exception) -> SandboxError:
    """The error for an engine that does not answer: what to check and what to run."""
    return SandboxError(
        f"cannot reach the Docker engine at {_where()}: {exc}. Is dockerd running "
        "(`docker info`; start it with `systemctl start docker` or `dockerd &`)? "
        "Is DOCKER_HOST right? Install it with `apt-get install docker.io`."
    )


def _where() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def prune(*, everything: bool) -> list[str]:
    """Remove crabray's containers and snapshot images whose owner died on this host.

    Args:
        everything: Remove every crabray container and snapshot image, live
            owners' included (``crabray envs prune --all``).

    Returns:
        What was removed, one description each.

    Raises:
        SandboxError: The engine is unreachable.
    """
    client = connect()
    removed: list[str] = []
    try:
        for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}):
            labels = container.labels or {}
            if not everything and not owner_tag_is_dead(labels.get(LABEL_OWNER, "")):
                continue
            try:
                container.remove(force=True, v=True)
            except NotFound:
                continue
            removed.append(f"container {container.name} (env {labels.get(LABEL_ENV, '?')})")
            logger.info(
                "removed %s container %s", "crabray" if everything else "orphaned", container.name
            )
        for image in client.images.list(filters={"label": f"{LABEL_SNAPSHOT}=1"}):
            labels = image.labels or {}
            if not everything and not owner_tag_is_dead(labels.get(LABEL_OWNER, "")):
                continue
            try:
                client.images.remove(image.id, force=True)
            except NotFound:
                continue
            removed.append(f"snapshot image {image.id[7:19]} (env {labels.get(LABEL_ENV, '?')})")
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot list or remove crabray containers: {exc}") from exc
    finally:
        client.close()
    return removed
