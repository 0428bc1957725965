"""What a sweep is made of: its items, the scheduler's knobs, an episode in flight."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from crabray.agents import AgentSpec
from crabray.cluster.adaptive import Concurrency
from crabray.cluster.sandbox import SandboxSpec
from crabray.core.result import utcnow
from crabray.core.retry import RetryPolicy
from crabray.episode.limits import EpisodeLimits


class SweepItem(BaseModel):
    """One episode to run: an agent, a task, a repetition, an attempt."""

    task_id: str
    agent: AgentSpec
    epoch: int = 0
    attempt: int = 0


class SchedulerSettings(BaseModel):
    """Knobs of the scheduler.

    The run-level ones have no default here: a run passes them from its
    settings (``crabray.run.settings.RunSettings``), where each default is written.
    """

    run_id: str
    concurrency: Concurrency = Field(
        description="Episodes in flight at most, or 'auto': a level per host kind that "
        "crabray.cluster.adaptive.LevelController raises and lowers."
    )
    retry: RetryPolicy = Field(
        default_factory=RetryPolicy,
        description="Tries of an episode whose infrastructure failed; agent failures never retry.",
    )
    limits: EpisodeLimits = Field(description="Budgets over every task's own.")
    pooling: bool = Field(description="Reuse environments across episodes.")
    warm: int = Field(ge=0, description="Environments started per configuration ahead.")
    timeout_grace_sec: float = Field(
        default=30.0,
        ge=0,
        description="Past a task's time limit before the driver cancels it: a backstop, the "
        "episode ends itself at its limit (crabray.episode.watch_episode).",
    )
    kill_grace_sec: float = Field(
        default=5.0, ge=0, description="After cancelling, before the episode's actors are killed."
    )
    stop_grace_sec: float = Field(
        default=15.0,
        ge=0,
        description="Interrupted: how long the episodes in flight get to end and report what "
        "they did before their actors are killed.",
    )
    host_wait_sec: float = Field(
        default=60.0, ge=0, description="How long to wait for a lost host kind to come back."
    )
    placement_timeout_sec: float = Field(
        default=120.0,
        gt=0,
        description="How long an episode's environment actors may wait for Ray to place them "
        "(a slot held elsewhere) before the episode fails as infrastructure (env_error).",
    )
    reserve_after_sec: float = Field(
        default=5.0,
        ge=0,
        description="How long an episode needing several sandboxes at once may wait while "
        "episodes behind it take its kinds' slots one at a time; then those slots are kept "
        "for it, so a stream of single-sandbox episodes cannot starve it.",
    )
    pipeline: bool = Field(
        default=True,
        description="Queue a pooled actor's next episode behind its running one "
        "(crabray.cluster.pipeline).",
    )


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
    """Ray has placed every actor of it (``Scheduler._check_placement``)."""
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
