"""Finished episodes to disk in batches, then counted.

Every batch of finished records goes to ``on_records`` (which puts them on disk)
before it counts as done: one pair of part files, four fsyncs, per batch
instead of per finished episode, and fewer files for the final compaction. A
batch waits at most ``_FLUSH_SEC``, so a killed driver loses at most that much
finished work, which a resumed run redoes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.sweep.progress import SweepProgress
from crabray.core.result import EpisodeRecord, TerminationReason

logger = logging.getLogger(__name__)

_FLUSH_SEC = 0.5
"""How long a finished episode may wait in the driver before its batch goes to disk."""

_FLUSH_RECORDS = 256
"""Finished episodes that go to disk at once without waiting for ``_FLUSH_SEC``.

Episodes go to disk in batches (one pair of part files, four fsyncs, per batch
instead of per finished episode, and fewer files for the final compaction); an
episode counts as done only once its batch is on disk, and a batch waits at most
``_FLUSH_SEC``, so a killed driver loses at most that much finished work, which a
resumed run redoes.
"""


class FinishedRecords:
    """The finished episodes not on disk yet (not counted yet), oldest first.

    Args:
        on_records: Persists a batch of finished records.
        on_progress: Told the counts after every batch.
    """

    def __init__(
        self,
        on_records: Callable[[list[EpisodeRecord]], None],
        on_progress: Callable[[SweepProgress], None],
    ) -> None:
        self.on_records = on_records
        self.on_progress = on_progress
        self._unwritten: list[tuple[InFlight, EpisodeRecord]] = []
        self._retries: list[SweepItem] = []
        """The next attempts of the episodes in ``_unwritten`` (they count as retried)."""
        self._since = math.inf
        self.flushing = False
        """Whether ``on_records`` is under way: an error then is the writing's own."""

    def __bool__(self) -> bool:
        """Whether any finished episode waits to go to disk."""
        return bool(self._unwritten)

    def add(
        self, finished: list[tuple[InFlight, EpisodeRecord]], retries: Sequence[SweepItem] = ()
    ) -> None:
        """Keep ``finished`` (with the next attempts of those retried) for the next batch."""
        if not self._unwritten and finished:
            self._since = time.monotonic()
        self._unwritten += finished
        self._retries.extend(retries)

    def due_at(self) -> float:
        """When (``time.monotonic``) the batch waiting must go to disk; inf without one."""
        return self._since + _FLUSH_SEC

    def flush(self, progress: SweepProgress, *, force: bool) -> None:
        """Put the finished episodes on disk, then count them: when forced, when the
        oldest has waited ``_FLUSH_SEC``, or when ``_FLUSH_RECORDS`` wait."""
        if not self._unwritten:
            return
        due = time.monotonic() - self._since >= _FLUSH_SEC
        if not (force or due or len(self._unwritten) >= _FLUSH_RECORDS):
            return
        finished, retries = self._unwritten, self._retries
        self.flushing = True
        self.on_records([record for _, record in finished])
        self.flushing = False
        self._unwritten, self._retries = [], []
        self._since = math.inf
        _count(finished, retries, progress)
        self.on_progress(progress)


def _count(
    finished: list[tuple[InFlight, EpisodeRecord]],
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
        if record.result.termination_reason is TerminationReason.CANCELLED:
            progress.cancelled += 1
            continue
        progress.done += 1
        progress.successes += int(record.result.success)
        progress.timeouts += int(record.result.termination_reason is TerminationReason.TIMEOUT)
