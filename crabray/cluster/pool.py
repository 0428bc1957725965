"""Pools of environment actors, one per sandbox configuration.

After an episode its actors go back to the idle set of their configuration
and are reset by the next episode that takes them, so a sweep pays a cold
start once per concurrent slot, not once per task. A broken actor is never
returned to the idle set: it is killed and the next taker gets a new one.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

import ray

from crabray.cluster.actors import RemoteEnvironmentActor
from crabray.cluster.sandbox import SandboxSpec

logger = logging.getLogger(__name__)

_CLOSE_TIMEOUT_SEC = 60.0


class EnvironmentPool:
    """Idle environment actors by configuration, and every actor this pool made."""

    def __init__(self) -> None:
        self._idle: dict[str, list[Any]] = defaultdict(list)
        self._all: list[Any] = []
        self.created = 0
        self.reused = 0

    def acquire(self, spec: SandboxSpec) -> Any:
        """An idle actor for ``spec``, or a new one (created here, started by the job)."""
        idle = self._idle[spec.pool_key]
        if idle:
            self.reused += 1
            return idle.pop()
        self.created += 1
        actor = RemoteEnvironmentActor.remote(spec)
        self._all.append(actor)
        return actor

    def release(self, spec: SandboxSpec, actor: Any) -> None:
        """Return a healthy actor to the idle set of its configuration."""
        self._idle[spec.pool_key].append(actor)

    def discard(self, actor: Any) -> None:
        """Kill a broken actor; it is never handed out again."""
        self._all = [a for a in self._all if a is not actor]
        for idle in self._idle.values():
            if actor in idle:
                idle.remove(actor)
        ray.kill(actor, no_restart=True)

    def shutdown(self) -> None:
        """Close every sandbox and kill every actor this pool made."""
        closing = [a.close.remote() for a in self._all]
        if closing:
            done, stuck = ray.wait(closing, num_returns=len(closing), timeout=_CLOSE_TIMEOUT_SEC)
            if stuck:
                logger.warning("%d sandboxes did not close in time; killing them", len(stuck))
            for ref in done:
                try:
                    ray.get(ref)
                except Exception as exc:
                    logger.warning("closing a sandbox failed: %s", exc)
        for actor in self._all:
            ray.kill(actor, no_restart=True)
        self._all.clear()
        self._idle.clear()
