"""A small local chat-completions server: LLM agents with no key and no network.

``ChatServer`` speaks as much of OpenAI's protocol as crabray's client uses
(``POST /v1/chat/completions``, ``GET /v1/models``) over the standard
library's HTTP server; a responder (a function from the request to the reply)
decides every answer. The agents' tests script it reply by reply; ``crabray
llm serve`` runs it with ``ReplayModel``.

``ReplayModel`` stands in for a model, deterministically: it recognises the
task in the conversation's task message, answers step N with a tool call of
step N of that task's reference solution, then calls ``complete``. It reports
token usage (about four characters per token, OpenAI's rule of thumb), so a
run against it goes through the real agent, HTTP client, pricing, limits and
result rows exactly as a run against a hosted model does. A task it has no
solution for gets a ``fail`` call saying so: an agent's failure, as a real
model's would be.

Given ``ProviderLimits`` (``crabray llm serve --max-concurrent --rpm --tpm
--latency --error-rate``), the server also behaves like a hosted provider under
load: 429s with ``Retry-After`` past its limits, slow replies, random 500s
(``provider_limits`` says which, in what order). Whatever its limits, it counts
what it did and shows it on ``GET /stats`` (``ProviderStats`` as JSON).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from crabray.agents.base import ActionCall
from crabray.agents.provider_limits import ProviderLimits, ProviderSimulator, Refusal

logger = logging.getLogger(__name__)

COMPLETIONS_PATH = "/v1/chat/completions"
STATS_PATH = "/stats"
CHARS_PER_TOKEN = 4
"""How usage is estimated: about four characters of JSON per token."""

_ids = itertools.count()
_STEP_HEADER = re.compile(r"^Step (\d+) of \d+\.", re.MULTILINE)


@dataclass
class ChatRequest:
    """What the server received: path, headers (lower-cased names) and JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools") or []]


@dataclass
class ChatReply:
    """One answer: an HTTP status, a JSON body and extra headers."""

    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[ChatRequest], ChatReply]


def completion(
    message: dict[str, Any], usage: tuple[int, int], model: str = "mock", finish: str = "stop"
) -> ChatReply:
    """A chat completion with one choice and its ``(prompt, completion)`` token usage."""
    return ChatReply(
        {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }
    )


def tool_call_message(calls: list[tuple[str, str]], content: str | None = None) -> dict[str, Any]:
    """An assistant message calling tools; arguments are raw JSON text, as models send them."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for name, arguments in calls
        ],
    }


def error_reply(status: int, message: str, headers: dict[str, str] | None = None) -> ChatReply:
    """An OpenAI-style error body."""
    body = {"error": {"message": message, "type": "error", "code": status}}
    return ChatReply(body, status=status, headers=headers or {})


def estimate_tokens(value: Any) -> int:
    """Tokens of a JSON value, estimated from its length (at least one for anything sent)."""
    if not value:
        return 0
    return max(1, math.ceil(len(json.dumps(value, ensure_ascii=False)) / CHARS_PER_TOKEN))


class _HTTPServer(ThreadingHTTPServer):
    """A thread per request, and a listen backlog for a crowd: the standard library's is 5,
    so a burst of a hundred clients would see refused or stalled connections instead of 429s."""

    daemon_threads = True
    request_queue_size = 1024


class ChatServer:
    """Serves ``responder``'s replies over HTTP on ``host:port`` (port 0: any free port).

    Use it as a context manager to serve from a background thread, or call
    ``serve_forever`` to serve in the foreground. Every request is answered in
    a thread of its own, so ``limits`` on concurrency mean what they say.

    Args:
        responder: Decides every reply.
        host: Address to listen on.
        port: Port to listen on (0: any free port).
        limits: A provider's limits to simulate (None: none, every request answered at once).

    Raises:
        OSError: The address cannot be bound (port taken, host unknown).
    """

    def __init__(
        self,
        responder: Responder,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ProviderLimits | None = None,
    ) -> None:
        self.responder = responder
        self.provider = ProviderSimulator(limits)
        self.httpd = _HTTPServer((host, port), _handler(self))
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The URL agents take as ``base_url``."""
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def answer(self, request: ChatRequest) -> ChatReply:
        """The reply to one request, within the provider's limits, counted in its stats."""
        refusal = self.provider.admit()
        if refusal is not None:
            return _rate_limited(refusal)
        reply = error_reply(500, "mock server error: no reply")
        try:
            reply = self._limited_answer(request)
        finally:
            self.provider.finish(reply.status, _usage(reply))
        return reply

    def _limited_answer(self, request: ChatRequest) -> ChatReply:
        """An admitted request's reply: an injected failure, a tpm refusal or the responder's."""
        if self.provider.fails():
            self.provider.delay()
            self.provider.note_injected_error()
            return error_reply(500, "mock provider error (injected: --error-rate)")
        reply = self._respond(request)
        if reply.status < 400:
            refusal = self.provider.take_tokens(sum(_usage(reply)))
            if refusal is not None:
                return _rate_limited(refusal)
        self.provider.delay()
        return reply

    def _respond(self, request: ChatRequest) -> ChatReply:
        """The responder's reply; a responder's bug becomes a 500 naming it."""
        try:
            return self.responder(request)
        except Exception as exc:
            logger.exception("the chat server's responder failed on %s", request.path)
            return error_reply(500, f"mock server error: {type(exc).__name__}: {exc}")

    def serve_forever(self) -> None:
        """Serve in this thread until ``shutdown`` (or KeyboardInterrupt)."""
        self.httpd.serve_forever(poll_interval=0.05)

    def shutdown(self) -> None:
        """Stop serving and release the socket; log what was served."""
        self.httpd.shutdown()
        self.httpd.server_close()
        logger.info("chat server at %s stopped: %s", self.base_url, self.provider.stats().summary())

    def __enter__(self) -> ChatServer:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class of one server."""

    class Handler(BaseHTTPRequestHandler):
        # Connections kept open between requests, as a hosted API keeps them: with the
        # standard library's HTTP/1.0 each call paid a new connection and thread, which on
        # a loaded 2-core machine was most of the 30 ms a call spent outside the mock's
        # slot (docs/models.md, "Why the limit sits above the provider's number").
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError as exc:
                self._send(error_reply(400, f"the request body is not JSON: {exc}"))
                return
            if not isinstance(body, dict):
                self._send(error_reply(400, "the request body must be a JSON object"))
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            self._send(server.answer(ChatRequest(self.path, headers, body)))

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                models = {"object": "list", "data": [{"id": "mock", "object": "model"}]}
                self._send(ChatReply(models))
            elif self.path.rstrip("/") == STATS_PATH:
                self._send(ChatReply(server.provider.stats().model_dump(mode="json")))
            else:
                self._send(error_reply(404, f"no route GET {self.path}"))

        def _send(self, reply: ChatReply) -> None:
            payload = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            # A client that gave up (it timed out) has nobody left to answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s %s", self.address_string(), format % args)

    return Handler


def _rate_limited(refusal: Refusal) -> ChatReply:
    """A 429 as hosted APIs send it: an error body and when to retry, in seconds."""
    headers = {"Retry-After": str(refusal.retry_after_sec)}
    body = {"error": {"message": refusal.message, "type": "rate_limit_exceeded", "code": 429}}
    return ChatReply(body, status=429, headers=headers)


def _usage(reply: ChatReply) -> tuple[int, int]:
    """A reply's ``(prompt, completion)`` tokens, as its ``usage`` reports them (0 if none)."""
    usage = reply.body.get("usage")
    if not isinstance(usage, dict):
        return 0, 0
    counts = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
    prompt_tokens, completion_tokens = (c if isinstance(c, int) else 0 for c in counts)
    return prompt_tokens, completion_tokens


class ReplayModel:
    """A deterministic model: replays each task's reference solution as tool calls.

    Args:
        solutions: Task description -> the calls of its reference solution, named as the
            agent's tools are (``<env>-<action>`` in multi-environment tasks).
    """

    def __init__(self, solutions: dict[str, list[ActionCall]]) -> None:
        self.solutions = solutions

    def __call__(self, request: ChatRequest) -> ChatReply:
        if request.path.rstrip("/") != COMPLETIONS_PATH:
            return error_reply(404, f"no route POST {request.path}")
        messages = request.body.get("messages")
        if not isinstance(messages, list) or not messages:
            return error_reply(400, "'messages' must be a non-empty list")
        name, arguments, content = self._next_call(messages, request.tool_names)
        message = (
            tool_call_message([(name, json.dumps(arguments))], content)
            if name is not None
            else {"role": "assistant", "content": content}
        )
        usage = (
            estimate_tokens(messages) + estimate_tokens(request.body.get("tools")),
            estimate_tokens(message),
        )
        finish = "tool_calls" if name is not None else "stop"
        return completion(message, usage, str(request.body.get("model", "mock")), finish)

    def _next_call(
        self, messages: list[dict[str, Any]], tools: list[str]
    ) -> tuple[str | None, dict[str, Any], str]:
        """The tool to call (None: answer in text), its arguments and the reply's text."""
        calls = self._solution(messages)
        if calls is None:
            reason = "the mock model has no reference solution for this task"
            return _give_up(reason, tools)
        step = _step_number(messages)
        if step > len(calls):
            return _call_or_give_up("complete", {}, "The reference solution is replayed.", tools)
        call = calls[step - 1]
        text = f"Step {step} of the reference solution: {call.name}."
        return _call_or_give_up(call.name, call.arguments, text, tools)

    def _solution(self, messages: list[dict[str, Any]]) -> list[ActionCall] | None:
        """The solution of the task the conversation's user messages state, if known."""
        for message in messages:
            if message.get("role") != "user":
                continue
            text = _text(message.get("content"))
            found = self.solutions.get(text.removeprefix("Task: ").strip())
            if found is not None:
                return found
            for description, calls in self.solutions.items():
                if description in text:
                    return calls
        return None


def _call_or_give_up(
    name: str, arguments: dict[str, Any], text: str, tools: list[str]
) -> tuple[str | None, dict[str, Any], str]:
    if name in tools:
        return name, arguments, text
    return _give_up(f"the tool '{name}' the solution needs is not offered", tools)


def _give_up(reason: str, tools: list[str]) -> tuple[str | None, dict[str, Any], str]:
    if "fail" in tools:
        return "fail", {"reason": reason}, f"I cannot do this: {reason}."
    return None, {}, f"I cannot do this: {reason}."


def _step_number(messages: list[dict[str, Any]]) -> int:
    """The step the agent is at: its last ``Step N of M.`` header, else one past its replies."""
    for message in reversed(messages):
        if message.get("role") == "user":
            match = _STEP_HEADER.search(_text(message.get("content")))
            if match:
                return int(match.group(1))
    return 1 + sum(1 for m in messages if m.get("role") == "assistant")


def _text(content: Any) -> str:
    """The text of a message's content, a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
