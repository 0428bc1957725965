"""Environment actors: each holds one sandbox, on the node that hosts it.

Only a ``SandboxSpec`` crosses to the actor (backend kind, settings, name):
never suite objects, whose functions live in modules a worker cannot import
by name. ``ActorBackend`` is the ``Backend`` an episode sees for a sandbox
behind an actor: every call is a remote call, and a dead actor becomes a
``SandboxError`` (an infrastructure failure, retried).
"""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import ray
from pydantic import BaseModel, Field
from ray.exceptions import GetTimeoutError, RayActorError, RaySystemError, WorkerCrashedError

from crabray.backends import create_backend
from crabray.backends.base import Backend, ExecResult
from crabray.core import EnvironmentConfig
from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

_INFRA_ERRORS = (RayActorError, WorkerCrashedError, RaySystemError, GetTimeoutError)


class SandboxSpec(BaseModel):
    """What an environment actor needs to make its sandbox."""

    name: str
    backend: str
    backend_settings: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, env: EnvironmentConfig) -> SandboxSpec:
        return cls(name=env.name, backend=env.backend, backend_settings=env.backend_settings)

    @property
    def pool_key(self) -> str:
        """Sandboxes with the same key are interchangeable after a reset."""
        return json.dumps(self.model_dump(), sort_keys=True, default=str)


class EnvironmentActor:
    """Ray actor class holding one sandbox; its methods are the backend interface."""

    def __init__(self, spec: SandboxSpec) -> None:
        config = EnvironmentConfig(
            name=spec.name, backend=spec.backend, backend_settings=spec.backend_settings
        )
        self.backend: Backend = create_backend(config)
        self.started = False

    def prepare(self) -> None:
        """Make the sandbox clean for a new episode: start it if new, reset it if used."""
        if self.started:
            self.backend.reset()
        else:
            self.backend.start()
            self.started = True

    def exec(self, command: str | list[str], kwargs: dict[str, Any]) -> ExecResult:
        return self.backend.exec(command, **kwargs)

    def put_file(self, path: str, data: bytes) -> None:
        self.backend.put_file(path, data)

    def get_file(self, path: str) -> bytes:
        return self.backend.get_file(path)

    def screenshot(self) -> bytes:
        return self.backend.screenshot()

    def close(self) -> None:
        self.backend.close()
        self.started = False

    def describe(self) -> dict[str, Any]:
        return {**self.backend.describe(), "host": socket.gethostname()}


RemoteEnvironmentActor = ray.remote(num_cpus=0, max_restarts=0)(EnvironmentActor)


class ActorBackend(Backend):
    """The backend interface, forwarded to an ``EnvironmentActor``.

    Args:
        config: The environment the actor serves.
        actor: The actor's handle.
        kind: The backend kind behind the actor (for messages).
    """

    def __init__(self, config: EnvironmentConfig, actor: Any) -> None:
        super().__init__(config)
        self.actor = actor
        self.kind = config.backend  # type: ignore[misc]

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return ray.get(getattr(self.actor, method).remote(*args))
        except _INFRA_ERRORS as exc:
            raise SandboxError(
                f"the environment actor of '{self.config.name}' is gone ({type(exc).__name__}): "
                f"{exc}"
            ) from exc

    def start(self) -> None:
        self._call("prepare")

    def reset(self) -> None:
        self._call("prepare")

    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        return self._call("exec", command, {"timeout_sec": timeout_sec, "cwd": cwd, "env": env})

    def put_file(self, path: str, data: bytes) -> None:
        self._call("put_file", path, data)

    def get_file(self, path: str) -> bytes:
        return self._call("get_file", path)

    def screenshot(self) -> bytes:
        return self._call("screenshot")

    def close(self) -> None:
        self._call("close")
