"""The episode job: one episode, run by the actor that holds its first environment.

The driver sends an ``EpisodeJob`` (a suite reference, never suite objects)
with the handles of the task's other environment actors. The job loads the
suite in its worker (cached), prepares each sandbox (start if new, reset if
used; counted in setup time, with resets the pool did ahead of the episode),
runs the episode in-process and returns the record with the sandboxes that
must not be reused.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

import ray
from pydantic import BaseModel, Field

from crabray.agents import AgentSpec, create_agent
from crabray.backends.base import Backend
from crabray.cluster.sandbox import ActorBackend, SandboxSpec
from crabray.core.errors import SandboxConfigError, SandboxError
from crabray.core.result import EpisodeRecord, EpisodeResult, TerminationReason, utcnow
from crabray.episode import EpisodeSettings, run_episode
from crabray.formats import SuiteRef, load_suite

logger = logging.getLogger(__name__)


class EpisodeJob(BaseModel):
    """Everything an episode job needs besides its actors."""

    suite: SuiteRef
    task_id: str
    agent: AgentSpec
    settings: EpisodeSettings


class JobOutcome(BaseModel):
    """The episode's record, and which sandboxes must not be reused."""

    record: EpisodeRecord
    broken_envs: list[str] = Field(default_factory=list)


class Host(Protocol):
    """The environment actor running the job: its sandbox is used in-process."""

    spec: SandboxSpec
    backend: Backend

    def prepare(self) -> float: ...


def failed_result(job: EpisodeJob, tags: list[str], error: BaseException) -> EpisodeResult:
    """The result of an episode whose sandbox could not be made: ``setup_error`` when its
    configuration is wrong (``SandboxConfigError``, never retried), else ``env_error``
    (the infrastructure failed around it; retried)."""
    settings = job.settings
    return EpisodeResult(
        run_id=settings.run_id,
        suite=settings.suite,
        task_id=job.task_id,
        tags=tags,
        agent=settings.agent,
        model=settings.model,
        epoch=settings.epoch,
        attempt=settings.attempt,
        termination_reason=(
            TerminationReason.SETUP_ERROR
            if isinstance(error, SandboxConfigError)
            else TerminationReason.ENV_ERROR
        ),
        node=settings.node,
        error=str(error),
        error_type=type(error).__name__,
        finished_at=utcnow(),
    )


def execute(job: EpisodeJob, host: Host, others: dict[str, Any]) -> JobOutcome:
    """Run ``job`` with ``host``'s sandbox in-process and ``others`` through their actors."""
    entry = load_suite(job.suite).entry(job.task_id)
    configs = entry.benchmark.task_environments(entry.task)
    remote = {c.name: ActorBackend(c, others[c.name]) for c in configs if c.name in others}
    backends: dict[str, Backend] = {host.spec.name: host.backend, **remote}
    settings = job.settings.model_copy(update={"node": _node_name()})
    t0 = time.monotonic()
    try:
        spent = [host.prepare(), *(backend.prepare() for backend in remote.values())]
    except SandboxError as exc:
        failed = job.model_copy(update={"settings": settings})
        record = EpisodeRecord(result=failed_result(failed, list(entry.task.tags), exc))
        return JobOutcome(record=record, broken_envs=list(backends))
    prepare_sec = time.monotonic() - t0
    record = run_episode(entry.benchmark, entry.task, create_agent(job.agent), backends, settings)
    # Starts and resets done ahead (pool warm-up, recycle) count in setup time,
    # not in the episode's wall time, which they did not delay.
    record.result.setup_time_sec += prepare_sec + sum(spent)
    record.result.wall_time_sec += prepare_sec
    broken = list(backends) if record.result.termination_reason.is_infra else []
    return JobOutcome(record=record, broken_envs=broken)


def _node_name() -> str:
    context = ray.get_runtime_context()
    return f"{ray.util.get_node_ip_address()}/{context.get_node_id()[:8]}"
