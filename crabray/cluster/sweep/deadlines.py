"""Each task's time limit, backed up from outside its episode.

An episode ends itself at its task's time limit
(``crabray.episode.watch_episode``); the driver is the backstop: one still
running ``timeout_grace_sec`` after its limit is cancelled, and one still there
``kill_grace_sec`` later has its actors killed. While the run's model limiters
queue calls, an episode past its deadline gets ``timeout_grace_sec`` more, as
its own clock leaves out the time its agent waits for its model. A follower
queued behind another on its actor (``actors/pipeline.py``) has its time start
once the reset before it has ended.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import ray

from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.actors.pipeline import resets_ended
from crabray.cluster.sweep.settings import SchedulerSettings
from crabray.formats import Suite

logger = logging.getLogger(__name__)


class Deadlines:
    """The time limits of the sweep's episodes, and their enforcement from the driver.

    Args:
        suite: The loaded suite (each task's own limit).
        settings: The run's limits and grace periods.
        models_queued: Whether the run's model limiters queue calls now.
    """

    def __init__(
        self,
        suite: Suite,
        settings: SchedulerSettings,
        models_queued: Callable[[], bool],
    ) -> None:
        self.suite = suite
        self.settings = settings
        self.models_queued = models_queued

    def time_limit(self, item: SweepItem) -> float:
        """The time limit of ``item``'s task under the run's limits."""
        entry = self.suite.entry(item.task_id)
        return self.settings.limits.time_limit_for(entry.benchmark, entry.task)

    def longest_first(self, items: Iterable[SweepItem]) -> list[SweepItem]:
        """``items``, longest-expected first: by time limit, then by step budget."""

        def expected_cost(item: SweepItem) -> tuple[float, int]:
            entry = self.suite.entry(item.task_id)
            return self.time_limit(item), self.settings.limits.steps_for(
                entry.benchmark, entry.task
            )

        return sorted(items, key=expected_cost, reverse=True)

    def of(self, item: SweepItem, now: float) -> float:
        """The deadline of ``item`` started at ``now``: its limit and the grace."""
        return now + self.time_limit(item) + self.settings.timeout_grace_sec

    def restart(self, flight: InFlight) -> None:
        """``flight``'s time starts now (a follower promoted, or its reset just ended)."""
        flight.deadline = self.of(flight.item, time.monotonic())

    def soonest(self, in_flight: dict[Any, InFlight]) -> float | None:
        """The first deadline (``time.monotonic``) of the episodes in flight; None without one."""
        deadlines = [f.deadline for f in in_flight.values() if f.deadline is not None]
        return min(deadlines, default=None)

    def enforce(self, in_flight: dict[Any, InFlight], discard: Callable[[Any], None]) -> None:
        """Cancel the episodes past their deadline; retire the actors of those still there
        ``kill_grace_sec`` after (with ``discard``)."""
        for flight in resets_ended(list(in_flight.values())):
            if not flight.cancelled:  # a follower's time starts once its reset has ended
                self.restart(flight)
        now = time.monotonic()
        queued: bool | None = None  # the limiters are asked once, and only if a deadline passed
        for ref, flight in in_flight.items():
            if flight.deadline is None or now < flight.deadline:
                continue
            if not flight.cancelled and queued is None:
                queued = self.models_queued()
            if not flight.cancelled and queued:
                flight.deadline = now + self.settings.timeout_grace_sec
            elif not flight.cancelled:
                logger.warning("episode %s is past its time limit; cancelling", flight.item.task_id)
                ray.cancel(ref)
                flight.cancelled = True
                flight.deadline = now + self.settings.kill_grace_sec
            else:
                for _, actor in flight.actors.values():
                    discard(actor)
                flight.deadline = None
