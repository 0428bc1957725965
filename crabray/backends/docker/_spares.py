"""Warm spares of a docker sandbox: clean containers started ahead of the resets that use them.

A reset swaps in the oldest spare, so it costs a start only when no spare is
ready yet. A container start (0.3 to 0.6 s on a loaded 2-core machine) can be
longer than a one-action episode; with one spare, such a reset waits for the
rest of that spare's start. So the queue measures both, each spare's start and
each episode (from a swap to the next reset), and keeps as many spares under
way as one start spans episodes: one while episodes are longer than a start,
up to ``limit`` when they are shorter. A replacement is started as soon as a
spare is taken, before the reset waits for it.

Used containers are removed on a thread of their own, so a removal never
delays a spare's start and a swap never waits for a removal.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

SMOOTHING = 0.3
"""Weight of the newest measurement in the running averages of starts and episodes."""


class SpareQueue(Generic[T]):
    """Spares under way, oldest first, and the thread that removes used containers.

    Args:
        launch: Makes one clean spare (blocking; runs on a background thread).
        discard: Disposes of a spare or a used container's handle (blocking).
        limit: Most spares under way at once.
        name: Prefix of the background threads' names.
    """

    def __init__(
        self, launch: Callable[[], T], discard: Callable[[T], None], *, limit: int, name: str
    ) -> None:
        self._launch = launch
        self._discard = discard
        self._limit = limit
        self._starts = ThreadPoolExecutor(limit, thread_name_prefix=f"{name}-spare")
        self._removals = ThreadPoolExecutor(1, thread_name_prefix=f"{name}-removal")
        self._pending: deque[Future[T]] = deque()
        self._lock = threading.Lock()
        self._start_sec: float | None = None
        self._episode_sec: float | None = None
        self._swapped_at = time.monotonic()
        """When the last episode began: the queue is made when the first container is ready."""
        self._closed = False

    @property
    def wanted(self) -> int:
        """Spares to keep under way: as many as one start spans episodes, within the limit."""
        if self._start_sec is None or self._episode_sec is None:
            return 1
        spans = math.ceil(self._start_sec / max(self._episode_sec, 1e-3))
        return max(1, min(self._limit, spans))

    def top_up(self) -> None:
        """Start spares until ``wanted`` are under way (nothing once closed)."""
        with self._lock:
            while not self._closed and len(self._pending) < self.wanted:
                try:
                    self._pending.append(self._starts.submit(self._timed_launch))
                except RuntimeError:  # shut down by a concurrent close()
                    return

    def take(self) -> Future[T] | None:
        """The oldest spare, finished (it may hold an error); its replacement is under way.

        None when no spare is under way (closed, or never topped up).
        """
        now = time.monotonic()
        self._episode_sec = _average(self._episode_sec, now - self._swapped_at)
        with self._lock:
            spare = self._pending.popleft() if self._pending else None
        self.top_up()
        if spare is None:
            return None
        spare.exception()  # waits for it, whatever it ends with
        self._swapped_at = time.monotonic()
        logger.debug(
            "spare taken after %.0f ms; start %.0f ms, episode %.0f ms: %d under way",
            (self._swapped_at - now) * 1000,
            (self._start_sec or 0) * 1000,
            (self._episode_sec or 0) * 1000,
            len(self._pending),
        )
        return spare

    def remove(self, remove: Callable[[], None]) -> None:
        """Run ``remove`` on the removal thread (here, once that is shut down)."""
        try:
            self._removals.submit(remove)
        except RuntimeError:
            remove()

    def wait_started(self) -> list[T]:
        """Wait for every spare under way; the ones that started (tests and ``close``)."""
        with self._lock:
            pending = list(self._pending)
        return [f.result() for f in pending if not f.cancelled() and f.exception() is None]

    def close(self) -> None:
        """Stop starting spares, discard the ones made, finish the removals asked for."""
        with self._lock:
            self._closed = True
            pending, self._pending = list(self._pending), deque()
        for spare in pending:
            spare.cancel()
        self._starts.shutdown(wait=True)
        # Not cancel_futures: a pending removal of a used container must still run.
        self._removals.shutdown(wait=True)
        for spare in pending:
            if not spare.cancelled() and spare.exception() is None:
                self._discard(spare.result())

    def _timed_launch(self) -> T:
        started = time.monotonic()
        spare = self._launch()
        self._start_sec = _average(self._start_sec, time.monotonic() - started)
        return spare


def _average(current: float | None, new: float) -> float:
    return new if current is None else current + SMOOTHING * (new - current)
