"""The docker backend (kind ``docker``): one container per environment, through the docker SDK.

This package's ``__init__`` is its whole public API; its ``_``-prefixed modules
are the implementation: the backend (``_backend``), its settings
(``_settings``), the engine connection, image builds and orphan pruning
(``_engine``), commands (``_exec``) and file transfer as tar streams
(``_archive``). Importing it needs the ``docker`` package.
"""

from __future__ import annotations

from crabray.backends.docker._backend import DockerBackend, parse_docker_settings
from crabray.backends.docker._engine import (
    build_env_image,
    connect,
    ensure_env_image,
    env_image_current,
    prune,
)
from crabray.backends.docker._settings import BindMount, DockerSettings

__all__ = [
    "BindMount",
    "DockerBackend",
    "DockerSettings",
    "build_env_image",
    "connect",
    "ensure_env_image",
    "env_image_current",
    "parse_docker_settings",
    "prune",
]
