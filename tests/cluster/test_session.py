"""``ClusterEpisode``: an episode driven move by move, its sandboxes environment actors.

On a real local Ray instance: the caller's moves run in the sandbox its actor
holds, the evaluators run there too, and the record is what ``crabray run``
records (success, score, steps by the names the agent called).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import ray

from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import FILE_ACTIONS, file_contains, path_exists
from crabray.agents import ActionCall
from crabray.cluster.actors.session import ClusterEpisode
from crabray.core.errors import ConfigError
from crabray.core.result import TerminationReason
from crabray.episode import EpisodeSettings
from crabray.results import ResultSink, read_episodes, read_steps

pytestmark = [pytest.mark.ray]


def bench(tmp_path: Path) -> BenchmarkConfig:
    env = EnvironmentConfig(
        name="box",
        action_space=list(FILE_ACTIONS),
        backend="local",
        backend_settings={"root_dir": str(tmp_path / "sandboxes")},
    )
    task = Task(
        id="hello",
        description="Write a.txt, then hello.txt containing hi.",
        evaluator=[path_exists(path="a.txt"), file_contains(path="hello.txt", text="hi")],
    )
    return BenchmarkConfig(name="bench", tasks=[task], environments=[env])


def write(path: str, content: str) -> ActionCall:
    return ActionCall(name="write_file", arguments={"path": path, "content": content})


def test_moves_run_in_the_actors_sandbox_and_the_episode_is_graded_there(
    local_ray: None, tmp_path: Path
) -> None:
    suite = bench(tmp_path)
    settings = EpisodeSettings(run_id="run-1", suite="tests", agent="trainer")
    with ClusterEpisode(suite, suite.tasks[0], settings) as episode:
        assert episode.start() is not None
        after = episode.step(write("a.txt", "a"))
        assert after is not None and after.results[0].error is None
        assert episode.backends["box"].get_file("a.txt") == b"a"
        root = Path(ray.get(episode._actors[0].describe.remote())["root"])
        assert root.parent == tmp_path / "sandboxes", "the actor holds the sandbox"
        assert episode.step(write("hello.txt", "hi")) is None
        record = episode.record
    assert record is not None
    assert record.result.termination_reason is TerminationReason.SUCCESS
    assert record.result.score == 1.0
    assert [s.action for s in record.steps] == ["write_file", "write_file"]
    assert not root.exists(), "closing the episode closed its sandbox"
    ResultSink(tmp_path / "out", "run-1").write([record])
    rows = read_episodes(tmp_path / "out")
    assert rows[["agent", "task_id", "score", "termination_reason"]].values.tolist() == [
        ["trainer", "hello", 1.0, "success"]
    ]
    assert list(read_steps(tmp_path / "out").action) == ["write_file", "write_file"]


def test_an_unhostable_kind_is_refused_without_leaking_actors(
    local_ray: None, tmp_path: Path
) -> None:
    suite = bench(tmp_path)
    env = suite.environments[0].model_copy(update={"host_kind": "nowhere"})
    unhostable = suite.model_copy(update={"environments": [env]})
    settings = EpisodeSettings(run_id="run-1", suite="tests", agent="trainer")
    with pytest.raises(ConfigError, match="no node of the Ray cluster hosts sandboxes of kind"):
        ClusterEpisode(unhostable, unhostable.tasks[0], settings)
