"""Faults of the suite itself are the benchmark's: not counted against the agent, shown, exit 1."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task, evaluator
    from crabray.actions import FILE_ACTIONS, path_exists, write_file

    ENV = EnvironmentConfig(name="box", action_space=FILE_ACTIONS)


    @evaluator
    def has_lines(path, n) -> bool:
        '''Plain Python, run in the sandbox: at least n lines in path.'''
        with open(path) as handle:
            return len(handle.read().splitlines()) >= n


    faults = BenchmarkConfig(
        name="faults",
        environments=[ENV],
        tasks=[
            Task(
                id="fine",
                description="write done.txt",
                evaluator=path_exists(path="done.txt"),
                solution=[write_file(path="done.txt", content="x")],
            ),
            Task(
                id="no-solution",
                description="keep ready.txt (setup already made it)",
                setup=[write_file(path="ready.txt", content="x")],
                evaluator=path_exists(path="ready.txt"),
            ),
            Task(
                id="bad-argument",
                description="write two lines to notes.txt",
                evaluator=has_lines(path="notes.txt", n="2"),
                solution=[write_file(path="notes.txt", content="a\\nb\\n")],
            ),
        ],
    )
    """
)


def test_oracle_without_solution_and_evaluator_type_error_are_the_benchmarks(
    tmp_path: Path, bwrap: str
) -> None:
    suite = tmp_path / "faults.py"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    episodes = read_episodes(out).set_index("task_id")
    assert episodes.loc["fine", "attribution"] == "agent"
    assert episodes.loc["fine", "success"]
    # The untouched state passes, yet an oracle with nothing to replay is not "ok".
    assert episodes.loc["no-solution", "attribution"] == "benchmark"
    assert episodes.loc["no-solution", "error_type"] == "NoSolutionError"
    assert not episodes.loc["no-solution", "success"]
    assert episodes.loc["no-solution", "score"] == 0.0
    assert episodes.loc["bad-argument", "termination_reason"] == "evaluator_error"
    # On the reference solution's state the evaluator raised: the benchmark's fault.
    assert episodes.loc["bad-argument", "attribution"] == "benchmark"
    assert episodes.loc["bad-argument", "error_type"] == "EvaluatorFaultError"
    assert (episodes["attempt"] == 0).all(), "a benchmark error is never retried"

    # The terminal says what was not the agent's, with the messages in full.
    assert "2 benchmark errors" in done.stdout
    assert "has no reference solution for the oracle to replay" in done.stdout
    assert "TypeError" in done.stdout
    assert f"--run {episodes['run_id'].iloc[0]}" in done.stdout

    board = crabray("leaderboard", str(out), "--format", "json", check=True)
    (row,) = json.loads(board.stdout)
    assert row["episodes"] == 1, "only the agent's episodes are in the denominator"
    assert row["success_rate"] == 1.0
    assert row["benchmark_errors"] == 2
    assert row["infra_errors"] == 0


def test_the_run_log_names_each_errored_episode(tmp_path: Path, bwrap: str) -> None:
    """Issue 39: the run's log (``OUT/runs/RUN.log``) did not mention the episodes that
    errored; each is named with its task, agent, attribution and error."""
    suite = tmp_path / "faults.py"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    (log,) = (out / "runs").glob("*.log")
    lines = log.read_text().splitlines()
    for task, reason, error in (
        ("no-solution", "agent_error", "NoSolutionError"),
        ("bad-argument", "evaluator_error", "EvaluatorFaultError"),
    ):
        (line,) = [line for line in lines if f"episode {task} " in line]
        assert "agent oracle" in line and "benchmark's" in line, line
        assert reason in line and error in line, line
    assert not [line for line in lines if "episode fine " in line], "a pass is no error"
