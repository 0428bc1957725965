"""Environment actors: each holds one sandbox, on the node that hosts it.

An episode runs as a task of the actor holding its first environment
(``run_episode``): that sandbox is used in-process, on the node that hosts
it, and the task's other environments are reached through their own actors.
A pooled actor serves one episode at a time. Unpooled, an actor still serves
episode after episode, each in a new sandbox (``renew``): a Ray actor is a
process, and a process start per episode is what made unpooled sweeps slow.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

import ray

from crabray.backends import create_backend
from crabray.backends.base import RUN_ID_VAR, Backend, ExecResult, Frozen, PythonCall
from crabray.cluster.actors.control import StopWatch
from crabray.cluster.actors.episode_call import EpisodeCall, execute, node_name, pack, unpack
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)


class EnvironmentActor:
    """Ray actor class holding one sandbox; its methods are the backend interface.

    Args:
        spec: The sandbox to make.
        run_id: The run it serves, set as ``$CRABRAY_RUN_ID`` in this process so that
            what the backend makes is labelled with it. Passed here rather than as a
            Ray runtime environment: an actor with its own runtime environment needs
            a new worker process, where one without takes a worker Ray started ahead.
        control: The run's ``RunControl`` actor (``crabray.cluster.actors.control``): its stop
            request ends the episodes this actor runs after their current step.
    """

    def __init__(
        self, spec: SandboxSpec, run_id: str | None = None, control: Any | None = None
    ) -> None:
        if run_id is not None:
            os.environ[RUN_ID_VAR] = run_id
        self.stop = StopWatch(control)
        self.spec = spec
        self.backend: Backend = create_backend(spec.config())
        self.dirty = False
        self.broken: str | None = None
        self.ahead_sec = 0.0
        """Seconds of start or reset done ahead of the next episode (warm-up, recycle)."""

    def warm(self) -> None:
        """Start the sandbox ahead of demand, so the first episode finds it ready."""
        if not self.backend.started:
            t0 = time.monotonic()
            self.backend.start()
            self.ahead_sec += time.monotonic() - t0

    def recycle(self) -> None:
        """Reset a used sandbox right after its episode, while it waits in the pool.

        Raises:
            SandboxError: The reset failed; the actor is marked broken.
        """
        if self.broken is not None:
            raise SandboxError(f"the '{self.spec.name}' sandbox is broken ({self.broken})")
        if not self.dirty:
            return
        t0 = time.monotonic()
        try:
            self.backend.reset()
        except Exception as exc:
            self.broken = f"reset failed: {exc}"
            raise
        self.ahead_sec += time.monotonic() - t0
        self.dirty = False

    def renew(self) -> None:
        """Replace a used sandbox by a new one, started ahead of the next episode (unpooled).

        The old sandbox is closed, never reset: an unpooled episode always gets a
        sandbox no episode used before, in this same (warm) process.

        Raises:
            SandboxError: The old sandbox did not close or the new one did not start;
                the actor is marked broken.
        """
        t0 = time.monotonic()
        try:
            self.backend.close()
            self.backend = create_backend(self.spec.config())
            self.backend.start()
        except Exception as exc:
            self.broken = f"renewing the sandbox failed: {exc}"
            raise
        self.dirty = False
        self.ahead_sec += time.monotonic() - t0

    def prepare(self) -> float:
        """Make the sandbox clean for a new episode: start it if new, reset it if used.

        Returns:
            Seconds of start or reset done for this episode ahead of the call
            (warm-up, recycle in the pool): the episode's setup time counts
            them, as a VM's boot or revert belongs to the task it serves.

        A used sandbox is reset here when no ``recycle`` came before this episode
        (an episode queued behind another with its reset in its own call,
        ``crabray.cluster.actors.pipeline``); a failed reset marks the actor broken, as
        ``recycle`` does.

        Raises:
            SandboxError: The sandbox is broken or could not be made clean.
        """
        if self.broken is not None:
            raise SandboxError(f"the '{self.spec.name}' sandbox is broken ({self.broken})")
        ahead, self.ahead_sec = self.ahead_sec, 0.0
        if not self.backend.started:
            self.backend.start()
        elif self.dirty:
            self._reset_for_episode()
        self.dirty = True
        return ahead

    def _reset_for_episode(self) -> None:
        try:
            self.backend.reset()
        except Exception as exc:
            self.broken = f"reset failed: {exc}"
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"resetting the '{self.spec.name}' sandbox failed: {exc}") from exc

    def exec(self, command: str | list[str], kwargs: dict[str, Any]) -> ExecResult:
        return self.backend.exec(command, **kwargs)

    def call_python(self, call: PythonCall) -> Any:
        return self.backend.call_python(call)

    def check_python(self) -> str:
        return self.backend.check_python()

    def agent_begins(self) -> None:
        self.backend.agent_begins()

    def grader_distrust(self, ran_commands: bool) -> str | None:
        return self.backend.grader_distrust(ran_commands=ran_commands)

    def freeze_agent(self) -> Frozen:
        return self.backend.freeze_agent()

    def agent_ends(self) -> None:
        self.backend.agent_ends()

    def probe_health(self) -> str | None:
        return self.backend.probe_health()

    def thaw_agent(self) -> None:
        self.backend.thaw_agent()

    def grader_replaced(self) -> bool:
        return self.backend.grader_replaced()

    def put_file(self, path: str, data: bytes) -> None:
        self.backend.put_file(path, data)

    def get_file(self, path: str, max_bytes: int | None = None) -> bytes:
        return self.backend.get_file(path, max_bytes=max_bytes)

    def screenshot(self) -> bytes:
        return self.backend.screenshot()

    def close(self) -> None:
        self.backend.close()

    def node(self) -> str:
        """The node this actor lives on, asked once at creation: rows name it if the node dies."""
        return node_name()

    def describe(self) -> dict[str, Any]:
        return {**self.backend.describe(), "host": socket.gethostname()}

    def run_episode(self, call: bytes, others: dict[str, Any]) -> bytes:
        """Run an episode whose first environment is this actor's sandbox.

        Args:
            call: The episode to run, an ``EpisodeCall`` as ``episode_call.pack`` made it; the
                ``CallOutcome`` comes back packed the same way.
            others: Actor handles of the task's other environments, by name.

        A sandbox the episode left broken (an infrastructure failure) is marked so:
        the reset and the episode the driver may have queued behind this one
        (``crabray.cluster.actors.pipeline``) then refuse it instead of using it, and
        that episode's outcome says it never ran (``CallOutcome.unprepared``).
        """
        outcome = execute(unpack(call, EpisodeCall), self, others)
        if self.spec.name in outcome.broken_envs and self.broken is None:
            self.broken = f"its episode failed: {outcome.record.result.error}"
        return pack(outcome)


RemoteEnvironmentActor = ray.remote(num_cpus=0, max_restarts=0)(EnvironmentActor)
