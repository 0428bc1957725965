"""A run's budget (``--max-cost-usd``, ``--max-tokens``): what every agent and node spent.

Spending is read from the rows: what the run's episodes already on disk cost
(every attempt, a resume's too), then each batch of episodes as it comes back
to the scheduler, before more start (and before it is written). Once a
budget is reached no new episode starts; the episodes in flight finish and are
written whole, so a run may go past its budget by what those cost (stopping
them mid-way would throw away the tokens already paid for). The run then ends
``stopped``; ``crabray run --resume RUN --max-cost-usd HIGHER`` goes on with the
episodes that did not start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from crabray.core.errors import ConfigError
from crabray.core.result import EpisodeRecord
from crabray.results import run_spending

logger = logging.getLogger(__name__)


class Spending(BaseModel):
    """What a run's episodes have cost: USD from the agents' price tables, and tokens."""

    cost_usd: float = Field(default=0.0, ge=0)
    tokens: int = Field(default=0, ge=0, description="Prompt and completion tokens.")


class BudgetReached(BaseModel):
    """Why a run stopped starting episodes: the budget named, its limit, and the spending."""

    flag: str = Field(description="The option that set it: --max-cost-usd or --max-tokens.")
    limit: float
    spent: Spending

    def describe(self) -> str:
        """The reason as a line: which budget, its limit, and what was spent."""
        if self.flag == "--max-tokens":
            return f"{self.spent.tokens:,} tokens used of a {int(self.limit):,}-token budget"
        return f"${self.spent.cost_usd:.4f} spent of a ${self.limit:g} budget"


class RunBudget:
    """The run's budgets and its spending so far, told of every batch of rows written.

    Args:
        max_cost_usd: The run's limit in USD, if any.
        max_tokens: The run's limit in tokens, if any.
        spent: What the run had spent before this process (a resume's earlier rows).
    """

    def __init__(
        self, max_cost_usd: float | None, max_tokens: int | None, spent: Spending | None = None
    ) -> None:
        self.max_cost_usd = max_cost_usd
        self.max_tokens = max_tokens
        self.spent = spent or Spending()
        self.on_reached: Callable[[], None] = lambda: None
        """Called once, when a budget is first reached (the scheduler's ``drain``)."""
        self._told = False

    @classmethod
    def of_run(
        cls, out_dir: str | Path, run_id: str, max_cost_usd: float | None, max_tokens: int | None
    ) -> RunBudget:
        """The budget of ``run_id``, its spending read from the rows already on disk."""
        if max_cost_usd is None and max_tokens is None:
            return cls(None, None)
        cost, tokens = run_spending(out_dir, run_id)
        return cls(max_cost_usd, max_tokens, Spending(cost_usd=cost, tokens=tokens))

    @property
    def reached(self) -> BudgetReached | None:
        """The budget reached, if one is (the cost one first)."""
        if self.max_cost_usd is not None and self.spent.cost_usd >= self.max_cost_usd:
            return BudgetReached(flag="--max-cost-usd", limit=self.max_cost_usd, spent=self.spent)
        if self.max_tokens is not None and self.spent.tokens >= self.max_tokens:
            return BudgetReached(flag="--max-tokens", limit=self.max_tokens, spent=self.spent)
        return None

    def check_room(self, run_id: str) -> None:
        """Refuse to start a run whose budget is already spent: nothing could run.

        Raises:
            ConfigError: A budget is reached; the message says what to give instead.
        """
        reached = self.reached
        if reached is not None:
            raise ConfigError(
                f"run {run_id} has no budget left ({reached.describe()}); give a higher "
                f"{reached.flag} to go on",
                field=reached.flag,
            )

    def charge(self, records: list[EpisodeRecord]) -> None:
        """Add what ``records`` (just finished) cost; past a budget, say so once."""
        for record in records:
            result = record.result
            self.spent.cost_usd += result.cost_usd
            self.spent.tokens += result.tokens_in + result.tokens_out
        reached = self.reached
        if reached is not None and not self._told:
            self._told = True
            logger.warning("budget reached (%s): no new episode starts", reached.describe())
            self.on_reached()
