"""How each model did over a run: calls, 429s, retries, latency, tokens, cost, waits.

What ``crabray run`` prints after its leaderboard when its agents called
models. Every attempt counts (an attempt that failed on the model's rate
limits met them all the same), read from the episode rows' model columns.
Rows written before the columns existed read as null and count nothing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from crabray.results.store.dataset import read_every_attempt

_COLUMNS = [
    "model",
    "model_calls",
    "model_retries",
    "model_rate_limited",
    "model_latencies_sec",
    "model_wait_sec",
    "tokens_in",
    "tokens_out",
    "cost_usd",
]


class ModelUsage(BaseModel):
    """One model's traffic over a run, every attempt of every episode included."""

    model: str
    calls: int = Field(description="Calls answered.")
    rate_limited: int = Field(description="Requests answered 429.")
    retries: int = Field(description="Requests sent again after a failure.")
    latency_p50_sec: float | None = Field(description="Median call latency; None unknown.")
    latency_p95_sec: float | None = Field(description="95th percentile call latency.")
    wait_sec: float = Field(description="Seconds agents waited for the limiter and retries.")
    tokens_in: int
    tokens_out: int
    cost_usd: float

    @property
    def rate_limited_per_100(self) -> float:
        """429s per 100 requests sent (answered calls and their retries)."""
        sent = self.calls + self.retries
        return 100.0 * self.rate_limited / sent if sent else 0.0


def model_usage(out_dir: str | Path, run_id: str) -> list[ModelUsage]:
    """Each model's usage over run ``run_id``, by model name; empty when no agent called one.

    Raises:
        ResultsError: The run's rows cannot be read.
    """
    table = read_every_attempt(out_dir, run_id, _COLUMNS)
    rows = table.to_pylist()
    by_model: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["model"] and (row["model_calls"] or row["model_rate_limited"]):
            by_model.setdefault(str(row["model"]), []).append(row)
    return [_usage(model, group) for model, group in sorted(by_model.items())]


def _usage(model: str, rows: list[dict[str, Any]]) -> ModelUsage:
    latencies = sorted(float(x) for row in rows for x in (row["model_latencies_sec"] or []))
    return ModelUsage(
        model=model,
        calls=_sum(rows, "model_calls"),
        rate_limited=_sum(rows, "model_rate_limited"),
        retries=_sum(rows, "model_retries"),
        latency_p50_sec=percentile(latencies, 50),
        latency_p95_sec=percentile(latencies, 95),
        wait_sec=sum(float(row["model_wait_sec"] or 0.0) for row in rows),
        tokens_in=_sum(rows, "tokens_in"),
        tokens_out=_sum(rows, "tokens_out"),
        cost_usd=sum(float(row["cost_usd"] or 0.0) for row in rows),
    )


def _sum(rows: list[dict[str, Any]], column: str) -> int:
    return sum(int(row[column] or 0) for row in rows)


def percentile(ordered: list[float], share: float) -> float | None:
    """The nearest-rank percentile ``share`` (0-100) of sorted values; None when empty.

    Example:
        >>> percentile([0.1, 0.2, 0.3, 0.4], 50)
        0.2
    """
    if not ordered:
        return None
    rank = max(math.ceil(share / 100 * len(ordered)), 1)
    return ordered[rank - 1]
