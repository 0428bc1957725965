"""New attempts of episodes whose infrastructure failed, and episodes that never ran.

An episode whose infrastructure failed (``TerminationReason.is_infra``: a sandbox
that would not start, a worker killed from outside, a lost node) runs again as a
new attempt, after the retry policy's backoff, up to its ``max_attempts``; its
failed row is still written. Agent failures are results, never retried. An
episode that never ran (queued behind one whose sandbox could not be reset, or
on an actor that was retired) goes back to the front of the queue with the same
attempt. Once the run drains (its budget reached), neither happens: what did not
run stays unrun for a resume.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Iterator

from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.sweep.admission import Admission
from crabray.cluster.sweep.progress import SweepProgress
from crabray.core.result import EpisodeRecord
from crabray.core.retry import RetryPolicy

logger = logging.getLogger(__name__)


class Retries:
    """The next attempts waiting out their backoff, as a heap by when they are due.

    Args:
        policy: How many attempts, and the backoff between them.
        admission: The queue a due retry (or an unrun episode) goes back to the front of.
    """

    def __init__(self, policy: RetryPolicy, admission: Admission) -> None:
        self.policy = policy
        self.admission = admission
        self._delayed: list[tuple[float, int, SweepItem]] = []
        self._seq = itertools.count()

    def __bool__(self) -> bool:
        """Whether any retry is waiting out its backoff."""
        return bool(self._delayed)

    def waiting(self) -> Iterator[SweepItem]:
        """The retries waiting out their backoff."""
        return (item for _, _, item in self._delayed)

    def next_due(self) -> float | None:
        """When (``time.monotonic``) the first retry is due; None without any."""
        return self._delayed[0][0] if self._delayed else None

    def schedule(
        self, finished: list[tuple[InFlight, EpisodeRecord]], progress: SweepProgress
    ) -> list[SweepItem]:
        """Schedule the next attempts of episodes whose infrastructure failed."""
        retries = []
        for flight, record in finished:
            result = record.result
            if not result.termination_reason.is_infra:
                continue
            progress.infra_failures += 1
            if self.admission.draining or flight.item.attempt + 1 >= self.policy.max_attempts:
                continue
            retry = flight.item.model_copy(update={"attempt": flight.item.attempt + 1})
            delay = self.policy.backoff_sec(retry.attempt)
            logger.info(
                "retrying %s (%s) in %.1f s after infrastructure failure: %s",
                result.task_id,
                result.agent,
                delay,
                result.error,
            )
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._seq), retry))
            self.admission.needs.add_pending(retry, +1)
            retries.append(retry)
        return retries

    def release_due(self) -> None:
        """Put the retries whose backoff is over at the front of the queue."""
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            item = heapq.heappop(self._delayed)[2]
            self.admission.queue.appendleft(item)  # it already counts as pending

    def requeue(self, item: SweepItem) -> None:
        """``item`` never ran: it goes back to the front of the queue with the same attempt
        (not once the run drains)."""
        if not self.admission.draining:
            self.admission.push_front(item)

    def drain(self) -> None:
        """Drop the retries waiting out their backoff: they stay unrun for a resume."""
        for item in self.waiting():
            self.admission.needs.add_pending(item, -1)
        self._delayed.clear()
