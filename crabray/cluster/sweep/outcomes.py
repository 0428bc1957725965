"""What a finished episode call comes back as: its record, and what becomes of its actors.

A call that returned gives the episode's own record; its actors go back to the
pool, are retired when the episode broke their sandbox, or run the follower
queued on them. A call that raised or died instead becomes an error record
(``died_result``: a timeout when the driver cancelled it, the agent's
``sandbox_error`` when its own sandbox could have killed its worker, else an
infrastructure failure, retried), or ``cancelled`` when the run was
interrupted. A follower that never ran (the reset before it failed) gives no
record: it goes back to the queue with the same attempt.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray

from crabray.cluster.actors.episode_call import (
    CallOutcome,
    died_result,
    failed_result,
    reaches_its_worker,
    unpack,
)
from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.actors.pipeline import never_ran
from crabray.cluster.actors.pool import node_name
from crabray.cluster.sweep.dispatch import Dispatch
from crabray.core.errors import HostError, PlacementError, SandboxHostError
from crabray.core.result import EpisodeRecord, EpisodeResult, TerminationReason

logger = logging.getLogger(__name__)


class Outcomes:
    """Turns finished calls into records, and hands their actors on.

    Args:
        dispatch: The episodes' calls, their followers and the retiring of actors.
    """

    def __init__(self, dispatch: Dispatch) -> None:
        self.dispatch = dispatch
        self.stopping = False
        """Set when the run was interrupted: a call that dies now was cancelled, and no
        follower is promoted."""

    def record(self, ref: Any, flight: InFlight) -> EpisodeRecord | None:
        """The record of a finished call; a call that died becomes an error record.

        None for a follower that never ran because the reset before it failed: it
        goes back to the queue with the same attempt.
        """
        dispatch = self.dispatch
        try:
            outcome = unpack(ray.get(ref), CallOutcome)
        except Exception as exc:
            if never_ran(flight, None):
                self._requeue_unrun(flight)
                return None
            return EpisodeRecord(result=self._died(flight, exc))
        if never_ran(flight, outcome):
            self._requeue_unrun(flight)
            return None
        if flight.unplaced is not None:  # its host ran, and found another actor killed
            result = outcome.record.result
            result.termination_reason = TerminationReason.ENV_ERROR
            result.error, result.error_type = flight.unplaced, PlacementError.__name__
        for name, (_, actor) in flight.actors.items():
            if name in outcome.broken_envs:
                dispatch.discard(actor, close=True)
            elif dispatch.followers.has(actor) and not self.stopping:
                dispatch.promote(actor, outcome.record)
            else:
                dispatch.pool.release(actor)
        return outcome.record

    def unplaceable(self, item: SweepItem, reason: str) -> EpisodeRecord:
        """The final record of ``item``, which can never be placed: an infrastructure
        failure that no retry can mend."""
        logger.error("%s", reason)
        call = self.dispatch.call(item)
        task = self.dispatch.suite.entry(item.task_id).task
        return EpisodeRecord(result=failed_result(call, task, PlacementError(reason)))

    def _died(self, flight: InFlight, exc: Exception) -> EpisodeResult:
        """The result of ``flight``, whose call raised ``exc``; its actors are retired."""
        dispatch = self.dispatch
        call = dispatch.call(flight.item)
        call.settings.node = node_name(flight.node_call)
        for _, actor in flight.actors.values():
            dispatch.discard(actor)
        task = dispatch.suite.entry(flight.item.task_id).task
        specs = dispatch.admission.needs.specs_of(flight.item.task_id)
        reachable = any(reaches_its_worker(s) for s in specs)
        result = died_result(call, task, exc, flight.cancelled, flight.started_at, reachable)
        if flight.unplaced is not None:
            result = failed_result(call, task, PlacementError(flight.unplaced), flight.started_at)
        if self.stopping:
            result.termination_reason = TerminationReason.CANCELLED
            result.error = f"the run was interrupted and the episode's call ended: {exc}"
        result.wall_time_sec = time.monotonic() - flight.submitted
        return result

    def _requeue_unrun(self, flight: InFlight) -> None:
        """Retire the actor whose sandbox could not be reset; its follower goes back to
        the queue."""
        self.dispatch.pool.stats.failed_resets += 1
        self.dispatch.discard(flight.host)
        self.dispatch.retries.requeue(flight.item)


def host_error(records: list[EpisodeRecord]) -> HostError | None:
    """The error that ends the run when an episode found its host cannot start its sandboxes.

    A ``SandboxHostError`` (``bwrap`` or an image missing) would fail every
    episode of its kind the same way, each one costing a sandbox start: the run
    stops instead, naming the task and the fix.
    """
    for record in records:
        result = record.result
        if result.error_type == SandboxHostError.__name__:
            return HostError(
                f"task {result.task_id} found that this host cannot run its sandboxes, and no "
                f"other episode here could: {result.error}. The run stopped; what finished is "
                f"recorded: fix the host, then resume with --resume {result.run_id}"
            )
    return None
