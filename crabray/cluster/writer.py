"""Finished episodes on their way to disk: gathered into batches, written on a thread.

Writing a batch of results (two Parquet part files, four fsyncs) took the
scheduler's thread 7 to 18 ms of wall clock twice a second, most of it
waiting for the disk, while episodes kept finishing and actors waited for
their next call. The scheduler hands its finished episodes to
``ResultBatches`` and goes on dispatching; a batch comes back to it, to be
counted as done, only once it is on disk, so an episode reported as done
always has its row on disk, whenever the driver is killed.

Batches are written one at a time, in order: a batch goes to the thread
when its oldest episode has waited ``flush_sec`` (or ``flush_records``
wait) and the batch before it is written.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from crabray.cluster.sweep import InFlight, SweepItem
from crabray.core.result import EpisodeRecord

RecordsWriter = Callable[[list[EpisodeRecord]], None]
Finished = list[tuple[InFlight, EpisodeRecord]]
Batch = tuple[Finished, list[SweepItem]]
"""Finished episodes, and the retries scheduled for those whose infrastructure failed."""

WRITE_POLL_SEC = 0.05
"""How long the scheduler may sleep, while a batch is being written, before it looks
whether the batch is on disk (to count it and start the next)."""


class ResultBatches:
    """The finished episodes a scheduler has not counted yet, and the thread writing them.

    Args:
        write: Puts a batch of finished records on disk (the run's sink).
        flush_sec: How long a finished episode may wait before its batch is written.
        flush_records: Finished episodes that are written at once without waiting.
    """

    def __init__(self, write: RecordsWriter, flush_sec: float, flush_records: int) -> None:
        self._write = write
        self._flush_sec = flush_sec
        self._flush_records = flush_records
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crabray-results")
        self._gathered: Batch = ([], [])
        self._since = math.inf
        self._writing: tuple[Batch, Future[None]] | None = None
        self.failed = False
        """Writing a batch raised: what is left must not be written after it."""

    @property
    def pending(self) -> bool:
        """Whether some finished episode is not counted yet (gathered or being written)."""
        return bool(self._gathered[0]) or self._writing is not None

    def add(self, finished: Finished, retries: list[SweepItem]) -> None:
        """Gather finished episodes (and the retries of the failed ones) for the next batch."""
        if not self._gathered[0]:
            self._since = time.monotonic()
        self._gathered[0].extend(finished)
        self._gathered[1].extend(retries)

    def wake_in(self, now: float) -> list[float]:
        """Seconds from ``now`` after which ``flush`` has something to do, if any."""
        wakeups = [self._since + self._flush_sec - now]
        return [*wakeups, WRITE_POLL_SEC] if self._writing is not None else wakeups

    def flush(self, *, force: bool) -> list[Batch]:
        """The batches now on disk, to be counted; start writing the next when it is due.

        Args:
            force: Write everything gathered and wait until it is on disk (the end
                of a run, or an interruption: then call it only if not ``failed``).

        Raises:
            Exception: Whatever writing a batch raised (``failed`` is then set); the
                batch is not on disk and nothing is written after it.
        """
        done = self._collect(wait=force)
        finished = self._gathered[0]
        if not finished or self._writing is not None:
            return done
        due = time.monotonic() - self._since >= self._flush_sec
        if not (force or due or len(finished) >= self._flush_records):
            return done
        batch, self._gathered, self._since = self._gathered, ([], []), math.inf
        future = self._thread.submit(self._write, [record for _, record in finished])
        self._writing = (batch, future)
        return done + (self._collect(wait=True) if force else [])

    def _collect(self, *, wait: bool) -> list[Batch]:
        """The batch being written, once it is on disk (waited for when ``wait``).

        An interruption while waiting leaves the batch where it is, to be waited
        for again.
        """
        if self._writing is None:
            return []
        batch, future = self._writing
        if not (wait or future.done()):
            return []
        error = future.exception()
        self._writing = None
        if error is not None:
            self.failed = True
            raise error
        return [batch]

    def close(self) -> None:
        """Let a batch under way end, then stop the thread."""
        self._thread.shutdown(wait=True)
