"""The task-JSON demo suite end to end through the real CLI on local Ray: oracle 1.0, noop 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]

DEMO_TASKS = 10


def test_demo_suite_oracle_and_noop(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = crabray(
        "run", "tasks/task_json_demo", "--agent", "oracle", "--agent", "noop", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    assert len(episodes) == 2 * DEMO_TASKS
    oracle = episodes[episodes.agent == "oracle"]
    noop = episodes[episodes.agent == "noop"]
    assert (oracle.score == 1.0).all(), oracle[["task_id", "score", "error"]].to_string()
    assert oracle.success.all()
    assert (noop.score == 0.0).all(), noop[["task_id", "score", "error"]].to_string()
    assert set(noop.termination_reason) == {"agent_complete"}
    assert noop.error.isna().all()

    run_id = episodes.run_id.iloc[0]
    for row in episodes.itertuples():
        file = out / "summaries" / run_id / row.agent / row.task_id / "summary.json"
        summary = json.loads(file.read_text())
        assert summary["id"] == row.task_id
        assert summary["results"]["score"] == row.score
        assert summary["results"]["eval_error"] is None
        assert summary["results"]["messages"]

    board = crabray("leaderboard", str(out), "--format", "json", check=True)
    rows = {row["agent"]: row for row in json.loads(board.stdout)}
    assert rows["oracle"]["success_rate"] == 1.0
    assert rows["noop"]["success_rate"] == 0.0


def test_index_and_backend_options(tmp_path: Path) -> None:
    listed = crabray(
        "tasks", "list", "tasks/task_json_demo", "--index", "test_small.json", check=True
    )
    assert "(2 of 2 tasks)" in listed.stdout
    out = tmp_path / "out"
    done = crabray(
        "run",
        "tasks/task_json_demo",
        "--index",
        "tasks/task_json_demo/test_small.json",
        "--backend",
        "local",
        "--agent",
        "oracle",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    assert len(episodes) == 2 and (episodes.score == 1.0).all()
    refused = crabray(
        "run", "tasks/demo", "--index", "x.json", "--agent", "noop", "--out", str(out)
    )
    assert refused.returncode == 2 and "--index" in refused.stderr
