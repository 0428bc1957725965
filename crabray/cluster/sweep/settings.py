"""The scheduler's knobs: what a run passes it from its settings."""

from __future__ import annotations

from pydantic import BaseModel, Field

from crabray.cluster.sweep.adaptive import Concurrency
from crabray.core.retry import RetryPolicy
from crabray.episode.limits import EpisodeLimits


class SchedulerSettings(BaseModel):
    """Knobs of the scheduler.

    The run-level ones have no default here: a run passes them from its
    settings (``crabray.run.settings.RunSettings``), where each default is written.
    """

    run_id: str
    concurrency: Concurrency = Field(
        description="Episodes in flight at most, or 'auto': a level per host kind that "
        "crabray.cluster.sweep.adaptive.LevelController raises and lowers."
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
        "(crabray.cluster.actors.pipeline).",
    )
