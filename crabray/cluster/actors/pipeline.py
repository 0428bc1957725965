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

On sandboxes whose reset is cheap (``Backend.reset_in_call``: the local and
docker backends swap in a spare built ahead) no separate reset is sent: the
follower's own call resets the sandbox before its episode (the actor's
``prepare``), one actor call per episode instead of two. The reset then
counts in the follower's setup time and its time limit, which starts when
its predecessor has finished. Elsewhere (a VM's revert, an SSH host's
reset) the reset is its own call and the follower's time limit starts only
once it has ended.

A follower is not "in flight" until its predecessor has finished: it counts
neither against the concurrency nor in the progress. If the actor is retired
before the follower ran (its predecessor broke the sandbox, timed out or
killed the worker; the reset failed), the follower goes back to the queue
with the same attempt number: it never ran, so it is not a failure of its
own and writes no row. Whether it ran is the actor's word
(``CallOutcome.unprepared``), or, when its call raised, the outcome of the
reset queued before it, never a guess from timing. A worker dying during a
reset made in the follower's own call is an infrastructure failure of the
follower (a row, retried as the next attempt), as the driver cannot tell
it from a death during the episode.
"""

from __future__ import annotations

import logging
from typing import Any

import ray

from crabray.backends import backend_class
from crabray.cluster.actors.episode_call import CallOutcome
from crabray.cluster.actors.inflight import InFlight
from crabray.cluster.actors.pool import EnvironmentPool
from crabray.cluster.runtime.ray_runtime import remote_cause
from crabray.core.result import utcnow

logger = logging.getLogger(__name__)


class Followers:
    """At most one episode queued behind the running one on each pooled actor."""

    def __init__(self, pool: EnvironmentPool) -> None:
        self.pool = pool
        self._by_actor: dict[int, tuple[Any, InFlight]] = {}

    def has(self, actor: Any) -> bool:
        return id(actor) in self._by_actor

    def attach(self, leader: InFlight, follower: InFlight, call: bytes) -> None:
        """Queue ``follower`` on ``leader``'s actor: its reset, then the episode itself
        (``call``: its ``EpisodeCall``, packed)."""
        actor = leader.host
        ((spec, _),) = leader.actors.values()
        follower.actors = dict(leader.actors)
        follower.node_call = leader.node_call
        follower.queued = True
        follower.behind = self.pool.hand_over(
            actor, reset=not backend_class(spec.backend).reset_in_call
        )
        follower.reset_seen = follower.behind is None
        ref = actor.run_episode.remote(call, {})
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


def never_ran(flight: InFlight, outcome: CallOutcome | None) -> bool:
    """Whether a follower's sandbox could not be made clean, so its episode never ran.

    Args:
        flight: The episode that ended.
        outcome: What its call returned; None when the call raised.

    The actor says so in its outcome. When the call raised instead (the worker
    died, the call was cancelled), the reset queued before it tells: the actor
    runs its calls in the order they were sent, so once the follower's call has
    ended uncancelled, that reset has ended or failed with the worker, and
    ``ray.get`` returns at once.
    """
    if not flight.queued:
        return False
    if outcome is not None:
        if outcome.unprepared:
            logger.warning(
                "a sandbox could not be reset, retiring it: %s", outcome.record.result.error
            )
        return outcome.unprepared
    if flight.behind is None or flight.cancelled:
        return False
    try:
        ray.get(flight.behind)
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
