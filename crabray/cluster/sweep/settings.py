"""How a sweep runs: the run's execution settings, and the scheduler's own knobs.

``Execution`` is the part of a run's description (``crabray.run.RunSpec``)
that says how its episodes run: how many at once, on which cluster, pooled or
not, how often an episode is tried. It is declared here, by the layer that
uses it, and the run embeds it: each field and its default is written once.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from crabray.cluster.sweep.adaptive import Concurrency
from crabray.core.retry import RetryPolicy
from crabray.core.setting import setting
from crabray.episode.limits import EpisodeLimits


class Execution(BaseModel):
    """How a run's episodes run: concurrency, the cluster, pooling, warm-up, tries."""

    model_config = ConfigDict(extra="forbid", title="Execution")

    concurrency: Concurrency = Field(
        default=2,
        json_schema_extra=setting("--concurrency", resume="kept"),
        description="Episodes in flight at most. It also caps the environment actors a pool "
        "keeps per sandbox configuration, and sizes a local Ray instance: 2 x concurrency "
        "slots per host kind (unless local_slots) and at most concurrency x the widest "
        "task's environments CPUs (crabray.cluster.runtime.ray_runtime.local_cpus). "
        "'auto': per host kind, a level that starts at 2 and rises while the hosts have CPU "
        "and memory to spare, up to the kind's slots, and falls on sandbox start failures, "
        "start latency and memory pressure (crabray.cluster.sweep.adaptive); each sandbox "
        "takes its memory as Ray's memory resource; a pool keeps as many actors as the "
        "slots allow; a local Ray instance gets 2 x its cores slots per host kind (unless "
        "local_slots) and at most cores CPUs.",
    )
    address: str | None = Field(
        default=None,
        json_schema_extra=setting("--address"),
        description="Ray address; local Ray when unset.",
    )
    max_attempts: int = Field(
        default=RetryPolicy.model_fields["max_attempts"].default,
        gt=0,
        json_schema_extra=setting("--max-attempts", resume="kept"),
        description="Tries of an episode whose infrastructure fails.",
    )
    pooling: bool = Field(
        default=True,
        json_schema_extra=setting("--pool/--no-pool", resume="kept"),
        description="Reuse environments across episodes.",
    )
    warm: int = Field(
        default=0,
        ge=0,
        json_schema_extra=setting("--warm", resume="kept"),
        description="Environments per configuration started ahead.",
    )
    placement_timeout_sec: float = Field(
        default=120.0,
        gt=0,
        description="How long an episode's sandboxes may wait for the cluster to place them "
        "(a slot held elsewhere) before the episode fails as infrastructure (env_error).",
    )
    local_slots: int | None = Field(
        default=None,
        gt=0,
        json_schema_extra=setting("--local-slots", resume="kept"),
        description="Slots of each kind a local Ray instance hosts; 2 x concurrency when unset "
        "(with concurrency 'auto': 2 x the machine's cores).",
    )


class SchedulerSettings(BaseModel):
    """What the scheduler is given: the run's id, its execution settings and episode
    budgets (parts of the run's description), and the scheduler's own knobs."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    execution: Execution = Field(default_factory=Execution)
    limits: EpisodeLimits = Field(
        default_factory=EpisodeLimits, description="Budgets over every task's own."
    )
    backoff: RetryPolicy = Field(
        default_factory=RetryPolicy,
        description="The waits between tries of an episode whose infrastructure failed (its "
        "max_attempts is the execution's: ``retry``).",
    )
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

    @property
    def retry(self) -> RetryPolicy:
        """How an episode whose infrastructure failed is tried again; agent failures never are."""
        return self.backoff.model_copy(update={"max_attempts": self.execution.max_attempts})
