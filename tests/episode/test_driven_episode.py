"""``DrivenEpisode``: the episode ``crabray run`` runs, its moves made by the caller's loop.

Against the real local backend: the caller's moves reach the sandbox, the
evaluator graph runs there after each move, and the record (score, steps,
termination) is what ``run_episode`` gives the oracle for the same moves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, file_contains, path_exists, write_file
from crabray.agents import ActionCall, AgentSpec, OracleAgent
from crabray.backends import Backend, create_backend
from crabray.core.result import TerminationReason
from crabray.episode import DrivenEpisode, EpisodeSettings, run_episode


@pytest.fixture
def bench(tmp_path: Path) -> BenchmarkConfig:
    env = EnvironmentConfig(
        name="box",
        action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
        backend="local",
        backend_settings={"root_dir": str(tmp_path / "sandboxes")},
    )
    task = Task(
        id="hello",
        description="Write a.txt, then hello.txt containing hi.",
        evaluator=[path_exists(path="a.txt"), file_contains(path="hello.txt", text="hi")],
        solution=[
            write_file(path="a.txt", content="a"),
            write_file(path="hello.txt", content="hi"),
        ],
    )
    return BenchmarkConfig(name="bench", tasks=[task], environments=[env])


@pytest.fixture
def sandboxes(bench: BenchmarkConfig) -> Iterator[dict[str, Backend]]:
    started = {env.name: create_backend(env) for env in bench.environments}
    for backend in started.values():
        backend.start()
    yield started
    for backend in started.values():
        backend.close()


def settings(agent: str) -> EpisodeSettings:
    return EpisodeSettings(run_id="run-1", suite="tests", agent=agent)


def test_moves_reach_the_sandbox_and_the_record_matches_the_oracles(
    bench: BenchmarkConfig, sandboxes: dict[str, Backend]
) -> None:
    task = bench.tasks[0]
    driven = DrivenEpisode(bench, task, sandboxes, settings("driven"))
    first = driven.start()
    assert first is not None and first.step == 0
    assert driven.brief is not None
    assert "write_file" in [tool["function"]["name"] for tool in driven.brief.tools]
    after = driven.step(ActionCall(name="write_file", arguments={"path": "a.txt", "content": "a"}))
    assert after is not None
    assert after.results[0].error is None
    assert sandboxes["box"].get_file("a.txt") == b"a"
    end = driven.step(
        ActionCall(name="write_file", arguments={"path": "hello.txt", "content": "hi"})
    )
    assert end is None and driven.record is not None
    with pytest.raises(RuntimeError, match="the episode is over"):
        driven.step(ActionCall(name="complete"))

    for backend in sandboxes.values():
        backend.reset()
    oracle = run_episode(
        bench,
        task,
        OracleAgent(AgentSpec(name="oracle", kind="oracle")),
        sandboxes,
        settings("oracle"),
    )
    mine, theirs = driven.record.result, oracle.result
    assert mine.termination_reason is theirs.termination_reason is TerminationReason.SUCCESS
    assert (mine.score, mine.steps, mine.completeness) == (theirs.score, theirs.steps, 1.0)
    assert [s.action for s in driven.record.steps] == [s.action for s in oracle.steps]


def test_complete_ends_the_episode_unsolved(
    bench: BenchmarkConfig, sandboxes: dict[str, Backend]
) -> None:
    driven = DrivenEpisode(bench, bench.tasks[0], sandboxes, settings("driven"))
    driven.start()
    assert driven.step(ActionCall(name="complete")) is None
    assert driven.record is not None
    result = driven.record.result
    assert result.termination_reason is TerminationReason.AGENT_COMPLETE
    assert result.score == 0.0


def test_finish_ends_a_running_episode_as_it_stands(
    bench: BenchmarkConfig, sandboxes: dict[str, Backend]
) -> None:
    driven = DrivenEpisode(bench, bench.tasks[0], sandboxes, settings("driven"))
    assert driven.finish() is None, "never started"
    driven.start()
    driven.step(ActionCall(name="write_file", arguments={"path": "a.txt", "content": "a"}))
    record = driven.finish()
    assert record is not None and record is driven.record
    assert record.result.termination_reason is TerminationReason.AGENT_COMPLETE
    assert record.result.completeness == 0.5
    assert driven.finish() is record
