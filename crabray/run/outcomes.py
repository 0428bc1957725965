"""What a run's episodes that were not the agent's doing were, grouped by cause.

The end of ``crabray run`` prints these (counts, the first full message) and
exits 1 when there are any: a run whose episodes are not all attributed to the
agent (``crabray.core.result.attribution_of``) has not measured the agent on
all of its suite, and a script running it must be able to tell.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from crabray.core.result import Attribution
from crabray.results.store.dataset import read_episode_table

_COLUMNS = ["agent", "task_id", "attribution", "termination_reason", "error_type", "error"]


class Cause(BaseModel):
    """Episodes of a run that ended the same way, not by the agent's doing."""

    attribution: Attribution = Field(description="'benchmark' or 'infrastructure'.")
    termination_reason: str
    error_type: str | None = None
    episodes: int = Field(description="How many of the run's episodes ended this way.")
    first_agent: str = Field(description="The agent of the first such episode.")
    first_task: str = Field(description="The task of the first such episode.")
    first_error: str | None = Field(
        default=None, description="The first such episode's error message, in full."
    )

    @property
    def label(self) -> str:
        """How the cause reads in one line: the reason, and the error's type when there is one."""
        if self.error_type is None:
            return self.termination_reason
        return f"{self.termination_reason} ({self.error_type})"


def causes_not_the_agents(out_dir: str | Path, run_id: str) -> list[Cause]:
    """The run's episodes attributed to the benchmark or the infrastructure, by cause.

    One ``Cause`` per (attribution, termination reason, error type), the
    benchmark's first, then by how many episodes each has; the latest attempt
    of each episode counts (an ``env_error`` retried to a success is not here).

    Raises:
        ResultsError: The run's rows cannot be read.
    """
    table = read_episode_table(out_dir, run_id, _COLUMNS, ordered=True)
    rows = zip(*(table.column(name).to_pylist() for name in _COLUMNS), strict=True)
    found: dict[tuple[str, str, str | None], Cause] = {}
    for agent, task, whom, reason, error_type, error in rows:
        if whom == Attribution.AGENT.value:
            continue
        key = (whom, reason, error_type)
        if key in found:
            found[key].episodes += 1
            continue
        found[key] = Cause(
            attribution=Attribution(whom),
            termination_reason=reason,
            error_type=error_type,
            episodes=1,
            first_agent=agent,
            first_task=task,
            first_error=error,
        )
    order = {Attribution.BENCHMARK: 0, Attribution.INFRASTRUCTURE: 1}
    return sorted(found.values(), key=lambda c: (order.get(c.attribution, 2), -c.episodes))
