"""Episodes in flight, and the next episode queued on a busy actor behind the running one.

An actor runs its calls in the order they were sent. So while a pooled,
single-environment episode runs, the scheduler sends its actor the reset
(``recycle``) and the next episode of the same configuration at once: they
wait in the actor's own queue, and the actor goes from one episode to its
reset to the next without waiting for the driver to see the result, send a
reset, learn that it ended and bind the next episode (three round trips per
episode, during which the actor sat idle). The follower is still an
episode of its own (one call, one result, one row), so results land one at
a time, an infrastructure failure retries that episode alone, and time
limits and resume are per episode as before.

A follower is not "in flight" until its predecessor has finished: it counts
neither against the concurrency nor in the progress, and its time limit
starts only once the reset before it has ended. If the actor is retired
before the follower ran (its predecessor broke the sandbox, timed out or
killed the worker; the reset failed), the follower goes back to the queue
with the same attempt number: it never ran, so it is not a failure of its
own and writes no row.
"""

from __future__ import annotations

import logging
from typing import Any

import ray

from crabray.cluster.pool import EnvironmentPool
from crabray.cluster.ray_runtime import remote_cause
from crabray.cluster.sweep import InFlight
from crabray.core.result import utcnow

logger = logging.getLogger(__name__)

_RESET_WAIT_SEC = 5.0
"""How long to wait for the outcome of a follower's reset once the follower has ended."""


class Followers:
    """At most one episode queued behind the running one on each pooled actor."""

    def __init__(self, pool: EnvironmentPool) -> None:
        self.pool = pool
        self._by_actor: dict[int, tuple[Any, InFlight]] = {}

    def has(self, actor: Any) -> bool:
        return id(actor) in self._by_actor

    def attach(self, leader: InFlight, follower: InFlight, job: Any) -> None:
        """Queue ``follower`` on ``leader``'s actor: its reset, then the episode itself."""
        actor = leader.host
        follower.actors = dict(leader.actors)
        follower.node_call = leader.node_call
        follower.behind = self.pool.hand_over(actor)
        follower.reset_seen = False
        ref = actor.run_episode.remote(job, {})
        self._by_actor[id(actor)] = (ref, follower)

    def promote(self, actor: Any, now: float) -> tuple[Any, InFlight] | None:
        """The follower queued on ``actor``, now running: its predecessor has finished.

        Its deadline is the caller's to set (and to restart when its reset has ended).
        """
        queued = self._by_actor.pop(id(actor), None)
        if queued is None:
            return None
        ref, flight = queued
        flight.submitted = now
        flight.started_at = utcnow()
        return ref, flight

    def drop(self, actor: Any) -> InFlight | None:
        """Forget the follower queued on ``actor`` (being retired): it never ran."""
        queued = self._by_actor.pop(id(actor), None)
        return None if queued is None else queued[1]


def reset_failed(flight: InFlight) -> bool:
    """Whether the reset queued before a follower failed (so the follower never ran)."""
    if flight.behind is None:
        return False
    try:
        ray.get(flight.behind, timeout=_RESET_WAIT_SEC)
    except Exception as exc:
        logger.warning("resetting a sandbox failed, retiring it: %s", remote_cause(exc))
        return True
    return False


def resets_ended(flights: list[InFlight]) -> list[InFlight]:
    """The promoted followers whose reset has ended since the last look (one ``ray.wait``)."""
    pending = {f.behind: f for f in flights if not f.reset_seen}
    if not pending:
        return []
    done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
    for ref in done:
        pending[ref].reset_seen = True
    return [pending[ref] for ref in done]
