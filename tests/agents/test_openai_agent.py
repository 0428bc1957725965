"""The single tool-calling agent against the fake server, in real demo episodes."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from crabray.agents import Observation, OpenAIAgent, StepInput, TaskBrief, create_agent
from crabray.agents.conversation import MALFORMED_KEY
from crabray.agents.openai_agent import NUDGE
from crabray.core.errors import AgentError, AuthenticationError
from crabray.core.result import TerminationReason
from tests.agents.conftest import KEY_ENV, SECRET, EpisodeRunner, SpecMaker
from tests.agents.fake_server import FakeChatServer, Request, error, text, tool_call, tool_calls

Reason = TerminationReason
HELLO = dict(path="hello.txt", content="Hello, world!\n")


def tool_messages(request: Request) -> list[dict[str, Any]]:
    return [m for m in request.messages if m["role"] == "tool"]


def assert_well_formed(request: Request) -> None:
    """Every tool message answers a call of an earlier assistant message, and every call is
    answered before the next user message (what OpenAI's API insists on)."""
    open_calls: set[str] = set()
    for message in request.messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.remove(message["tool_call_id"])
        else:
            assert not open_calls, f"unanswered calls before a {message['role']} message"
            if message["role"] == "assistant":
                open_calls = {c["id"] for c in message.get("tool_calls", [])}


def test_solves_a_task_and_feeds_back_real_outputs(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(
        tool_call("run_command", usage=(300, 40), command="echo hi there"),
        tool_call("write_file", usage=(500, 60), **HELLO),
    )
    spec = make_spec(price_in_per_mtok=2.0, price_out_per_mtok=8.0, temperature=0.2)
    result = run_demo("hello-file", spec).result
    assert result.termination_reason is Reason.SUCCESS
    assert (result.tokens_in, result.tokens_out, result.model_calls) == (800, 100, 2)
    assert result.cost_usd == pytest.approx((800 * 2.0 + 100 * 8.0) / 1e6)
    assert result.model_latency_sec > 0
    assert result.model == "fake-model"

    first, second = server.requests
    assert first.body["model"] == "fake-model"
    assert first.body["temperature"] == 0.2
    assert first.body["max_tokens"] == 1024
    assert set(first.tool_names) == {
        "run_command",
        "read_file",
        "write_file",
        "list_files",
        "file_exists",
        "complete",
        "fail",
    }
    system, task = first.messages[:2]
    assert system["role"] == "system" and "`complete`" in system["content"]
    assert "workstation" in system["content"]
    assert "hello.txt containing exactly the text: Hello, world!" in task["content"]
    (reply,) = tool_messages(second)
    call_id = second.messages[3]["tool_calls"][0]["id"]
    assert reply["tool_call_id"] == call_id
    assert "exit code 0" in reply["content"] and "hi there" in reply["content"]
    assert_well_formed(second)


def test_action_errors_go_back_as_the_real_error(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(
        tool_call("read_file", path="missing.txt"),
        tool_call("write_file", **HELLO),
    )
    record = run_demo("hello-file", make_spec())
    assert record.result.termination_reason is Reason.SUCCESS
    assert record.result.action_errors == 1
    (reply,) = tool_messages(server.requests[1])
    assert reply["content"].startswith("error: ")
    assert reply["content"] == f"error: {record.steps[0].error}"


def test_malformed_tool_calls_are_action_errors_not_crashes(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(
        tool_calls([("write_file", '{"path": "hello.txt", '), ("teleport", '{"to": "mars"}')]),
        tool_calls([("complete", "[1, 2]")]),
        tool_call("write_file", **HELLO),
    )
    record = run_demo("hello-file", make_spec())
    result = record.result
    assert result.termination_reason is Reason.SUCCESS
    assert result.action_errors == 3
    bad_json, unknown, not_object, good = record.steps
    assert bad_json.action == "write_file" and bad_json.error
    assert json.loads(bad_json.arguments_json) == {MALFORMED_KEY: '{"path": "hello.txt", '}
    assert unknown.action == "teleport" and "no action 'teleport'" in (unknown.error or "")
    assert not_object.action == "complete" and not_object.error  # never ran: no completion
    assert good.error is None
    json_reply, unknown_reply = tool_messages(server.requests[1])
    assert "not valid JSON" in json_reply["content"]
    assert "no tool 'teleport'" in unknown_reply["content"]
    assert "must be a JSON object" in tool_messages(server.requests[2])[-1]["content"]


def test_a_reply_without_tool_call_is_nudged(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(text("Let me think about it."), tool_call("write_file", **HELLO))
    record = run_demo("hello-file", make_spec())
    assert record.result.termination_reason is Reason.SUCCESS
    assert record.result.steps == 2
    last_user = [m for m in server.requests[1].messages if m["role"] == "user"][-1]
    assert NUDGE in last_user["content"]
    assert server.requests[1].messages[3] == {
        "role": "assistant",
        "content": "Let me think about it.",
    }


def test_too_many_replies_without_tool_call_fail_the_agent(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(text("hmm"), text("hmm"), text("I refuse"))
    result = run_demo("hello-file", make_spec(max_no_tool_replies=3)).result
    assert result.termination_reason is Reason.AGENT_ERROR
    assert result.error_type == "AgentError"
    assert "3 times in a row without calling a tool: 'I refuse'" in (result.error or "")
    assert result.model_calls == 3


def test_history_is_trimmed_to_whole_turns(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(*[tool_call("run_command", command=f"echo step{i}") for i in range(5)])
    server.add(tool_call("write_file", **HELLO))
    result = run_demo("hello-file", make_spec(history_window=2)).result
    assert result.termination_reason is Reason.SUCCESS
    for request in server.requests:
        assert_well_formed(request)
        assert [m["role"] for m in request.messages[:2]] == ["system", "user"]
        assert request.messages[2]["role"] == "user"  # a window starts at a whole turn
    # head (2) + two kept turns: the previous one complete (user, assistant, tool), this one open
    assert [len(r.messages) for r in server.requests] == [3, 6, 6, 6, 6, 6]
    last = server.requests[-1]
    assert "step4" in tool_messages(last)[0]["content"]
    assert all("step2" not in json.dumps(m) for m in last.messages)


def brief(tools: list[dict[str, Any]] | None = None) -> TaskBrief:
    tools = tools or [
        {"type": "function", "function": {"name": "click", "parameters": {"type": "object"}}}
    ]
    return TaskBrief(
        task_id="t",
        description="click",
        tools=tools,
        environments={"desk": "A desktop."},
        max_steps=5,
    )


@pytest.mark.parametrize("vision", [True, False])
def test_screenshots_go_as_images_only_with_vision(
    server: FakeChatServer, make_spec: SpecMaker, tmp_path: Path, vision: bool
) -> None:
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake-pixels")
    server.add(tool_call("click"))
    agent = create_agent(make_spec(vision=vision))
    agent.reset(brief())
    observed = Observation(env="desk", name="screen", content="a window", image_path=str(png))
    move = agent.step(StepInput(step=0, observations=[observed]))
    assert [c.name for c in move.calls] == ["click"]
    content = server.requests[0].messages[-1]["content"]
    if vision:
        text_part, image_part = content
        assert "[desk/screen] a window" in text_part["text"]
        url = image_part["image_url"]["url"]
        assert url == "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
    else:
        assert isinstance(content, str)
        assert "a screenshot was taken" in content and "image_url" not in json.dumps(content)


def test_authentication_failure_ends_the_episode_as_agent_error(
    server: FakeChatServer,
    make_spec: SpecMaker,
    run_demo: EpisodeRunner,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.add(error(401, f"Incorrect API key provided: {SECRET}"))
    record = run_demo("hello-file", make_spec(retries=3))
    result = record.result
    assert result.termination_reason is Reason.AGENT_ERROR
    assert result.error_type == "AuthenticationError"
    assert f"environment variable {KEY_ENV}" in (result.error or "")
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in record.model_dump_json()
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_a_missing_key_variable_is_the_agents_error(
    server: FakeChatServer,
    make_spec: SpecMaker,
    run_demo: EpisodeRunner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = make_spec()
    monkeypatch.delenv(KEY_ENV)
    result = run_demo("hello-file", spec).result
    assert result.termination_reason is Reason.AGENT_ERROR
    assert f"environment variable {KEY_ENV} (its API key) is not set" in (result.error or "")
    assert server.requests == []


def test_server_errors_are_retried_inside_a_step(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(error(500, "overloaded"), error(429, "rate", {"Retry-After": "0"}))
    server.add(tool_call("write_file", **HELLO))
    result = run_demo("hello-file", make_spec(retries=2)).result
    assert result.termination_reason is Reason.SUCCESS
    assert result.model_calls == 1
    assert len(server.requests) == 3


def test_no_key_in_logs_results_or_reprs(
    server: FakeChatServer,
    make_spec: SpecMaker,
    run_demo: EpisodeRunner,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.add(tool_call("run_command", command="echo x"), tool_call("write_file", **HELLO))
    spec = make_spec()
    record = run_demo("hello-file", spec)
    assert record.result.termination_reason is Reason.SUCCESS
    agent = create_agent(spec)
    assert isinstance(agent, OpenAIAgent)
    agent.reset(brief())
    for shown in (
        repr(agent),
        repr(agent.caller.client()),
        repr(agent.caller.client().config),
        spec.model_dump_json(),
        record.model_dump_json(),
    ):
        assert SECRET not in shown
    assert caplog.records, "expected debug logs from the client"
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_an_agent_error_from_step_is_raised_directly(
    server: FakeChatServer, make_spec: SpecMaker
) -> None:
    server.add(text("no"))
    agent = create_agent(make_spec(max_no_tool_replies=1))
    agent.reset(brief())
    with pytest.raises(AgentError):
        agent.step(StepInput(step=0))


def test_missing_key_is_raised_at_reset(
    server: FakeChatServer, make_spec: SpecMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = create_agent(make_spec())  # building never needs the key: no crash in the job
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(AuthenticationError):
        agent.reset(brief())


def test_the_conversation_is_recorded_with_tool_calls_and_usage(
    server: FakeChatServer, make_spec: SpecMaker, run_demo: EpisodeRunner
) -> None:
    server.add(
        tool_call("run_command", usage=(300, 40), command="echo hi there"),
        tool_call("write_file", usage=(500, 60), **HELLO),
    )
    spec = make_spec(price_in_per_mtok=2.0, price_out_per_mtok=8.0)
    result = run_demo("hello-file", spec).result
    conversation = json.loads(result.conversation_json)
    roles = [message["role"] for message in conversation]
    assert roles == ["system", "user", "user", "assistant", "tool", "user", "assistant"]
    first_reply = conversation[3]
    assert first_reply["tool_calls"][0]["name"] == "run_command"
    assert json.loads(first_reply["tool_calls"][0]["arguments"]) == {"command": "echo hi there"}
    assert (first_reply["tokens_in"], first_reply["tokens_out"]) == (300, 40)
    assert first_reply["cost_usd"] == pytest.approx((300 * 2.0 + 40 * 8.0) / 1e6)
    assert first_reply["model"] == "fake-model"
    tool = conversation[4]
    assert tool["tool_call_id"] == first_reply["tool_calls"][0]["id"]
    assert "hi there" in tool["content"]
    assert "hello.txt" in conversation[1]["content"]
    assert sum(m.get("cost_usd", 0) for m in conversation) == pytest.approx(result.cost_usd)
