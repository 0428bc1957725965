"""``RetryPolicy``: how often an operation is tried, and how long to wait in between.

One policy for every retry loop of crabray, as data: the scheduler trying
again an episode whose infrastructure failed (``crabray.cluster.sweep.scheduler``),
and the model client trying again a request that hit a rate limit, a server
error or a dropped connection (``crabray.agents.llm_client``). The policy says
how many tries and how long the waits are; what is worth another try is said
where the policy is used, beside it (the scheduler: infrastructure failures
only, as the design fixes it; the client: ``ClientConfig.retry_statuses`` and
``retry_connection_errors``).
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field


class RetryPolicy(BaseModel):
    """How many tries, and the exponential backoff between them.

    The wait before try ``n`` (1 for the first retry) is ``backoff_initial_sec *
    backoff_multiplier ** (n - 1)``, capped at ``backoff_max_sec``, plus up to
    ``jitter_fraction`` of it at random, so that parallel clients hitting the same
    limit do not retry in lockstep.

    Example:
        >>> policy = RetryPolicy(max_attempts=4, backoff_initial_sec=0.5, backoff_max_sec=2)
        >>> [policy.backoff_sec(n) for n in range(1, policy.max_attempts)]
        [0.5, 1.0, 2.0]
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(
        default=3, gt=0, description="Tries in all, the first included; 1 never retries."
    )
    backoff_initial_sec: float = Field(
        default=1.0, ge=0, description="Seconds to wait before the first retry."
    )
    backoff_multiplier: float = Field(
        default=2.0, ge=1, description="Each further retry waits this many times longer."
    )
    backoff_max_sec: float = Field(
        default=30.0, ge=0, description="Longest wait between two tries, before jitter."
    )
    jitter_fraction: float = Field(
        default=0.0, ge=0, le=1, description="Up to this fraction of a wait is added at random."
    )

    def backoff_sec(self, attempt: int) -> float:
        """Seconds to wait before try number ``attempt`` (0 is the first try, 1 the first retry)."""
        if attempt <= 0:
            return 0.0
        wait = min(
            self.backoff_initial_sec * self.backoff_multiplier ** (attempt - 1),
            self.backoff_max_sec,
        )
        if self.jitter_fraction:
            wait += random.uniform(0, wait * self.jitter_fraction)
        return wait
