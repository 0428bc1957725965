"""The run's stop request: how the driver asks every running episode to end after its step.

One small async actor per run (``RunControl``). Every environment actor asks
it, once when it starts, for ``stopped()``: a call that returns only when the
driver calls ``stop()``. Its reference becoming ready is the signal: Ray sets
a local flag when it does, which the episode's watch
(``crabray.episode.watch_episode``) reads: no call per step or per episode,
one waiting call per actor. The control actor dying (its driver died) reads
as a stop too.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

_MAX_WAITERS = 100_000
"""Waiting calls the control actor holds at once: one per environment actor of the run."""
_ROLE_VAR = "CRABRAY_ROLE"
"""Set in a control actor that has a worker process of its own (``start_control``)."""


class RunControl:
    """Holds the run's stop request; ``stopped`` waits for it."""

    def __init__(self) -> None:
        self._stop = asyncio.Event()

    async def stop(self) -> None:
        """Ask every episode of the run to end after its current step."""
        self._stop.set()

    async def stopped(self) -> bool:
        """Return once ``stop`` was called."""
        await self._stop.wait()
        return True


RemoteRunControl = ray.remote(num_cpus=0, max_restarts=0)(RunControl)


def start_control(own_worker: bool = False) -> Any:
    """A new control actor for a run (it only holds a flag), on the driver's own node.

    Its death reads as a stop, so it must die with the driver and nothing else:
    placed on another node, losing that node would stop the whole run.

    Args:
        own_worker: Start a worker process of its own rather than take an idle
            one. A driver joining a running cluster finds one idle worker (the
            one its preflight task used); the control, created first, would take
            it and leave the first sandbox waiting ~0.4 s for a new process. The
            control is needed only when a stop comes, so it waits instead: a
            runtime environment of its own (one variable) makes Ray start a
            process for it. A local instance starts with a worker per core, and
            there it takes one of those.
    """
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    options: dict[str, Any] = {"max_concurrency": _MAX_WAITERS, "scheduling_strategy": here}
    if own_worker:
        options["runtime_env"] = {"env_vars": {_ROLE_VAR: "run-control"}}
    return RemoteRunControl.options(**options).remote()


class StopWatch:
    """An environment actor's view of the run's stop request.

    The waiting call's reference sets a flag when it completes, with the stop
    or with the control actor's death; reading the flag costs nothing, where
    asking Ray (``ray.wait``) at every check cost each episode two calls into
    Ray's core worker.
    """

    def __init__(self, control: Any | None) -> None:
        self._stopped = threading.Event()
        self._ref = None if control is None else control.stopped.remote()
        if self._ref is not None:
            self._ref.future().add_done_callback(lambda _: self._stopped.set())

    def requested(self) -> bool:
        """Whether the driver asked to stop (or is gone). Never blocks."""
        return self._stopped.is_set()
