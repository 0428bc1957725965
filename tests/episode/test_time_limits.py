"""Every episode has a time limit: a default, the suite's, or the run's (--time-limit-sec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import path_exists
from crabray.core.benchmark import DEFAULT_TIME_LIMIT_SEC
from crabray.results import read_episodes
from tests.conftest import crabray, write_sleepy_suite


def _task(**fields: float) -> Task:
    return Task(id="t", description="d", evaluator=path_exists(path="x"), **fields)


def _suite(**fields: float) -> BenchmarkConfig:
    box = EnvironmentConfig(name="box")
    return BenchmarkConfig(name="s", tasks=[_task()], environments=[box], **fields)


def test_a_task_that_sets_no_limit_gets_the_documented_default() -> None:
    assert _suite().time_limit_of(_task()) == 3600.0
    assert DEFAULT_TIME_LIMIT_SEC == 3600.0
    suite = _suite(time_limit_sec=50)
    assert suite.time_limit_of(_task()) == 50
    assert suite.time_limit_of(_task(time_limit_sec=7)) == 7


@pytest.mark.ray
@pytest.mark.slow
def test_the_run_time_limit_stops_a_command_that_would_hold_the_sweep(tmp_path: Path) -> None:
    """The suite sets no limit and its command sleeps 50 s; --time-limit-sec 2 stops it."""
    suite = write_sleepy_suite(tmp_path / "endless.py", tasks=1, sleep=50)
    out = tmp_path / "out"
    done = crabray(
        "run", str(suite), "--agent", "oracle", "--out", str(out), "--time-limit-sec", "2"
    )
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    assert list(episodes.termination_reason) == ["timeout"]
    assert episodes.wall_time_sec.iloc[0] < 45, "stopped well before the command would end"
