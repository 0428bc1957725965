"""LLM agents end to end: per-episode limits, the multi-agent styles, and the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crabray.core.result import TerminationReason
from crabray.episode import EpisodeLimits
from crabray.results import read_episodes, read_steps
from crabray.results.site import build_site
from tests.agents.conftest import (
    KEY_ENV,
    SECRET,
    EpisodeRunner,
    SpecMaker,
    write_agents_file,
    write_hello_suite,
)
from tests.agents.fake_server import FakeChatServer, Request, text, tool_call
from tests.conftest import crabray

Reason = TerminationReason
HELLO = dict(path="hello.txt", content="Hello, world!\n")
SETTINGS = dict(path="settings.ini", content="mode=production\n")
DEPLOYED = dict(path="deploy/settings.ini", content="mode=production\n")


def echo(i: int, usage: tuple[int, int]) -> object:
    return tool_call("run_command", usage=usage, command=f"echo {i}")


# -- limits ---------------------------------------------------------------------------------


def test_token_limit_ends_the_episode(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(*[echo(i, (1500, 100)) for i in range(10)])
    result = run_demo("hello-file", make_spec(max_tokens=3000)).result
    assert result.termination_reason is Reason.TOKEN_LIMIT
    assert (result.tokens_in, result.tokens_out, result.model_calls) == (3000, 200, 2)
    assert "3200 tokens used, limit 3000" in (result.error or "")
    assert result.steps == 1  # the over-budget step's calls are not run


def test_cost_limit_ends_the_episode(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(*[echo(i, (10_000, 1_000)) for i in range(10)])
    spec = make_spec(price_in_per_mtok=5.0, price_out_per_mtok=20.0, max_cost_usd=0.2)
    result = run_demo("hello-file", spec).result
    # 0.05 + 0.02 = $0.07 per call: the third call passes $0.20
    assert result.termination_reason is Reason.COST_LIMIT
    assert result.model_calls == 3
    assert result.cost_usd == pytest.approx(0.21)
    assert (result.tokens_in, result.tokens_out) == (30_000, 3_000)


def test_a_chatty_agents_conversation_is_cut_to_its_cap(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    chatty = "head -c 3000 /dev/zero | tr '\\0' x"  # each tool reply holds 3 kB of output
    server.add(*[tool_call("run_command", command=chatty) for _ in range(8)], text("Done."))
    result = run_demo(
        "hello-file", make_spec(max_conversation_bytes=8192), limits=EpisodeLimits(max_steps=9)
    ).result
    assert result.model_calls >= 8
    assert len(result.conversation_json.encode("utf-8")) <= 8192
    messages = json.loads(result.conversation_json)
    assert messages[0]["role"] == "system"  # the prompt is kept
    marker = [m for m in messages if m.get("speaker") == "crabray"]
    assert len(marker) == 1
    assert "messages" in marker[0]["content"] and "left out here" in marker[0]["content"]
    assert "max_conversation_bytes (8192)" in marker[0]["content"]
    assert messages[-1]["role"] == "assistant"  # how it ended is kept


# -- multi-agent styles ---------------------------------------------------------------------


def test_planner_and_tool_caller_solve_a_two_environment_task(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(
        text("Plan: write, copy, mark ready.\nNEXT: write settings.ini on the workstation"),
        tool_call("workstation-write_file", **SETTINGS),
        text("NEXT: copy it to the server"),
        tool_call("server-write_file", **DEPLOYED),
        text("NEXT: create deploy/READY on the server"),
        tool_call("server-run_command", command="touch deploy/READY"),
    )
    spec = make_spec(kind="openai-planner", planner_model="planner-model", max_tokens=10_000)
    record = run_demo("deploy-config", spec)
    result = record.result
    assert result.termination_reason is Reason.SUCCESS, result.error
    assert result.model_calls == 6
    assert (result.tokens_in, result.tokens_out) == (600, 120)
    planner = server.requests[0::2]
    caller = server.requests[1::2]
    assert all(r.body["model"] == "planner-model" and "tools" not in r.body for r in planner)
    assert all(r.body["model"] == "fake-model" for r in caller)
    assert "server-write_file" in caller[0].tool_names
    assert "workstation-write_file" in planner[0].messages[0]["content"]  # the catalogue
    assert "write settings.ini on the workstation" in caller[0].messages[-1]["content"]
    assert "workstation-write_file: " in planner[1].messages[-1]["content"]  # results as text
    assert caller[1].messages[-2]["role"] == "tool"  # the caller gets its own tool replies
    assert record.steps[0].agent_message.startswith("plan: Plan: write")
    # One conversation, in the order the calls were made, each message tagged by dialogue.
    replies = [m for m in json.loads(result.conversation_json) if m["role"] == "assistant"]
    assert [m.get("speaker", "agent") for m in replies] == ["planner", "tool caller"] * 3
    assert [m["model"] for m in replies[:2]] == ["planner-model", "fake-model"]


def delegate(env: str, instruction: str) -> object:
    return tool_call("delegate", environment=env, instruction=instruction)


def test_per_environment_agents_solve_a_two_environment_task(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(
        delegate("workstation", "write settings.ini"),
        tool_call("workstation-write_file", **SETTINGS),
        delegate("laptop", "nonsense"),  # no such environment: the planner is told
        delegate("server", "copy the settings"),
        tool_call("server-write_file", **DEPLOYED),
        delegate("server", "mark it ready"),
        tool_call("server-run_command", command="touch deploy/READY"),
    )
    result = run_demo("deploy-config", make_spec(kind="openai-per-env")).result
    assert result.termination_reason is Reason.SUCCESS, result.error
    assert result.model_calls == 7
    requests = server.requests
    planner: list[Request] = [requests[i] for i in (0, 2, 3, 5)]
    assert all(r.tool_names == ["delegate"] for r in planner)
    enum = planner[0].body["tools"][0]["function"]["parameters"]["properties"]["environment"]
    assert enum["enum"] == ["workstation", "server"]
    workstation, server_agent = requests[1], requests[4]
    assert set(workstation.tool_names) == {
        "workstation-run_command",
        "workstation-read_file",
        "workstation-write_file",
        "workstation-list_files",
        "workstation-file_exists",
        "complete",
        "fail",
    }
    assert all(not n.startswith("workstation-") for n in server_agent.tool_names)
    assert "Instruction: copy the settings" in server_agent.messages[-1]["content"]
    # the planner hears what the sub-agent did, and why its bad delegation went nowhere
    replies = [m["content"] for m in planner[2].messages if m["role"] == "tool"]
    assert replies[0].startswith("workstation agent:\n- workstation-write_file: ")
    assert "no environment 'laptop'" in replies[1]
    # the server's sub-agent keeps its own conversation, with its own tool replies
    last_server = requests[6]
    assert [m["role"] for m in last_server.messages[2:]] == ["user", "assistant", "tool", "user"]


# -- the real CLI ---------------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.usefixtures("private_ray")
def test_cli_runs_a_configured_agent(
    server: FakeChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = write_hello_suite(tmp_path)
    config = write_agents_file(
        tmp_path,
        name="fake-gpt",
        kind="openai",
        model="fake-model-1",
        base_url=server.base_url,
        key_env=KEY_ENV,
        retries=0,
        price_in_per_mtok=3.0,
        price_out_per_mtok=15.0,
    )
    server.add(
        tool_call("read_file", usage=(400, 30), path="hello.txt"),
        tool_call("write_file", usage=(700, 50), path="hello.txt", content="hi\n"),
    )
    monkeypatch.setenv(KEY_ENV, SECRET)
    out = tmp_path / "out"
    done = crabray(
        "-vv",
        "run",
        str(suite),
        "--agent-config",
        str(config),
        "--agent",
        "fake-gpt",
        "--agent",
        "noop",
        "--out",
        str(out),
        "--concurrency",
        "1",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    episodes = read_episodes(out).set_index("agent")
    gpt = episodes.loc["fake-gpt"]
    assert gpt["termination_reason"] == "success"
    assert gpt["model"] == "fake-model-1"
    assert (gpt["tokens_in"], gpt["tokens_out"], gpt["model_calls"]) == (1100, 80, 2)
    assert gpt["cost_usd"] == pytest.approx((1100 * 3.0 + 80 * 15.0) / 1e6)
    assert gpt["action_errors"] == 1  # reading a file that is not there yet
    assert episodes.loc["noop"]["termination_reason"] == "agent_complete"
    # The conversation reaches the dataset, and the site shows it beside the steps.
    conversation = json.loads(gpt["conversation_json"])
    replies = [m for m in conversation if m["role"] == "assistant"]
    assert [r["tool_calls"][0]["name"] for r in replies] == ["read_file", "write_file"]
    assert [(r["tokens_in"], r["tokens_out"]) for r in replies] == [(400, 30), (700, 50)]
    assert episodes.loc["noop"]["conversation_json"] == ""
    build_site(out, tmp_path / "site")
    page = (tmp_path / "site" / "episodes" / f"{gpt['episode_id']}.html").read_text()
    assert page.count('<code class="tool-name">') == 2 and "$0.00165" in page and "$0.00285" in page
    steps = read_steps(out)
    assert len(steps[steps["agent"] == "fake-gpt"]) == 2
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    # the key is nowhere: not in the CLI's output, not in any file of the output directory
    assert SECRET not in done.stdout + done.stderr
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    manifest = json.loads(next((out / "runs").glob("*.json")).read_text())
    assert "fake-gpt" in json.dumps(manifest)


def test_cli_unknown_agent_lists_configured_names(tmp_path: Path) -> None:
    config = tmp_path / "agents.toml"
    config.write_text('[[agents]]\nname = "mine"\nkind = "openai"\nmodel = "m"\n')
    done = crabray(
        "run",
        "tasks/demo",
        "--agent-config",
        str(config),
        "--agent",
        "yours",
        "--out",
        str(tmp_path / "out"),
    )
    assert done.returncode == 2
    assert "unknown agent 'yours'; available: mine, noop, oracle" in done.stderr


def test_cli_reports_a_missing_key_before_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "agents.toml"
    config.write_text(
        f'[[agents]]\nname = "mine"\nkind = "openai"\nmodel = "m"\nkey_env = "{KEY_ENV}"\n'
    )
    monkeypatch.delenv(KEY_ENV, raising=False)
    done = crabray(
        "run",
        "tasks/demo",
        "--agent-config",
        str(config),
        "--agent",
        "mine",
        "--out",
        str(tmp_path / "out"),
    )
    assert done.returncode == 2
    assert f"environment variable {KEY_ENV} (its API key) is not set" in done.stderr
    assert not (tmp_path / "out").exists()
