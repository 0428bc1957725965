"""How an episode reaches a sandbox held by another environment actor.

``SandboxSpec`` is all an actor needs to make its sandbox (never suite
objects). ``ActorBackend`` is the ``Backend`` an episode sees for a sandbox
behind an actor: every call is a remote call, and a dead actor becomes a
``SandboxError`` (an infrastructure failure, retried).
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

import ray
from pydantic import BaseModel, Field
from ray.exceptions import GetTimeoutError, RayActorError, RaySystemError, WorkerCrashedError

from crabray.backends.base import Backend, ExecResult, Frozen, PythonCall
from crabray.core import EnvironmentConfig
from crabray.core.errors import SandboxError

_INFRA_ERRORS = (RayActorError, WorkerCrashedError, RaySystemError, GetTimeoutError)


class SandboxSpec(BaseModel):
    """What an environment actor needs to make its sandbox."""

    name: str
    backend: str
    backend_settings: dict[str, Any] = Field(default_factory=dict)
    host_kind: str | None = None
    label_selector: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(cls, env: EnvironmentConfig) -> SandboxSpec:
        return cls(
            name=env.name,
            backend=env.backend,
            backend_settings=env.backend_settings,
            host_kind=env.host_kind,
            label_selector=env.label_selector,
        )

    @property
    def kind(self) -> str:
        """The host kind whose slot the sandbox occupies."""
        return self.host_kind or self.backend

    @cached_property
    def pool_key(self) -> str:
        """Sandboxes with the same key are interchangeable after a reset.

        Computed once: the scheduler asks for it several times per episode, and a
        spec is never changed after it is made.
        """
        return json.dumps(self.model_dump(), sort_keys=True, default=str)

    def config(self) -> EnvironmentConfig:
        """An environment config carrying just the sandbox part (no actions)."""
        return EnvironmentConfig(
            name=self.name, backend=self.backend, backend_settings=self.backend_settings
        )


class ActorBackend(Backend):
    """The backend interface, forwarded to an environment actor.

    The sandbox's own lifecycle runs in the actor's backend; the states kept
    here (:class:`Backend`'s) are this handle's: its ``start`` and ``reset``
    both ask the actor to prepare the sandbox, and its ``close`` closes it.

    Args:
        config: The environment the actor serves.
        actor: The actor's handle.
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

    def _start(self) -> None:
        self.prepare()

    def _reset(self) -> None:
        self.prepare()

    def prepare(self) -> float:
        """Start or reset the actor's sandbox; returns the seconds of that done ahead (pool)."""
        seconds: float = self._call("prepare")
        return seconds

    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        result: ExecResult = self._call(
            "exec", command, {"timeout_sec": timeout_sec, "cwd": cwd, "env": env}
        )
        return result

    def call_python(self, call: PythonCall) -> Any:
        return self._call("call_python", call)

    def check_python(self) -> str:
        version: str = self._call("check_python")
        return version

    def agent_begins(self) -> None:
        self._call("agent_begins")

    def grader_distrust(self, *, ran_commands: bool) -> str | None:
        reason: str | None = self._call("grader_distrust", ran_commands)
        return reason

    def freeze_agent(self) -> Frozen:
        frozen: Frozen = self._call("freeze_agent")
        return frozen

    def thaw_agent(self) -> None:
        self._call("thaw_agent")

    def agent_ends(self) -> None:
        self._call("agent_ends")

    def probe_health(self) -> str | None:
        try:
            reason: str | None = self._call("probe_health")
        except SandboxError as exc:
            return str(exc)
        return reason

    def grader_replaced(self) -> bool:
        replaced: bool = self._call("grader_replaced")
        return replaced

    def put_file(self, path: str, data: bytes) -> None:
        self._call("put_file", path, data)

    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        data: bytes = self._call("get_file", path, max_bytes)
        return data

    def screenshot(self) -> bytes:
        png: bytes = self._call("screenshot")
        return png

    def _close(self) -> None:
        self._call("close")
