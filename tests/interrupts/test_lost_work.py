"""Nothing of an episode is lost: a timed-out episode keeps its steps, tokens and cost.

An LLM agent (the offline mock model, through the real HTTP client) takes two
quick steps, then runs a command that outlives the task's time limit. The
episode cannot check its clock inside that command: it is recorded as it
stood once the grace past its limit is over, with the steps it took, the one
it was in (unfinished), its conversation and what its model calls cost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.agents.config import read_agent_configs
from crabray.results import read_episodes, read_steps
from tests.conftest import ROOT, serve_mock_llm
from tests.interrupts.conftest import cli_env, crabray_in

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SUITE = """
from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import SHELL_ACTIONS, path_exists, run_command

bench = BenchmarkConfig(
    name="stuck",
    environments=[EnvironmentConfig(name="box", action_space=SHELL_ACTIONS)],
    tasks=[
        Task(
            id="stuck",
            description="Echo twice, then wait for a minute",
            evaluator=path_exists(path="never.txt"),
            solution=[
                run_command(command="echo one"),
                run_command(command="echo two"),
                run_command(command="sleep 60"),
            ],
            time_limit_sec=4,
        )
    ],
)
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "stuck.py"
    path.write_text(SUITE)
    return path


@pytest.fixture
def mock_llm(tmp_path: Path, suite: Path) -> Iterator[str]:
    """``crabray llm serve SUITE``: a model that replays the suite's solution."""
    with serve_mock_llm(str(suite), ROOT, cli_env(), tmp_path / "serve.log") as url:
        yield url


def test_a_timed_out_episode_keeps_its_steps_tokens_and_cost(
    tmp_path: Path, suite: Path, mock_llm: str
) -> None:
    entry = read_agent_configs(ROOT / "agents.example.toml")["mock-llm"]
    agents = tmp_path / "agents.toml"
    agents.write_text((ROOT / "agents.example.toml").read_text().replace(entry.base_url, mock_llm))
    out = tmp_path / "out"
    run = crabray_in(
        tmp_path,
        "run",
        str(suite),
        "--agent-config",
        str(agents),
        "--agent",
        "mock-llm",
        "--out",
        str(out),
    )
    assert run.returncode == 0, run.stdout + run.stderr

    (episode,) = read_episodes(out).to_dict("records")
    assert episode["termination_reason"] == "timeout"
    assert "past its time limit" in episode["error"]
    assert episode["wall_time_sec"] < 45, "stopped long before the command would end"
    assert episode["steps"] == 3
    assert episode["model_calls"] == 3
    assert episode["tokens_in"] > 0 and episode["tokens_out"] > 0
    expected = (
        episode["tokens_in"] * entry.price_in_per_mtok
        + episode["tokens_out"] * entry.price_out_per_mtok
    ) / 1e6
    assert episode["cost_usd"] == pytest.approx(expected) and expected > 0
    conversation = json.loads(episode["conversation_json"])
    assert "sleep 60" in json.dumps(conversation), "the conversation up to the stuck call"

    steps = read_steps(out).sort_values("step")
    commands = [json.loads(a)["command"] for a in steps["arguments_json"]]
    assert commands == ["echo one", "echo two", "sleep 60"]
    assert "one" in steps["result"].iloc[0] and "two" in steps["result"].iloc[1]
    assert steps["error"].iloc[2].startswith("unfinished:")

    listed = crabray_in(tmp_path, "runs", "list", str(out))
    assert "1/1" in listed.stdout and "finished" in listed.stdout
