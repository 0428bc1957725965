"""What the scheduler hands its actors: an episode to run, and one in flight.

The pipeline (``crabray.cluster.actors.pipeline``) queues episodes behind one another
on an actor, so these records live beside it, below the scheduler that makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from crabray.agents import AgentSpec
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.core.result import utcnow


class SweepItem(BaseModel):
    """One episode to run: an agent, a task, a repetition, an attempt."""

    task_id: str
    agent: AgentSpec
    epoch: int = 0
    attempt: int = 0


@dataclass
class InFlight:
    """An episode sent to its actors, with what the driver needs to finish or end it."""

    item: SweepItem
    submitted: float
    deadline: float | None
    started_at: datetime = field(default_factory=utcnow)
    actors: dict[str, tuple[SandboxSpec, Any]] = field(default_factory=dict)
    cancelled: bool = False
    abandoned: bool = False
    """Its kind lost every host; its actors were killed to end it."""
    node_call: Any = None
    """The host actor's ``node`` reference: where the episode ran, even if it never returns."""
    placed: bool = False
    """Ray has placed every actor of it (``hosts.HostWatch.check_placement``, in the sweep)."""
    unplaced: str | None = None
    """Why it was given up: its actors were not placed in time."""
    queued: bool = False
    """A follower: sent to its actor behind the episode running there (``pipeline``)."""
    behind: Any = None
    """A follower's: the reset queued before it on its actor (its time starts after it);
    None when its own call resets the sandbox."""
    reset_seen: bool = True
    """Whether the driver has seen ``behind`` end (the deadline was then restarted)."""

    @property
    def host(self) -> Any:
        """The actor running the episode (the one holding its first environment)."""
        (_, actor), *_ = self.actors.values()
        return actor
