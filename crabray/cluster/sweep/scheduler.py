"""The driver's scheduler: episodes in flight, results as they finish, retries.

It dispatches an episode only when the pool can give it an environment of
every kind it needs without exceeding the cluster's slots (backpressure per
kind, and at most ``concurrency`` episodes in flight overall); collects
finished episodes with ``ray.wait`` in completion order; hands every batch of
finished records to ``on_records`` (which puts them on disk) before counting
them done; retries an episode whose infrastructure failed as a new attempt,
after a backoff, up to the retry policy's limit; and backs up each task's
time limit from outside (an episode ends itself at its limit; one still
running ``timeout_grace_sec`` later is cancelled, then its actors are killed).
Agent failures are results, never retried.

Interrupted (``KeyboardInterrupt``: Ctrl-C, or SIGTERM turned into one), it asks
the episodes in flight to stop after their current step (``RunControl``),
writes what they report within ``stop_grace_sec`` as ``cancelled`` rows, then
kills what is left.

The ``Scheduler`` keeps the loop and wires its parts, one job each:
``needs`` (the sandboxes of each task), ``levels`` (how many episodes may be in
flight, per host kind with ``--concurrency auto``), ``admission`` (the queue,
and which queued episodes start now), ``dispatch`` (episodes sent to their
actors, followers queued behind them), ``outcomes`` (what a finished call comes
back as), ``retries`` (new attempts after a backoff), ``deadlines`` (time
limits from outside), ``hosts`` (the cluster's slots, lost hosts, placement)
and ``records`` (finished episodes to disk in batches, then counted).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import ray

from crabray.cluster.actors.control import start_control
from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.actors.pool import EnvironmentPool
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.ray_runtime import is_local_instance
from crabray.cluster.sweep.adaptive import AUTO
from crabray.cluster.sweep.admission import Admission
from crabray.cluster.sweep.deadlines import Deadlines
from crabray.cluster.sweep.dispatch import Dispatch
from crabray.cluster.sweep.hosts import HostWatch
from crabray.cluster.sweep.levels import Levels
from crabray.cluster.sweep.needs import SandboxNeeds
from crabray.cluster.sweep.outcomes import Outcomes, host_error
from crabray.cluster.sweep.progress import SweepProgress
from crabray.cluster.sweep.records import FinishedRecords
from crabray.cluster.sweep.retries import Retries
from crabray.cluster.sweep.settings import SchedulerSettings
from crabray.cluster.sweep.status import StatusPublisher
from crabray.core.result import EpisodeRecord
from crabray.core.words import counted
from crabray.formats import Suite

logger = logging.getLogger(__name__)

_WAKE_SHARE = 100
"""With many episodes in flight, the loop wakes once 1 in this many has ended (or at its
timeout: a flush, a deadline, the capacity poll), not for each one.

Every wake-up costs a ``ray.wait`` over every reference in flight and walks over every
episode, so waking for each one that ends cost the driver a time that grows with the
square of the episodes in flight: at 10,000 in flight ending 137 a second, 48% of a core
waking for each, 11% waking for 1% of them (``scripts/sim_scale.py``, docs/scale.md). A
freed slot then waits about 1% of an episode's length for its next one, at most the
loop's timeout (1 s); below ``_WAKE_SHARE`` in flight nothing changes.
"""

RecordsCallback = Callable[[list[EpisodeRecord]], None]
ProgressCallback = Callable[[SweepProgress], None]
SubmitCallback = Callable[[SweepItem, float], None]


class Scheduler:
    """Runs sweep items as Ray actor calls of episodes with pooled, pinned environment actors.

    Args:
        suite: The loaded suite (the driver's copy, for environments, limits, tags).
        settings: Concurrency, retry, pooling and time-limit knobs.
        on_records: Persists a batch of finished records; called before they count as done.
        on_progress: Told after every batch.
        on_submit: Told when an episode is dispatched (for latency measurements).
        on_finished: Told of every batch of finished records as they come back, before
            more episodes start and before they are written (the run's budget: ``drain``).
        models_queued: Whether the run's model limiters queue calls now: an episode past
            its deadline then gets ``timeout_grace_sec`` more (its own clock leaves out
            the time its agent waits for its model).
    """

    def __init__(
        self,
        suite: Suite,
        settings: SchedulerSettings,
        on_records: RecordsCallback,
        on_progress: ProgressCallback | None = None,
        on_submit: SubmitCallback | None = None,
        on_finished: RecordsCallback | None = None,
        models_queued: Callable[[], bool] | None = None,
    ) -> None:
        self.suite = suite
        self.settings = settings
        self.on_records = on_records
        self.on_progress = on_progress or (lambda _: None)
        self.on_submit = on_submit or (lambda _item, _t: None)
        self.on_finished = on_finished or (lambda _: None)
        self.models_queued = models_queued or (lambda: False)
        self.control: Any = None
        """The run's ``RunControl`` actor, started by ``run`` (Ray is connected by then)."""
        concurrency = settings.execution.concurrency
        auto = concurrency == AUTO
        fixed = concurrency if isinstance(concurrency, int) else None
        self.pool = EnvironmentPool(
            pooling=settings.execution.pooling,
            run_id=settings.run_id,
            max_actors=fixed,
            memory=auto,
        )
        self.progress = SweepProgress(total=0)
        """The counts so far: what an interrupted run had done when it stopped."""
        self.status: StatusPublisher | None = None
        self._in_flight: dict[Any, InFlight] = {}
        self.needs = SandboxNeeds(suite, memory=auto)
        self.levels = Levels(fixed, self.needs, lambda: self.models_queued())
        self.admission = Admission(self.needs, self.levels, self.pool, settings.reserve_after_sec)
        self.retries = Retries(settings.retry, self.admission)
        self.deadlines = Deadlines(suite, settings, lambda: self.models_queued())
        self.dispatch = Dispatch(
            suite,
            settings,
            self.pool,
            self.admission,
            self.deadlines,
            self.retries,
            self._in_flight,
            lambda item, at: self.on_submit(item, at),
        )
        self.followers = self.dispatch.followers
        self.outcomes = Outcomes(self.dispatch)
        self.hosts = HostWatch(self.needs, settings, self.pool, self.dispatch.discard)
        self.records = FinishedRecords(
            lambda records: self.on_records(records), lambda progress: self.on_progress(progress)
        )

    def run(self, items: Iterable[SweepItem]) -> SweepProgress:
        """Run every item to a final result; return the final counts."""
        admission, retries, records = self.admission, self.retries, self.records
        queue, in_flight = admission.queue, self._in_flight
        admission.extend(self.deadlines.longest_first(items))
        progress = self.progress = SweepProgress(total=len(queue))
        self.control = self.pool.control = start_control(own_worker=not is_local_instance())
        # The board is for `crabray cluster status` on a cluster that outlives the run. A
        # local instance the run started ends with it, and no crabray command reads it: a
        # board there would only cost a worker process at every start
        # (notes/performance-history.md).
        self.status = None if is_local_instance() else StatusPublisher(self.settings.run_id)
        self._poll(force=True)
        self.hosts.check_memory_fits()
        self._warm()
        try:
            while queue or in_flight or retries or records:
                self._refill()
                progress.in_flight = len(in_flight)
                # A reset finishing can make a queued episode servable: wake on those too.
                waiting = list(in_flight) + (self.pool.in_progress() if queue else [])
                timeout = self._wait_timeout()
                if not waiting:
                    time.sleep(timeout)  # ray.wait of nothing returns at once: no busy loop
                wake_after = max(1, len(in_flight) // _WAKE_SHARE)
                ready, _ = ray.wait(waiting, num_returns=wake_after, timeout=timeout)
                if ready and in_flight:
                    ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
                    if ready:
                        self._finish(ready)
                self.deadlines.enforce(in_flight, self.dispatch.discard)
                if self._poll():
                    self.hosts.check_hosts([*queue, *retries.waiting()], len(queue), in_flight)
                    self.hosts.check_placement(in_flight)
                records.flush(progress, force=not (queue or in_flight or retries))
            if self.status is not None:
                self.status.publish(progress, final=True)
        except BaseException as exc:
            # Interrupted or failed: what finished goes to disk (unless writing is what failed).
            if isinstance(exc, KeyboardInterrupt) and not records.flushing:
                self._stop()
            if records and not records.flushing:
                records.flush(progress, force=True)
            raise
        finally:
            # Interrupted: the episodes still running cannot finish cleanly, and a
            # running actor task cannot be force-cancelled; their actors go.
            for flight in in_flight.values():
                for _, actor in flight.actors.values():
                    self.pool.discard(actor)
            self.pool.shutdown()
        return progress

    def drain(self) -> None:
        """Start no more episodes (the run's budget is reached): those in flight finish;
        those not started, queued or waiting to be retried, stay unrun for a resume."""
        self.admission.drain()
        self.retries.drain()

    @property
    def pool_hit_rate(self) -> float:
        return self.pool.stats.hit_rate

    def _stop(self) -> None:
        """Ask the episodes in flight to end after their step; keep what they report in time.

        Each reports within ``stop_grace_sec`` a ``cancelled`` record of everything it
        did (``crabray.episode.watch_episode``); the rest are killed by the caller.
        A second interrupt ends the wait.
        """
        in_flight = self._in_flight
        if not in_flight:
            return
        logger.warning("interrupted: stopping %s in flight", counted(len(in_flight), "episode"))
        self.outcomes.stopping = True
        self.control.stop.remote()
        deadline = time.monotonic() + self.settings.stop_grace_sec
        while in_flight and (left := deadline - time.monotonic()) > 0:
            try:
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=left)
            except KeyboardInterrupt:
                logger.warning("interrupted again: not waiting for the episodes in flight")
                break
            if not ready:
                break
            ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
            self.records.add(self._outcomes(ready))
        if in_flight:
            logger.warning(
                "%s did not stop in time; killing them", counted(len(in_flight), "episode")
            )

    def _outcomes(self, ready: list[Any]) -> list[tuple[InFlight, EpisodeRecord]]:
        """The finished episodes of ``ready`` (out of flight now) with their records."""
        popped = [(ref, self._in_flight.pop(ref)) for ref in ready]
        outcomes = [(flight, self.outcomes.record(ref, flight)) for ref, flight in popped]
        return [(flight, record) for flight, record in outcomes if record is not None]

    def _finish(self, ready: list[Any]) -> None:
        """Take in a batch of finished calls: retries scheduled, the budget told, the
        sandboxes kept busy, then the batch written if it is due."""
        finished = self._outcomes(ready)
        self.levels.observe_finished(finished)
        self.records.add(finished, self.retries.schedule(finished, self.progress))
        self.on_finished([record for _, record in finished])
        stop = host_error([record for _, record in finished])
        if stop is not None:
            # No episode here would start either: what finished goes to disk, nothing more runs.
            self.records.flush(self.progress, force=True)
            raise stop
        # Keep the sandboxes busy before this batch goes to disk.
        self._refill()
        self.progress.in_flight = len(self._in_flight)
        self.pool.trim(self.needs.pending)
        self.records.flush(self.progress, force=False)

    def _refill(self) -> None:
        """Start what may start now: due retries first, then the queue from its front."""
        self.retries.release_due()
        self.pool.refresh()
        self.admission.admit(
            self._in_flight,
            self.hosts.capacity,
            self.hosts.peak,
            lambda item: self.dispatch.submit(item, self.hosts.capacity),
            self._fail_unplaceable,
        )

    def _fail_unplaceable(self, item: SweepItem, reason: str) -> None:
        """Record ``item`` as an infrastructure failure that no retry can mend: final."""
        flight = InFlight(item, time.monotonic(), None)
        self.records.add([(flight, self.outcomes.unplaceable(item, reason))])
        self.progress.infra_failures += 1

    def _poll(self, *, force: bool = False) -> bool:
        """Re-read slot capacity, adapt the levels and publish the run's status, at most
        once a second; whether it was time to."""
        if not self.hosts.poll(force=force):
            return False
        self.levels.adapt(self.hosts.capacity, self._in_flight, self.progress)
        if self.status is not None:
            self.status.publish(self.progress)
        return True

    def _warm(self) -> None:
        """Start ``warm`` environments of each configuration the queue needs, ahead."""
        execution = self.settings.execution
        if not execution.warm or not execution.pooling:
            return
        wanted: dict[str, SandboxSpec] = {}
        for item in self.admission.queue:
            for spec in self.needs.specs_of(item.task_id):
                wanted.setdefault(spec.pool_key, spec)
        for spec in wanted.values():
            self.pool.warm(spec, execution.warm, self.hosts.capacity)

    def _wait_timeout(self) -> float:
        """How long ``ray.wait`` may block before a deadline, a retry, a flush or a
        capacity check."""
        now = time.monotonic()
        wakeups = [now + 1.0, self.records.due_at()]
        for at in (self.deadlines.soonest(self._in_flight), self.retries.next_due()):
            if at is not None:
                wakeups.append(at)
        return max(min(wakeups) - now, 0.0)
