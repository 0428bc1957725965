"""The offline LLM of docs/offline-llm.md: ``crabray llm serve`` and the ``mock-llm`` agent."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.agents import ActionCall
from crabray.agents.chat_server import ChatRequest, ReplayModel
from crabray.agents.config import read_agent_configs
from crabray.cli.llm import DEFAULT_PORT
from crabray.results import list_runs, read_episodes, read_steps
from tests.conftest import ROOT, crabray, serve_mock_llm

TASK = "Create hello.txt"
SOLUTION = [ActionCall(name="write_file", arguments={"path": "hello.txt", "content": "hi"})]
TOOLS = ["write_file", "complete", "fail"]


def ask(model: ReplayModel, task: str, step: int, tools: list[str] = TOOLS) -> dict:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": f"Task: {task}"},
            {"role": "user", "content": f"Step {step} of 30.\nObservations: none"},
        ],
        "tools": [{"type": "function", "function": {"name": n}} for n in tools],
    }
    reply = model(ChatRequest("/v1/chat/completions", {}, body))
    assert reply.status == 200, reply.body
    return reply.body


def called(body: dict) -> tuple[str, dict]:
    call = body["choices"][0]["message"]["tool_calls"][0]["function"]
    return call["name"], json.loads(call["arguments"])


def test_replay_model_replays_the_solution_then_completes() -> None:
    model = ReplayModel({TASK: SOLUTION})
    first = ask(model, TASK, 1)
    assert called(first) == ("write_file", {"path": "hello.txt", "content": "hi"})
    assert first["usage"]["prompt_tokens"] > 0 and first["usage"]["completion_tokens"] > 0
    assert called(ask(model, TASK, 2)) == ("complete", {})


def test_replay_model_gives_up_on_what_it_cannot_do() -> None:
    model = ReplayModel({TASK: SOLUTION})
    name, arguments = called(ask(model, "Something else entirely", 1))
    assert name == "fail" and "no reference solution" in arguments["reason"]
    name, arguments = called(ask(model, TASK, 1, tools=["run_command", "fail"]))
    assert name == "fail" and "'write_file'" in arguments["reason"]
    text_only = ask(model, TASK, 1, tools=[])["choices"][0]["message"]
    assert "tool_calls" not in text_only and "cannot" in text_only["content"]


def test_serve_reports_a_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = crabray("llm", "serve", "tasks/demo", "--port", str(port))
    assert done.returncode == 2
    assert f"--port: cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def mock_llm(tmp_path: Path) -> Iterator[str]:
    """``crabray llm serve tasks/demo`` as docs/offline-llm.md starts it, on a free port."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    with serve_mock_llm("tasks/demo", ROOT, env, tmp_path / "serve.log") as url:
        yield url


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.usefixtures("private_ray")
def test_the_demo_runs_with_the_offline_llm(mock_llm: str, tmp_path: Path) -> None:
    example = (ROOT / "agents.example.toml").read_text()
    entry = read_agent_configs(ROOT / "agents.example.toml")["mock-llm"]
    assert entry.base_url == f"http://127.0.0.1:{DEFAULT_PORT}/v1"  # what serve listens on
    agents = tmp_path / "agents.toml"
    agents.write_text(example.replace(entry.base_url, mock_llm))
    out = tmp_path / "results"
    run = ["run", "tasks/demo", "--agent-config", str(agents), "--agent", "mock-llm"]
    crabray(*run, "--out", str(out), check=True)
    board = crabray("leaderboard", str(out), check=True)
    # n, ok, success: the table is as wide as the terminal (200 columns here).
    assert re.search(r"mock-llm\s+crabray-mock\s+11\s+11\s+1\.000", board.stdout), board.stdout
    assert "cost $" in board.stdout and "tok in" in board.stdout, board.stdout

    episodes = read_episodes(out).set_index("task_id")
    assert (episodes["termination_reason"] == "success").all()
    assert (episodes["tokens_in"] > 0).all() and (episodes["tokens_out"] > 0).all()
    expected = (
        episodes["tokens_in"] * entry.price_in_per_mtok
        + episodes["tokens_out"] * entry.price_out_per_mtok
    ) / 1e6
    assert episodes["cost_usd"].to_numpy() == pytest.approx(expected.to_numpy())
    assert (episodes["model_calls"] == episodes["steps"]).all()

    steps = read_steps(out)
    deploy = steps[steps["task_id"] == "deploy-config"].sort_values("step")
    assert list(deploy["action"]) == [
        "workstation-write_file",
        "server-write_file",
        "server-run_command",
    ]
    assert json.loads(deploy["arguments_json"].iloc[2]) == {"command": "touch deploy/READY"}
    assert deploy["result"].iloc[1] == "wrote 16 characters to deploy/settings.ini"
    assert deploy["agent_message"].iloc[0] == (
        "Step 1 of the reference solution: workstation-write_file."
    )


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.usefixtures("private_ray")
def test_model_on_the_command_line_overrides_the_agents_file(mock_llm: str, tmp_path: Path) -> None:
    example = (ROOT / "agents.example.toml").read_text()
    entry = read_agent_configs(ROOT / "agents.example.toml")["mock-llm"]
    agents = tmp_path / "agents.toml"
    agents.write_text(example.replace(entry.base_url, mock_llm))
    out = tmp_path / "results"
    run = ["run", "tasks/demo", "--agent-config", str(agents), "-a", "mock-llm", "-t", "hello-*"]
    crabray(*run, "--model", "another-model", "--out", str(out), check=True)
    episodes = read_episodes(out)
    assert episodes["task_id"].tolist() == ["hello-file"]
    assert episodes["model"].tolist() == ["another-model"]
    assert entry.model != "another-model"
    baseline = crabray("run", "tasks/demo", "-a", "oracle", "-m", "x", "--out", str(out))
    assert baseline.returncode == 2
    assert "--model: no selected agent uses a model (oracle" in baseline.stderr

    # A resume goes on with the run's model, not the agents file's: a run is one model.
    (run_id,) = list_runs(out)
    shutil.rmtree(out / "episodes")  # as if the driver died before writing the episode
    shutil.rmtree(out / "steps", ignore_errors=True)
    resumed = crabray("run", "--resume", run_id, "--out", str(out), check=True)
    assert "goes on with model 'another-model'" in resumed.stderr
    assert read_episodes(out)["model"].tolist() == ["another-model"]
    refused = crabray("run", "--resume", run_id, "-m", "third", "--out", str(out))
    assert refused.returncode == 2
    assert "ran agent 'mock-llm' with model 'another-model', not 'third'" in refused.stderr
    assert "Traceback" not in refused.stderr
