"""The driver's scheduler: episodes in flight, results as they finish, retries.

It keeps at most ``concurrency`` episode jobs in flight, collects them with
``ray.wait`` in completion order (never submission order), hands every batch
of finished records to ``on_records`` (which puts them on disk) before
counting them done, and retries an episode whose infrastructure failed as a
new attempt, up to ``max_attempts``. Agent failures are results, never retried.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import ray
from pydantic import BaseModel, Field

from crabray.agents import AgentSpec
from crabray.cluster.actors import SandboxSpec
from crabray.cluster.jobs import EpisodeJob, JobOutcome, episode_job, failed_result
from crabray.cluster.pool import EnvironmentPool
from crabray.core.result import EpisodeRecord
from crabray.episode import EpisodeSettings
from crabray.formats import Suite

logger = logging.getLogger(__name__)


class SweepItem(BaseModel):
    """One episode to run: an agent, a task, a repetition, an attempt."""

    task_id: str
    agent: AgentSpec
    epoch: int = 0
    attempt: int = 0


class SchedulerSettings(BaseModel):
    """Knobs of the scheduler."""

    run_id: str
    concurrency: int = Field(default=2, gt=0, description="Episodes in flight at most.")
    max_attempts: int = Field(default=3, gt=0, description="Tries per episode on infra failure.")
    max_steps: int | None = Field(default=None, description="Overrides every task's step budget.")


@dataclass
class SweepProgress:
    """Counts the driver shows while a sweep runs."""

    total: int
    done: int = 0
    successes: int = 0
    retries: int = 0
    infra_failures: int = 0


@dataclass
class _InFlight:
    item: SweepItem
    actors: dict[str, tuple[SandboxSpec, Any]] = field(default_factory=dict)


RecordsCallback = Callable[[list[EpisodeRecord]], None]
ProgressCallback = Callable[[SweepProgress], None]


class Scheduler:
    """Runs sweep items as Ray episode jobs with pooled environment actors.

    Args:
        suite: The loaded suite (the driver's copy, for environments and tags).
        settings: Concurrency and retry limits.
        on_records: Persists a batch of finished records; called before they count as done.
        on_progress: Told after every batch.
    """

    def __init__(
        self,
        suite: Suite,
        settings: SchedulerSettings,
        on_records: RecordsCallback,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        self.suite = suite
        self.settings = settings
        self.on_records = on_records
        self.on_progress = on_progress or (lambda _: None)
        self.pool = EnvironmentPool()

    def run(self, items: Iterable[SweepItem]) -> SweepProgress:
        """Run every item to a final result; return the final counts."""
        queue = deque(items)
        progress = SweepProgress(total=len(queue))
        in_flight: dict[Any, _InFlight] = {}
        try:
            while queue or in_flight:
                while queue and len(in_flight) < self.settings.concurrency:
                    item = queue.popleft()
                    ref, flight = self._submit(item)
                    in_flight[ref] = flight
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
                self._collect([(ref, in_flight.pop(ref)) for ref in ready], queue, progress)
        finally:
            for ref in in_flight:
                ray.cancel(ref, force=True)
            self.pool.shutdown()
        return progress

    def _submit(self, item: SweepItem) -> tuple[Any, _InFlight]:
        entry = self.suite.entry(item.task_id)
        flight = _InFlight(item)
        for env in entry.benchmark.task_environments(entry.task):
            spec = SandboxSpec.of(env)
            flight.actors[env.name] = (spec, self.pool.acquire(spec))
        job = self._job(item)
        handles = {name: actor for name, (_, actor) in flight.actors.items()}
        return episode_job.remote(job, handles), flight

    def _job(self, item: SweepItem) -> EpisodeJob:
        entry = self.suite.entry(item.task_id)
        settings = EpisodeSettings(
            run_id=self.settings.run_id,
            suite=entry.benchmark.name,
            agent=item.agent.name,
            model=item.agent.model,
            epoch=item.epoch,
            attempt=item.attempt,
            max_steps=self.settings.max_steps,
        )
        return EpisodeJob(
            suite=self.suite.ref, task_id=item.task_id, agent=item.agent, settings=settings
        )

    def _collect(
        self,
        finished: list[tuple[Any, _InFlight]],
        queue: deque[SweepItem],
        progress: SweepProgress,
    ) -> None:
        records = [self._outcome(ref, flight) for ref, flight in finished]
        self.on_records(records)
        for record, (_, flight) in zip(records, finished, strict=True):
            result = record.result
            if result.termination_reason.is_infra:
                progress.infra_failures += 1
                if flight.item.attempt + 1 < self.settings.max_attempts:
                    progress.retries += 1
                    queue.append(
                        flight.item.model_copy(update={"attempt": flight.item.attempt + 1})
                    )
                    logger.info(
                        "retrying %s (%s) after infrastructure failure: %s",
                        result.task_id,
                        result.agent,
                        result.error,
                    )
                    continue
            progress.done += 1
            progress.successes += int(result.success)
        self.on_progress(progress)

    def _outcome(self, ref: Any, flight: _InFlight) -> EpisodeRecord:
        """The record of a finished job; a job that died becomes an ``env_error`` record."""
        try:
            outcome: JobOutcome = ray.get(ref)
        except Exception as exc:
            logger.warning("episode job for %s died: %s", flight.item.task_id, exc)
            for _, actor in flight.actors.values():
                self.pool.discard(actor)
            tags = list(self.suite.entry(flight.item.task_id).task.tags)
            return EpisodeRecord(result=failed_result(self._job(flight.item), tags, exc))
        for name, (spec, actor) in flight.actors.items():
            if name in outcome.broken_envs:
                self.pool.discard(actor)
            else:
                self.pool.release(spec, actor)
        return outcome.record
