"""The counts a sweep keeps while it runs, shared by the scheduler and the status board.

Its own module so that the scheduler, which updates the counts, and
``status``, which publishes them, both import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelLoad:
    """One model endpoint's limiter as the progress display shows it.

    The run fills these from its model limiters (``crabray.agents.model_gate``); the
    sweep layer only carries them, so it needs nothing of the agents layer.
    """

    model: str
    limit: int | None
    """Calls in flight the limiter allows now (its adaptive limit); None when it caps
    only requests or tokens per minute."""
    in_flight: int
    waiting: int
    """Calls waiting for a grant."""

    def line(self) -> str:
        """E.g. ``model gpt-4o: limit 8, 3 in flight, 5 waiting``."""
        limit = "no call limit" if self.limit is None else f"limit {self.limit}"
        waiting = f", {self.waiting} waiting" if self.waiting else ""
        return f"model {self.model}: {limit}, {self.in_flight} in flight{waiting}"


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
    level: int | None = None
    """With ``--concurrency auto``: the episodes the controller lets run at once now (the
    sum of its levels per host kind); None with a fixed concurrency."""
    ceiling: int | None = None
    """With ``--concurrency auto``: the most the cluster's slots allow (the levels' bound)."""
    held_by_models: bool = False
    """With ``--concurrency auto``: a model limiter queued calls at the levels' last
    observation, so no level rose (more sandboxes would only wait for the model)."""
    models: list[ModelLoad] = field(default_factory=list)
    """The run's model limiters as last read (at most once a second); empty when its
    agents call no model with limits."""

    def in_flight_line(self) -> str:
        """What the progress display says of the episodes in flight with ``--concurrency
        auto``, e.g. ``in flight 6 (auto, max 8 of 12)``: the level now, of the most the
        slots allow, and ``, held: model queues`` while a model limiter's queue holds it.
        Empty with a fixed concurrency (the display stays as it was)."""
        if self.level is None:
            return ""
        held = ", held: model queues" if self.held_by_models else ""
        return f"in flight {self.in_flight} (auto, max {self.level} of {self.ceiling}{held})"

    def models_line(self) -> str:
        """The model limiters beside the sandboxes, e.g. ``model gpt-4o: limit 8, 3 in
        flight``; empty without limiters."""
        return "; ".join(load.line() for load in self.models)


__all__ = ["ModelLoad", "SweepProgress"]
