"""The episode job and its outcome cross the actor call as bytes, and come back the same."""

from __future__ import annotations

import pytest

from crabray.cluster.actors.episode_call import CallOutcome, EpisodeCall, pack, unpack
from crabray.core.result import EpisodeRecord, EpisodeResult, StepRecord, TerminationReason


def outcome() -> CallOutcome:
    result = EpisodeResult(
        run_id="r", suite="s", task_id="t", agent="a", termination_reason=TerminationReason.SUCCESS
    )
    step = StepRecord(
        episode_id=result.episode_id,
        run_id="r",
        task_id="t",
        agent="a",
        step=0,
        env="box",
        action="run_command",
        arguments_json='{"command": "true"}',
    )
    record = EpisodeRecord(result=result, steps=[step], artifacts={"artifacts/x.png": b"\x89PNG"})
    return CallOutcome(record=record, broken_envs=["box"])


def test_an_outcome_comes_back_equal() -> None:
    sent = outcome()
    assert unpack(pack(sent), CallOutcome) == sent


def test_bytes_of_another_model_are_refused() -> None:
    with pytest.raises(TypeError, match="expected a packed EpisodeCall, got CallOutcome"):
        unpack(pack(outcome()), EpisodeCall)
