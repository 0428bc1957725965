"""``crabray.evaluate``: a run from Python, as ``crabray run`` makes it, on a real local Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

import crabray
from crabray.agents import AgentSpec
from crabray.core.errors import ConfigError
from crabray.results import read_episodes
from tests.conftest import ROOT

DEMO = ROOT / "tasks" / "demo"


@pytest.mark.ray
@pytest.mark.slow
def test_evaluate_runs_a_suite_and_writes_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = crabray.evaluate(
        DEMO,
        ["oracle", AgentSpec(name="idle", kind="noop")],
        out_dir=out,
        task_ids=["hello-file", "count-lines"],
        concurrency=1,
    )
    episodes = read_episodes(out)
    assert summary.planned == summary.ran == len(episodes) == 4
    assert summary.successes == 2
    assert episodes.groupby("agent")["success"].sum().to_dict() == {"oracle": 2, "idle": 0}
    assert set(episodes.run_id) == {summary.run_id}

    agents = ["oracle", AgentSpec(name="idle", kind="noop")]
    again = crabray.evaluate(
        DEMO, agents, out_dir=out, task_ids=["hello-file", "count-lines"], resume=summary.run_id
    )
    assert again.run_id == summary.run_id
    assert again.skipped == 4 and again.ran == 0


def test_evaluate_refuses_a_job_api_address_with_the_command_that_submits() -> None:
    with pytest.raises(ConfigError, match=r"crabray run .* --address http://head:8265"):
        crabray.evaluate(DEMO, ["oracle"], address="http://head:8265")


def test_evaluate_names_an_unknown_setting() -> None:
    with pytest.raises(ConfigError, match="concurency"):
        crabray.evaluate(DEMO, ["oracle"], concurency=2)


def test_evaluate_names_an_unknown_agent() -> None:
    with pytest.raises(ConfigError, match="unknown agent 'gpt-9'"):
        crabray.evaluate(DEMO, ["gpt-9"])
