"""Builders of episode records for the results tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from crabray.core.result import EpisodeRecord, EpisodeResult, StepRecord, TerminationReason

BASE_TIME = datetime(2026, 11, 23, 7, 53, 0, 123456, tzinfo=UTC)


def build_record(
    task_id: str,
    *,
    run_id: str = "run-a",
    agent: str = "agent-1",
    epoch: int = 0,
    attempt: int = 0,
    reason: TerminationReason = TerminationReason.SUCCESS,
    n_steps: int = 2,
    finished_offset_sec: float = 0.0,
    **fields: object,
) -> EpisodeRecord:
    """A finished episode with ``n_steps`` one-call steps; ``fields`` override result fields."""
    result = EpisodeResult(
        run_id=run_id,
        suite="tasks/demo",
        task_id=task_id,
        agent=agent,
        epoch=epoch,
        attempt=attempt,
        termination_reason=reason,
        success=reason is TerminationReason.SUCCESS,
        steps=n_steps,
        started_at=BASE_TIME,
        finished_at=BASE_TIME + timedelta(seconds=60 + finished_offset_sec),
        **fields,
    )
    steps = [
        StepRecord(
            episode_id=result.episode_id,
            run_id=run_id,
            task_id=task_id,
            agent=agent,
            epoch=epoch,
            attempt=attempt,
            step=index,
            env="root",
            action="shell",
            arguments_json=f'{{"cmd": "echo {index}"}}',
            timestamp=BASE_TIME + timedelta(seconds=index),
        )
        for index in range(n_steps)
    ]
    return EpisodeRecord(result=result, steps=steps)


RecordFactory = Callable[..., EpisodeRecord]


@pytest.fixture
def make_record() -> RecordFactory:
    """``build_record``: ``make_record(task_id, attempt=1, reason=..., **result_fields)``."""
    return build_record
