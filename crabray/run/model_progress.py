"""The run's model limiters on its progress display, beside the sandboxes.

The scheduler tells the run's ``on_progress`` of its counts after every batch
of finished episodes; ``ModelProgress`` stands between the two and adds what
each model limiter is doing (``SweepProgress.models``): its current limit, the
calls in flight and those waiting. The limiters are asked at most once a
second (one actor call each), so a sweep of short episodes pays for no more.

It lives in the run layer because it reads the agents layer's limiters and
fills the sweep layer's counts, and neither of those layers may import the
other.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from crabray.agents.model_gate import NO_CAP, ModelLimiters
from crabray.agents.model_limits import LimiterState
from crabray.cluster.sweep.progress import ModelLoad, SweepProgress

logger = logging.getLogger(__name__)

REFRESH_SEC = 1.0
"""Least time between two reads of the limiters' states."""


class ModelProgress:
    """An ``on_progress`` that fills in the model limiters' states, then tells ``forward``.

    Args:
        limiters: The run's limiters (none: the progress goes on unchanged).
        forward: The run's own progress callback, if any.
        clock: Seconds, monotonic (a counter in tests).
    """

    def __init__(
        self,
        limiters: ModelLimiters,
        forward: Callable[[SweepProgress], None] | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limiters = limiters
        self.forward = forward
        self.clock = clock
        self._loads: list[ModelLoad] = []
        self._read_at = -math.inf

    def __call__(self, progress: SweepProgress) -> None:
        if self.limiters.actors:
            # With no episode in flight (the run's last count), what the limiters say now.
            progress.models = self._current(fresh=progress.in_flight == 0)
        if self.forward is not None:
            self.forward(progress)

    def _current(self, *, fresh: bool) -> list[ModelLoad]:
        """The limiters' states, read again when the last read is ``REFRESH_SEC`` old
        (or ``fresh`` is asked).

        A limiter that cannot be read (its actor restarting) leaves the last read
        shown: the display is no reason to stop a run.
        """
        now = self.clock()
        if now - self._read_at < REFRESH_SEC and not fresh:
            return self._loads
        self._read_at = now
        from ray.exceptions import RayError

        try:
            states = self.limiters.states()
        except RayError as exc:
            logger.debug("could not read the model limiters' states: %s", exc)
            return self._loads
        self._loads = [
            load_of(self.limiters.models.get(name, name), state) for name, state in states.items()
        ]
        return self._loads


def load_of(model: str, state: LimiterState) -> ModelLoad:
    """A limiter's state as the display shows it: the calls its limit lets through now
    (the adaptive limit rounded down, at least 1; none for a limiter that caps only
    requests or tokens per minute)."""
    limit = None if state.limit >= NO_CAP else max(math.floor(state.limit), 1)
    return ModelLoad(model=model, limit=limit, in_flight=state.in_flight, waiting=state.waiting)
