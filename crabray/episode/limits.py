"""The budgets a run sets for every episode, over each task's own: defined once.

A run's description carries them (``crabray.run.RunSpec``), the scheduler's
and the episode's settings embed them, and the rule that a run's budget wins
over the task's is here, for the driver's deadlines and the episode's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from crabray.core.setting import setting

if TYPE_CHECKING:
    from crabray.core import BenchmarkConfig, Task


class EpisodeLimits(BaseModel):
    """Step and time budgets that override every task's own when set."""

    max_steps: int | None = Field(
        default=None,
        gt=0,
        json_schema_extra=setting("--max-steps", resume="fixed"),
        description="Overrides every task's step budget.",
    )
    time_limit_sec: float | None = Field(
        default=None,
        gt=0,
        json_schema_extra=setting("--time-limit-sec", resume="fixed"),
        description="Overrides every task's time budget, in seconds (else the task's, "
        "else the suite's, else the default episode time limit).",
    )

    def steps_for(self, benchmark: BenchmarkConfig, task: Task) -> int:
        """The step budget of ``task``: the run's, else the task's or its suite's."""
        return self.max_steps or benchmark.step_limit_of(task)

    def time_limit_for(self, benchmark: BenchmarkConfig, task: Task) -> float:
        """The time budget of ``task`` in seconds: the run's, else the task's or its suite's."""
        return self.time_limit_sec or benchmark.time_limit_of(task)
