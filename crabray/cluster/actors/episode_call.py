"""The episode call: one episode, run by the actor that holds its first environment.

The driver sends an ``EpisodeCall`` (a suite reference, never suite objects)
with the handles of the task's other environment actors. The call loads the
suite in its worker (cached), prepares each sandbox (start if new, reset if
used; counted in setup time, with resets the pool did ahead of the episode),
runs the episode in-process and returns the record with the sandboxes that
must not be reused.
"""

from __future__ import annotations

import logging
import pickle
import time
from datetime import datetime
from typing import Any, Protocol, TypeVar

import ray
from pydantic import BaseModel, Field

from crabray.agents import AgentSpec, create_agent
from crabray.backends import backend_class
from crabray.backends.base import Backend
from crabray.cluster.actors.sandbox import ActorBackend, SandboxSpec
from crabray.cluster.runtime.ray_runtime import remote_cause
from crabray.core.errors import SandboxError
from crabray.core.result import (
    EpisodeRecord,
    EpisodeResult,
    TerminationReason,
    sandbox_failure_reason,
    utcnow,
)
from crabray.core.task import Task
from crabray.episode import EpisodeCancelled, EpisodeSettings, watch_episode
from crabray.formats import SuiteRef, load_suite

logger = logging.getLogger(__name__)


class EpisodeCall(BaseModel):
    """Everything an episode call needs besides its actors."""

    suite: SuiteRef
    task_id: str
    agent: AgentSpec
    settings: EpisodeSettings


class CallOutcome(BaseModel):
    """The episode's record, and which sandboxes must not be reused."""

    record: EpisodeRecord
    broken_envs: list[str] = Field(default_factory=list)
    unprepared: bool = False
    """Its sandboxes could not be made clean (start or reset failed, or one was broken):
    the episode itself never ran. For an episode queued behind another on its actor,
    the driver then retires the actor and queues the episode again, same attempt."""


_Packed = TypeVar("_Packed", EpisodeCall, CallOutcome)


def pack(value: EpisodeCall | CallOutcome) -> bytes:
    """``value`` pickled, as the episode's actor call sends and returns it.

    Ray passes bytes through as they are, but serializes any other object
    (these models) through its generic pickle path, which cost the driver about
    100 µs per model per call here, twice per episode; plain ``pickle`` of these
    models takes 10 to 20 µs.
    """
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(data: bytes, kind: type[_Packed]) -> _Packed:
    """The model ``pack`` made of ``data`` (between the driver and its own actors only).

    Raises:
        TypeError: ``data`` holds something other than a ``kind``.
    """
    value = pickle.loads(data)
    if not isinstance(value, kind):
        raise TypeError(f"expected a packed {kind.__name__}, got {type(value).__name__}")
    return value


class StopRequest(Protocol):
    """The run's request that its episodes stop (``crabray.cluster.actors.control.StopWatch``)."""

    def requested(self) -> bool: ...


class Host(Protocol):
    """The environment actor running the call: its sandbox is used in-process."""

    spec: SandboxSpec
    backend: Backend

    @property
    def stop(self) -> StopRequest: ...

    def prepare(self) -> float: ...


def failed_result(
    call: EpisodeCall,
    task: Task,
    error: BaseException,
    started_at: datetime | None = None,
) -> EpisodeResult:
    """The result of an episode whose sandbox could not be made or whose call died.

    As :func:`~crabray.core.result.sandbox_failure_reason` says: ``setup_error`` when
    its configuration is wrong (``SandboxConfigError``, never retried), ``sandbox_error``
    when it broke of what was done inside it, else ``env_error`` (the infrastructure
    failed around it; retried).

    Args:
        call: The episode (its settings' ``node`` is where it ran, when known).
        task: The task: its tags and instruction are recorded, so the row of an episode
            that never started still says what it was asked to do.
        error: What failed.
        started_at: When the episode was dispatched; now when unknown. It never
            comes after ``finished_at``.
    """
    settings = call.settings
    now = utcnow()
    return EpisodeResult(
        run_id=settings.run_id,
        suite=settings.suite,
        task_id=call.task_id,
        tags=list(task.tags),
        description=task.description,
        agent=settings.agent,
        model=settings.model,
        epoch=settings.epoch,
        attempt=settings.attempt,
        termination_reason=sandbox_failure_reason(error),
        node=settings.node,
        error=str(error),
        error_type=type(error).__name__,
        started_at=min(started_at or now, now),
        finished_at=now,
    )


def killed_by_its_sandbox(error: BaseException) -> bool:
    """Whether ``error`` says the episode's worker died on a node that is still alive.

    Ray's only public signal is the actor's death cause, in the error's text:
    the node's raylet reports "its worker process has died" with exit type
    ``SYSTEM_ERROR`` when the worker process ended unexpectedly (a signal such
    as SIGKILL from a command in the sandbox or from the kernel's OOM killer, a
    crash), which it can report only while the node lives. A node that died
    says "its node has died"; an actor we killed (``ray.kill``, time limits)
    says it was killed intentionally; Ray's own memory monitor, which may pick
    another episode's worker under pressure, names memory pressure. Those stay
    infrastructure failures.
    """
    if not isinstance(error, ray.exceptions.ActorDiedError):
        return False
    text = str(error)
    return (
        "worker process has died" in text
        and "exit type: SYSTEM_ERROR" in text
        and "memory pressure" not in text.lower()
    )


def sandbox_result(call: EpisodeCall, task: Task, error: BaseException) -> EpisodeResult:
    """A final ``sandbox_error`` result: the episode's own sandbox killed its worker."""
    result = failed_result(call, task, error)
    result.termination_reason = TerminationReason.SANDBOX_ERROR
    result.error = (
        "the worker running this episode died while its node lived: something the episode's "
        f"sandbox did killed it (a command, or the memory it used). Ray said: {error}"
    )
    return result


def reaches_its_worker(spec: SandboxSpec) -> bool:
    """Whether what runs in the sandbox can signal the worker process running its episode.

    Its backend says (``Backend.reaches_worker``): only an unconfined local sandbox
    (``isolation: none``) runs as the host's user in the host's process namespace.
    A confined one and every other shipped backend (a container, a remote host, a
    VM) cannot see the worker, so a worker of theirs that dies was killed from outside.
    """
    return backend_class(spec.backend).reaches_worker(spec.backend_settings)


def died_result(
    call: EpisodeCall,
    task: Task,
    error: BaseException,
    cancelled: bool,
    started_at: datetime,
    reachable: bool = False,
) -> EpisodeResult:
    """The result of an episode call that raised or died instead of returning its outcome.

    A timeout when the driver cancelled it (past its time limit); a final
    ``sandbox_error`` (the agent's) when its worker died on a live node and one
    of its sandboxes could have killed it (``reachable``: see
    :func:`reaches_its_worker`); else an infrastructure failure (``env_error``,
    retried): a worker of a confined sandbox that dies was killed from outside
    it (by hand, by the host's OOM killer, by a crash).
    """
    if not cancelled and reachable and killed_by_its_sandbox(error):
        logger.warning("episode %s killed its own worker: %s", call.task_id, error)
        return sandbox_result(call, task, error)
    result = failed_result(call, task, remote_cause(error), started_at=started_at)
    if cancelled:
        result.termination_reason = TerminationReason.TIMEOUT
        result.error = (
            f"still running past its time limit; cancelled and its environments "
            f"killed ({type(error).__name__})"
        )
    else:
        logger.warning("episode call for %s died: %s", call.task_id, error)
        if killed_by_its_sandbox(error):
            result.error = (
                "the worker running this episode died while its node lived, and its "
                "confined sandbox cannot reach it: killed from outside (by hand, by the "
                f"host's OOM killer, a crash); retried. Ray said: {error}"
            )
    return result


def execute(call: EpisodeCall, host: Host, others: dict[str, Any]) -> CallOutcome:
    """Run ``call`` with ``host``'s sandbox in-process and ``others`` through their actors."""
    entry = load_suite(call.suite).entry(call.task_id)
    configs = entry.benchmark.task_environments(entry.task)
    remote = {c.name: ActorBackend(c, others[c.name]) for c in configs if c.name in others}
    backends: dict[str, Backend] = {host.spec.name: host.backend, **remote}
    settings = call.settings.model_copy(update={"node": node_name()})
    if host.stop.requested():  # queued behind an episode when the run was interrupted
        stopped = call.model_copy(update={"settings": settings})
        result = failed_result(stopped, entry.task, EpisodeCancelled("not started"))
        result.termination_reason = TerminationReason.CANCELLED
        result.error = "the run was interrupted before the episode started"
        return CallOutcome(record=EpisodeRecord(result=result), unprepared=True)
    t0 = time.monotonic()
    try:
        spent = [host.prepare(), *(backend.prepare() for backend in remote.values())]
    except SandboxError as exc:
        failed = call.model_copy(update={"settings": settings})
        record = EpisodeRecord(result=failed_result(failed, entry.task, exc))
        return CallOutcome(record=record, broken_envs=list(backends), unprepared=True)
    prepare_sec = time.monotonic() - t0
    agent = create_agent(call.agent)
    watched = watch_episode(
        entry.benchmark, entry.task, agent, backends, settings, host.stop.requested
    )
    record = watched.record
    # Starts and resets done ahead (pool warm-up, recycle) count in setup time,
    # not in the episode's wall time, which they did not delay.
    record.result.setup_time_sec += prepare_sec + sum(spent)
    record.result.wall_time_sec += prepare_sec
    # A sandbox the agent broke is not reused either: its actor gets a fresh one; a step
    # still running holds the sandboxes: they go with their actors.
    reason = record.result.termination_reason
    broken = watched.stuck or reason.is_infra or reason is TerminationReason.SANDBOX_ERROR
    return CallOutcome(record=record, broken_envs=list(backends) if broken else [])


def node_name() -> str:
    """This worker's node as rows name it: ``<ip>/<node id prefix>``."""
    context = ray.get_runtime_context()
    return f"{ray.util.get_node_ip_address()}/{context.get_node_id()[:8]}"
