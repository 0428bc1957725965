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
from crabray.cluster.jobs import EpisodeJob, JobOutcome, failed_result
from crabray.cluster.pool import EnvironmentPool
from crabray.cluster.sandbox import SandboxSpec
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
            self._refill(queue, in_flight)
            while in_flight:
                ray.wait(list(in_flight), num_returns=1)
                ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
                finished = [
                    (flight, self._outcome(ref, flight))
                    for ref, flight in self._pop(ready, in_flight)
                ]
                retries = self._retries(finished, progress)
                queue.extendleft(reversed(retries))
                # Keep the sandboxes busy while this batch goes to disk.
                self._refill(queue, in_flight)
                self.on_records([record for _, record in finished])
                self._count(finished, retries, progress)
        finally:
            # Interrupted: the episodes still running cannot finish cleanly, and a
            # running actor task cannot be force-cancelled; their actors go.
            for flight in in_flight.values():
                for _, actor in flight.actors.values():
                    self.pool.discard(actor)
            self.pool.shutdown()
        return progress

    @staticmethod
    def _pop(ready: list[Any], in_flight: dict[Any, _InFlight]) -> list[tuple[Any, _InFlight]]:
        return [(ref, in_flight.pop(ref)) for ref in ready]

    def _refill(self, queue: deque[SweepItem], in_flight: dict[Any, _InFlight]) -> None:
        while queue and len(in_flight) < self.settings.concurrency:
            ref, flight = self._submit(queue.popleft())
            in_flight[ref] = flight

    def _submit(self, item: SweepItem) -> tuple[Any, _InFlight]:
        entry = self.suite.entry(item.task_id)
        flight = _InFlight(item)
        for env in entry.benchmark.task_environments(entry.task):
            spec = SandboxSpec.of(env)
            flight.actors[env.name] = (spec, self.pool.acquire(spec))
        (_, host), *_ = flight.actors.values()
        others = {name: actor for name, (_, actor) in list(flight.actors.items())[1:]}
        return host.run_episode.remote(self._job(item), others), flight

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

    def _retries(
        self, finished: list[tuple[_InFlight, EpisodeRecord]], progress: SweepProgress
    ) -> list[SweepItem]:
        """The next attempts of episodes whose infrastructure failed, within the limit."""
        retries = []
        for flight, record in finished:
            result = record.result
            if not result.termination_reason.is_infra:
                continue
            progress.infra_failures += 1
            if flight.item.attempt + 1 < self.settings.max_attempts:
                logger.info(
                    "retrying %s (%s) after infrastructure failure: %s",
                    result.task_id,
                    result.agent,
                    result.error,
                )
                retries.append(flight.item.model_copy(update={"attempt": flight.item.attempt + 1}))
        return retries

    def _count(
        self,
        finished: list[tuple[_InFlight, EpisodeRecord]],
        retries: list[SweepItem],
        progress: SweepProgress,
    ) -> None:
        """Count a batch that is on disk: final results are done; retried ones are not."""
        retried = {(r.agent.name, r.task_id, r.epoch) for r in retries}
        for flight, record in finished:
            item = flight.item
            if (item.agent.name, item.task_id, item.epoch) in retried:
                progress.retries += 1
                continue
            progress.done += 1
            progress.successes += int(record.result.success)
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
