"""The counts a sweep keeps while it runs, shared by the scheduler and the status board.

Its own module so that the scheduler, which updates the counts, and
``status``, which publishes them, both import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SweepProgress:
    """Counts the driver shows while a sweep runs."""

    total: int
    done: int = 0
    successes: int = 0
    retries: int = 0
    infra_failures: int = 0
    timeouts: int = 0
    in_flight: int = 0
    cancelled: int = 0
    """Episodes the run's interrupt stopped: their rows are on disk, a resume reruns them."""


__all__ = ["SweepProgress"]
