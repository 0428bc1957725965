"""The chat-completions client against a real local HTTP server: replies, retries, errors."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from pydantic import SecretStr

from crabray.agents.llm_client import MODEL_API_RETRY, CallTally, ChatClient, ClientConfig
from crabray.agents.model_gate import LocalGate
from crabray.agents.model_limits import START_CONNECTIONS, ModelLimiter, ModelLimits
from crabray.core.errors import (
    AgentError,
    AuthenticationError,
    ModelAPIError,
    ModelUnreachableError,
)
from crabray.core.retry import RetryPolicy
from tests.agents.fake_server import FakeChatServer, Reply, error, text, tool_call, tool_calls

KEY = "sk-client-secret-77"
FAST = RetryPolicy(max_attempts=3, backoff_initial_sec=0.01, backoff_max_sec=0.05)
MESSAGES = [{"role": "user", "content": "hi"}]


def client_for(server: FakeChatServer, retry: RetryPolicy = FAST, **fields: object) -> ChatClient:
    config = ClientConfig(
        base_url=server.base_url,
        api_key=SecretStr(KEY),
        key_source="environment variable TEST_KEY",
        retry=retry,
        **fields,  # type: ignore[arg-type]
    )
    return ChatClient(config)


def test_sends_the_request_and_parses_tool_calls(server: FakeChatServer) -> None:
    server.add(tool_call("write_file", usage=(321, 45), path="a.txt", content="x"))
    tools = [{"type": "function", "function": {"name": "write_file", "parameters": {}}}]
    with client_for(server) as client:
        reply = client.complete("m1", MESSAGES, tools=tools, temperature=0.3, max_tokens=77)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "m1",
        "messages": MESSAGES,
        "tools": tools,
        "temperature": 0.3,
        "max_tokens": 77,
    }
    (call,) = reply.tool_calls
    assert call.name == "write_file"
    assert call.arguments == '{"path": "a.txt", "content": "x"}'
    assert (reply.prompt_tokens, reply.completion_tokens) == (321, 45)
    assert reply.finish_reason == "tool_calls"
    assert reply.latency_sec > 0
    assert reply.attempts == 1


def test_plain_text_reply_and_no_optional_fields(server: FakeChatServer) -> None:
    server.add(text("hello there"))
    with client_for(server) as client:
        reply = client.complete("m1", MESSAGES)
    assert reply.content == "hello there"
    assert reply.tool_calls == []
    assert set(server.requests[0].body) == {"model", "messages"}
    assert reply.assistant_message() == {"role": "assistant", "content": "hello there"}


def test_missing_and_repeated_call_ids_are_made_unique(server: FakeChatServer) -> None:
    reply = tool_calls([("a", "{}"), ("b", "{}"), ("c", "{}")])
    calls = reply.body["choices"][0]["message"]["tool_calls"]
    calls[0].pop("id")
    calls[2]["id"] = calls[1]["id"]
    server.add(reply)
    with client_for(server) as client:
        ids = [c.id for c in client.complete("m", MESSAGES).tool_calls]
    assert len(set(ids)) == 3


def test_rate_limit_honours_retry_after_then_succeeds(
    server: FakeChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(error(429, "slow down", headers={"Retry-After": "1"}), text("ok"))
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with client_for(server) as client:
        reply = client.complete("m", MESSAGES)
    assert time.monotonic() - started >= 1.0  # the server's wait, not the 0.01 s backoff
    assert reply.content == "ok"
    assert reply.attempts == 2
    assert reply.rate_limited == 1
    assert reply.wait_sec >= 1.0  # a wait, not the model's time
    assert reply.latency_sec < 1.0
    assert len(server.requests) == 2
    assert any("HTTP 429" in r.getMessage() for r in caplog.records)


def test_server_error_is_retried_then_succeeds(server: FakeChatServer) -> None:
    server.add(error(500, "boom"), error(503, "busy"), text("ok"))
    with client_for(server) as client:
        assert client.complete("m", MESSAGES).content == "ok"
    assert len(server.requests) == 3


def test_retries_exhausted_names_the_status_and_message(server: FakeChatServer) -> None:
    server.add(*[error(502, "bad gateway today")] * 3)
    with client_for(server) as client, pytest.raises(ModelAPIError) as caught:
        client.complete("m", MESSAGES)
    assert "HTTP 502 after 3 attempts: bad gateway today" in str(caught.value)
    assert caught.value.status == 502
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_is_immediate_and_never_shows_the_key(
    server: FakeChatServer, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Servers like to echo the key they refused: it must be scrubbed.
    server.add(error(status, f"Incorrect API key provided: {KEY}"))
    caplog.set_level(logging.DEBUG)
    with client_for(server) as client, pytest.raises(AuthenticationError) as caught:
        client.complete("m", MESSAGES)
    message = str(caught.value)
    assert isinstance(caught.value, AgentError)
    assert f"HTTP {status}" in message
    assert "environment variable TEST_KEY" in message
    assert KEY not in message
    assert "Incorrect API key provided: ***" in message
    assert len(server.requests) == 1
    assert all(KEY not in r.getMessage() for r in caplog.records)


def test_other_client_error_carries_the_server_message(server: FakeChatServer) -> None:
    server.add(error(400, "model 'm' does not support tools"))
    with client_for(server) as client, pytest.raises(ModelAPIError) as caught:
        client.complete("m", MESSAGES)
    assert not isinstance(caught.value, AuthenticationError)
    assert "HTTP 400: model 'm' does not support tools" in str(caught.value)
    assert len(server.requests) == 1


def test_unreadable_body_is_an_error(server: FakeChatServer) -> None:
    server.add(Reply({"choices": []}))
    with client_for(server) as client, pytest.raises(ModelAPIError, match="unreadable"):
        client.complete("m", MESSAGES)


def test_connection_errors_are_retried_then_reported() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = ClientConfig(base_url=f"http://127.0.0.1:{port}/v1", retry=FAST)
    started = time.monotonic()
    with ChatClient(config) as client, pytest.raises(ModelAPIError, match="ConnectError"):
        client.complete("m", MESSAGES)
    assert time.monotonic() - started < 5


def test_read_timeout_is_retried(server: FakeChatServer) -> None:
    server.add(text("in time"), text("in time"))
    original = server._next
    seen = []

    def slow_once(request):  # type: ignore[no-untyped-def]
        seen.append(request)
        if len(seen) == 1:
            time.sleep(0.6)
        return original(request)

    server._next = slow_once  # type: ignore[method-assign]
    with client_for(server, timeout_sec=0.3) as client:
        reply = client.complete("m", MESSAGES)
    assert reply.content == "in time"
    assert reply.attempts == 2


def test_secrets_stay_out_of_reprs(server: FakeChatServer) -> None:
    with client_for(server) as client:
        assert KEY not in repr(client)
        assert KEY not in repr(client.config)
        assert KEY not in str(client.config.model_dump())


def test_backoff_grows_is_capped_and_jittered() -> None:
    policy = MODEL_API_RETRY.model_copy(
        update={"backoff_initial_sec": 1, "backoff_multiplier": 2, "backoff_max_sec": 5}
    )
    assert policy.max_attempts == 5  # four retries after the first try
    assert 1 <= policy.backoff_sec(1) <= 1.25
    assert 4 <= policy.backoff_sec(3) <= 5
    assert 5 <= policy.backoff_sec(11) <= 6.25
    config = ClientConfig(base_url="http://127.0.0.1:1/v1", retry=policy)
    assert 1 <= config.wait_sec(1) <= 1.25
    assert config.wait_sec(1, retry_after_sec=500) == config.max_retry_after_sec
    assert config.retries_status(429) and config.retries_status(500)
    assert not config.retries_status(400)


def test_with_a_limiter_each_try_waits_for_a_grant_and_a_429_backs_it_off(
    server: FakeChatServer,
) -> None:
    server.add(error(429, "slow down", headers={"Retry-After": "0"}), text("ok"))
    core = ModelLimiter(ModelLimits(max_connections=16), time.monotonic)
    gate = LocalGate(core)
    waits: list[float] = []
    tally = CallTally()
    with client_for(server) as client:
        reply = client.complete("m", MESSAGES, gate=gate, on_wait=waits.append, tally=tally)
    assert reply.content == "ok"
    state = gate.state()
    assert state.granted == 2 and state.in_flight == 0  # the retry was granted again
    assert state.rate_limited == 1 and state.decreases == 1
    assert core.limit < START_CONNECTIONS
    assert tally.attempts == 2 and tally.rate_limited == 1


def test_with_a_limiter_retries_stay_within_the_retry_budget(server: FakeChatServer) -> None:
    server.fallback = lambda request: error(429, "slow down", headers={"Retry-After": "0"})
    gate = LocalGate(ModelLimiter(ModelLimits(max_connections=4), time.monotonic))
    tally = CallTally()
    with client_for(server) as client, pytest.raises(ModelUnreachableError, match="429"):
        client.complete("m", MESSAGES, gate=gate, tally=tally)
    assert len(server.requests) == FAST.max_attempts
    assert tally.attempts == FAST.max_attempts and tally.rate_limited == FAST.max_attempts
    assert gate.state().in_flight == 0
