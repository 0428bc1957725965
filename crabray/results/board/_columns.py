"""The columns of leaderboards and breakdowns: what they read and what they return, in order.

A leaf module, so that the Arrow implementation (``arrow_board``), the pandas
front end (``leaderboard``) and run comparisons (``compare``) share one list
without importing each other in a circle.
"""

from __future__ import annotations

DEFAULT_BY = ("agent", "model")
"""Who a leaderboard row is about; add ``"suite"`` for a row per suite too."""

STAT_COLUMNS = (
    "episodes",
    "successes",
    "success_rate",
    "success_ci_low",
    "success_ci_high",
    "verified_success_rate",
    "unverified_passes",
    "unknown_trust_passes",
    "mean_score",
    "score_se",
    "mean_completeness",
    "mean_steps",
    "tokens_in",
    "tokens_out",
    "model_calls",
    "cost_usd",
    "cost_per_success",
    "mean_wall_time_sec",
    "benchmark_errors",
    "infra_errors",
)
"""Statistics of every leaderboard row, in order (after the ``by`` columns)."""

LEADERBOARD_COLUMNS = (*DEFAULT_BY, *STAT_COLUMNS)
"""Columns of ``leaderboard(episodes)``, in order; ``pass@k`` and ``pass^k`` for
k = 1..K follow when tasks were attempted more than once."""

LEADERBOARD_INPUT_COLUMNS = (
    "run_id",
    "suite",
    "task_id",
    "agent",
    "model",
    "termination_reason",
    "attribution",
    "success",
    "score",
    "completeness",
    "steps",
    "tokens_in",
    "tokens_out",
    "model_calls",
    "cost_usd",
    "wall_time_sec",
    "grader_trusted",
)
"""Episode columns that ``leaderboard`` and ``compare_runs`` read (``OPTIONAL_INPUT_COLUMNS``
may be missing from rows made by hand): pass these as ``read_episodes(..., columns=...)`` to
read nothing else (add ``tags`` for a breakdown by tag)."""

OPTIONAL_INPUT_COLUMNS = ("attribution", "grader_trusted")
"""Input columns rows made by hand may lack: ``attribution`` is then derived from
``termination_reason``, and every grade's trust is unknown (no pass is verified)."""

BREAKDOWN_STATS = (
    "episodes",
    "successes",
    "success_rate",
    "success_ci_low",
    "success_ci_high",
    "mean_score",
    "mean_steps",
    "cost_usd",
    "benchmark_errors",
    "infra_errors",
    "share",
)
"""Statistics of every breakdown row (after the ``by`` columns and the group column)."""

BREAKDOWN_INPUT_COLUMNS = (
    "suite",
    "task_id",
    "termination_reason",
    "attribution",
    "success",
    "score",
    "steps",
    "cost_usd",
    "grader_trusted",
)
"""Episode columns a breakdown reads besides its ``by`` columns and the column it breaks down
(``suite`` and ``task_id`` make the tasks its intervals are clustered by)."""

TAG = "tag"
"""Breakdown column name for tags: one row per tag value (``tags`` exploded)."""

INT_COLUMNS = (
    "episodes",
    "successes",
    "tokens_in",
    "tokens_out",
    "model_calls",
    "benchmark_errors",
    "infra_errors",
    "unverified_passes",
    "unknown_trust_passes",
)
"""Statistics that are counts (int64); the others are float64."""

TASK_SAMPLE = ("run_id", "suite", "task_id")
"""The columns that make one task sample of pass@k: a task's epochs within a run."""

TASK_CLUSTER = ("suite", "task_id")
"""The columns that make one task for intervals clustered by task: its episodes (epochs, and
the same task in several runs) are not independent of each other."""
