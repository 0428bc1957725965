"""``watch_episode`` in-process on the real local backend: a stuck step, a stop request."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import SHELL_ACTIONS, path_exists
from crabray.agents import Agent
from crabray.backends import Backend, create_backend
from crabray.core.result import TerminationReason
from crabray.episode import EpisodeLimits, EpisodeSettings, WatchedRecord, watch_episode
from tests.episode.test_episode import ScriptAgent, call, forever

pytestmark = pytest.mark.slow  # a stuck step is waited out: up to a minute

Watch = Callable[[Agent, Callable[[], bool], float], WatchedRecord]


@pytest.fixture
def watch(tmp_path: Path) -> Iterator[Watch]:
    """Run one episode of a task with the given time limit in a local sandbox, under a watch."""
    env = EnvironmentConfig(
        name="box",
        action_space=SHELL_ACTIONS,
        backend="local",
        backend_settings={"root_dir": str(tmp_path / "sandboxes")},
    )
    task = Task(id="t", description="d", evaluator=path_exists(path="never.txt"))
    bench = BenchmarkConfig(name="b", tasks=[task], environments=[env])
    backend: Backend = create_backend(env)
    backend.start()

    def go(agent: Agent, stop: Callable[[], bool], limit: float) -> WatchedRecord:
        settings = EpisodeSettings(
            run_id="r", suite="b", agent=agent.spec.name, limits=EpisodeLimits(time_limit_sec=limit)
        )
        return watch_episode(bench, task, agent, {"box": backend}, settings, stop)

    yield go
    backend.close()


def test_a_step_stuck_past_the_limit_is_recorded_as_it_stood(watch: Watch) -> None:
    agent = ScriptAgent(
        [call("run_command", command="echo one"), call("run_command", command="sleep 60")]
    )
    watched = watch(agent, lambda: False, 1.0)
    record = watched.record
    assert watched.stuck, "the sandbox is still busy with the command"
    assert record.result.termination_reason is TerminationReason.TIMEOUT
    assert "past its time limit" in (record.result.error or "")
    assert record.result.wall_time_sec < 50, "recorded long before the command would end"
    assert [s.action for s in record.steps] == ["run_command", "run_command"]
    assert "one" in record.steps[0].result and record.steps[0].error is None
    assert (record.steps[1].error or "").startswith("unfinished:")
    assert record.result.steps == 2


def test_a_stop_request_ends_the_episode_after_its_step(watch: Watch) -> None:
    agent = ScriptAgent(forever("run_command", command="sleep 0.1"))
    watched = watch(agent, lambda: len(agent.inputs) >= 2, 600.0)
    record = watched.record
    assert not watched.stuck, "it ended between steps, by itself"
    assert record.result.termination_reason is TerminationReason.CANCELLED
    assert "interrupted" in (record.result.error or "")
    assert record.steps and all(s.error is None for s in record.steps)
    assert len(record.steps) == record.result.steps
