"""Sending episodes to their environment actors: the call, its actors, the one queued behind.

An episode takes an environment actor for each of its task's environments from
the pool and is sent as one call to the actor of its first environment (its
host), which reaches the others through theirs. A pooled, single-environment
episode gets a follower: the next queued episode of the same configuration is
sent to its actor at once and runs when it ends (``actors/pipeline.py``); the
follower counts as in flight only once it runs. An actor that broke is retired,
and the follower queued on it goes back to the queue: it never ran.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from crabray.cluster.actors.episode_call import EpisodeCall, pack
from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.actors.pipeline import Followers
from crabray.cluster.actors.pool import EnvironmentPool, SlotKey
from crabray.cluster.sweep.admission import Admission
from crabray.cluster.sweep.deadlines import Deadlines
from crabray.cluster.sweep.retries import Retries
from crabray.cluster.sweep.settings import SchedulerSettings
from crabray.core.result import EpisodeRecord
from crabray.episode import EpisodeSettings
from crabray.formats import Suite

logger = logging.getLogger(__name__)


class Dispatch:
    """Episodes sent to their actors, followers queued and promoted, broken actors retired.

    Args:
        suite: The loaded suite (the driver's copy).
        settings: The run id, limits, pooling and pipelining.
        pool: The environment pool.
        admission: The queue a follower is taken from.
        deadlines: Each episode's deadline.
        retries: Where an episode that never ran goes back to the queue.
        in_flight: The episodes in flight: a promoted follower joins them.
        on_submit: Told when an episode is dispatched (for latency measurements).
    """

    def __init__(
        self,
        suite: Suite,
        settings: SchedulerSettings,
        pool: EnvironmentPool,
        admission: Admission,
        deadlines: Deadlines,
        retries: Retries,
        in_flight: dict[Any, InFlight],
        on_submit: Callable[[SweepItem, float], None],
    ) -> None:
        self.suite = suite
        self.settings = settings
        self.pool = pool
        self.admission = admission
        self.deadlines = deadlines
        self.retries = retries
        self.in_flight = in_flight
        self.on_submit = on_submit
        self.followers = Followers(pool)

    def call(self, item: SweepItem) -> EpisodeCall:
        """What an actor is asked to run for ``item``."""
        entry = self.suite.entry(item.task_id)
        settings = EpisodeSettings(
            run_id=self.settings.run_id,
            suite=entry.benchmark.name,
            agent=item.agent.name,
            model=item.agent.model,
            epoch=item.epoch,
            attempt=item.attempt,
            limits=self.settings.limits,
            max_tokens=item.agent.max_tokens,
            max_cost_usd=item.agent.max_cost_usd,
        )
        return EpisodeCall(
            suite=self.suite.ref, task_id=item.task_id, agent=item.agent, settings=settings
        )

    def submit(self, item: SweepItem, capacity: dict[SlotKey, int]) -> None:
        """Send ``item`` to actors of its environments; it is in flight, a follower queued."""
        now = time.monotonic()
        flight = InFlight(item, now, self.deadlines.of(item, now))
        specs = self.admission.needs.specs_of(item.task_id)
        for spec, actor in zip(specs, self.pool.acquire_all(specs, capacity), strict=True):
            flight.actors[spec.name] = (spec, actor)
        (_, host), *_ = flight.actors.values()
        flight.node_call = self.pool.node_call(host)
        others = {name: actor for name, (_, actor) in list(flight.actors.items())[1:]}
        self.on_submit(item, time.time())
        self.in_flight[host.run_episode.remote(pack(self.call(item)), others)] = flight
        self.follow(flight)

    def follow(self, leader: InFlight) -> None:
        """Queue the next episode of the same configuration behind ``leader`` on its actor
        (pooled, single-environment episodes: ``crabray.cluster.actors.pipeline``)."""
        if (
            not (self.settings.execution.pooling and self.settings.pipeline)
            or len(leader.actors) != 1
        ):
            return
        if self.followers.has(leader.host):
            return
        ((spec, _),) = leader.actors.values()
        item = self.admission.take_follower(spec)
        if item is not None:
            follower = InFlight(item, time.monotonic(), None)
            self.followers.attach(leader, follower, pack(self.call(item)))

    def promote(self, actor: Any, previous: EpisodeRecord) -> None:
        """The follower queued on ``actor`` runs now: it is in flight, its time counts.

        It counts as dispatched when the episode before it finished (bench_cluster's
        dispatch latency is then its wait for the reset and its own setup).
        """
        promoted = self.followers.promote(actor, time.monotonic())
        if promoted is None:
            return
        ref, flight = promoted
        self.deadlines.restart(flight)
        self.in_flight[ref] = flight
        self.on_submit(flight.item, previous.result.finished_at.timestamp())
        self.follow(flight)

    def discard(self, actor: Any, *, close: bool = False) -> None:
        """Retire a broken actor (closing its sandbox first with ``close``); the episode
        queued behind its running one goes back to the queue with the same attempt (it
        never ran)."""
        follower = self.followers.drop(actor)
        if follower is not None:
            self.retries.requeue(follower.item)
        self.pool.discard(actor, close=close)
