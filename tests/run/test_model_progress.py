"""What the progress display says of a model limiter, from the state the limiter reports.

The whole path (a real run, its limiter actor, the line on the terminal) is in
``tests/agents/test_model_limiter_run.py``; here, the wording of each case.
"""

from __future__ import annotations

from crabray.agents.model_gate import NO_CAP
from crabray.agents.model_limits import LimiterState
from crabray.cluster.sweep.progress import SweepProgress
from crabray.run.model_progress import load_of


def state(limit: float, in_flight: int, waiting: int = 0) -> LimiterState:
    return LimiterState(
        limit=limit, in_flight=in_flight, waiting=waiting, granted=0, rate_limited=0,
        server_errors=0, decreases=0, paused_sec=0.0,
    )  # fmt: skip


def test_the_line_gives_the_calls_the_adaptive_limit_lets_through() -> None:
    progress = SweepProgress(total=9, in_flight=6)
    progress.models = [load_of("gpt-4o", state(7.75, 7, 12)), load_of("mini", state(0.5, 1))]
    assert progress.models_line() == (
        "model gpt-4o: limit 7, 7 in flight, 12 waiting; model mini: limit 1, 1 in flight"
    )


def test_a_limiter_of_requests_per_minute_only_has_no_call_limit() -> None:
    assert load_of("local", state(NO_CAP, 3)).line() == "model local: no call limit, 3 in flight"


def test_without_limiters_the_line_is_empty() -> None:
    assert SweepProgress(total=1).models_line() == ""
