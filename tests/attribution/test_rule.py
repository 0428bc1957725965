"""The one rule of attribution, and rows written before its column existed."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from crabray.core.result import Attribution, TerminationReason, attribution_of
from crabray.results import ResultSink, finished_keys, leaderboard, read_episodes
from crabray.run.outcomes import causes_not_the_agents
from tests.results.conftest import build_record


@pytest.mark.parametrize("reason", list(TerminationReason))
def test_every_termination_reason_is_attributed(reason: TerminationReason) -> None:
    assert attribution_of(reason, None) in set(Attribution)


@pytest.mark.parametrize(
    ("reason", "error_type", "whom"),
    [
        ("agent_error", "NoSolutionError", Attribution.BENCHMARK),
        ("agent_error", "ModelUnreachableError", Attribution.INFRASTRUCTURE),
        ("agent_error", "AuthenticationError", Attribution.INFRASTRUCTURE),
        ("agent_error", "ModelAPIError", Attribution.AGENT),  # a 4xx: the agent's request
        ("agent_error", "ValueError", Attribution.AGENT),
        ("sandbox_error", "SandboxBrokenError", Attribution.AGENT),
        ("setup_error", "SandboxConfigError", Attribution.BENCHMARK),
        ("setup_error", "SandboxHostError", Attribution.INFRASTRUCTURE),  # bwrap, an image
        # An evaluator may raise on the state the agent left: the agent's, unless provably not.
        ("evaluator_error", "EvaluatorError", Attribution.AGENT),
        ("evaluator_error", "EvaluatorFaultError", Attribution.BENCHMARK),
        ("env_error", "SandboxError", Attribution.INFRASTRUCTURE),
        # The evidence is read for agent_error only: a timeout stays the agent's.
        ("timeout", "ModelUnreachableError", Attribution.AGENT),
    ],
)
def test_the_evidence_of_the_error(reason: str, error_type: str, whom: Attribution) -> None:
    assert attribution_of(reason, error_type) is whom


def test_rows_written_before_the_column_get_it_when_read(tmp_path: Path) -> None:
    records = [
        build_record("solved"),
        build_record("setup", reason=TerminationReason.SETUP_ERROR, error_type="ActionError"),
        build_record(
            "outage",
            reason=TerminationReason.AGENT_ERROR,
            error_type="ModelUnreachableError",
            error="model API at http://127.0.0.1:9/v1: request failed: ConnectError",
        ),
    ]
    ResultSink(tmp_path, "run-a").write(records)
    for part in (tmp_path / "episodes").glob("**/part-*.parquet"):
        old = pq.read_table(part)
        pq.write_table(old.drop_columns(["attribution"]), part)
        assert "attribution" not in pq.read_schema(part).names

    episodes = read_episodes(tmp_path).set_index("task_id")
    assert episodes["attribution"].to_dict() == {
        "solved": "agent",
        "setup": "benchmark",
        "outage": "infrastructure",
    }
    (row,) = leaderboard(read_episodes(tmp_path)).to_dict("records")
    assert (row["episodes"], row["benchmark_errors"], row["infra_errors"]) == (1, 1, 1)
    causes = causes_not_the_agents(tmp_path, "run-a")
    assert [(c.attribution, c.termination_reason, c.episodes) for c in causes] == [
        (Attribution.BENCHMARK, "setup_error", 1),
        (Attribution.INFRASTRUCTURE, "agent_error", 1),
    ]
    assert causes[1].first_error is not None and "ConnectError" in causes[1].first_error


def test_a_resume_runs_the_infrastructures_episodes_again_not_the_benchmarks(
    tmp_path: Path,
) -> None:
    ResultSink(tmp_path, "run-a").write(
        [
            build_record("solved"),
            build_record("failed", reason=TerminationReason.AGENT_FAIL),
            build_record("typo", reason=TerminationReason.SETUP_ERROR),
            build_record("lost", reason=TerminationReason.ENV_ERROR),
            build_record(
                "outage", reason=TerminationReason.AGENT_ERROR, error_type="ModelUnreachableError"
            ),
        ]
    )
    done = {task for _, task, _ in finished_keys(tmp_path, "run-a")}
    assert done == {"solved", "failed", "typo"}
