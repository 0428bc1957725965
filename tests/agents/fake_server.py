"""A real HTTP server speaking the chat-completions protocol, scripted by tests.

It listens on 127.0.0.1 (a random port) in a thread of the test process and
answers ``POST /v1/chat/completions`` with the next scripted reply: a tool
call, plain text, or an HTTP error with headers. Every request it receives is
recorded (headers and JSON body) so tests can assert what the agent sent.
Ray workers reach it over the same socket, so it serves CLI runs too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count()


@dataclass
class Reply:
    """One scripted answer: a status, a JSON body and headers."""

    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Request:
    """What the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body["messages"]

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools", [])]


def completion(
    message: dict[str, Any], usage: tuple[int, int] = (100, 20), finish: str = "stop"
) -> Reply:
    return Reply(
        {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }
    )


def tool_call(name: str, usage: tuple[int, int] = (100, 20), **arguments: Any) -> Reply:
    """A reply calling one tool with JSON arguments."""
    return tool_calls([(name, json.dumps(arguments))], usage=usage)


def tool_calls(calls: list[tuple[str, str]], usage: tuple[int, int] = (100, 20)) -> Reply:
    """A reply calling several tools; arguments are raw strings (so they can be malformed)."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for name, arguments in calls
        ],
    }
    return completion(message, usage=usage, finish="tool_calls")


def text(content: str, usage: tuple[int, int] = (100, 20)) -> Reply:
    """A reply with text and no tool call."""
    return completion({"role": "assistant", "content": content}, usage=usage)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An OpenAI-style error body."""
    body = {"error": {"message": message, "type": "error", "code": status}}
    return Reply(body, status=status, headers=headers or {})


class FakeChatServer:
    """Serves scripted replies in order; when the script runs out, ``fallback`` answers.

    Args:
        fallback: Builds the reply once the script is used up; by default a 400 error,
            so a test that under-scripts fails loudly instead of hanging.
    """

    def __init__(self, fallback: Callable[[Request], Reply] | None = None) -> None:
        self.script: list[Reply] = []
        self.requests: list[Request] = []
        self.fallback = fallback or (lambda _: error(400, "fake server: script exhausted"))
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next(request)
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                # A client that gave up (a timeout test) has nobody left to answer.
                with contextlib.suppress(BrokenPipeError):
                    self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests assert on recorded requests instead."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add(self, *replies: Reply) -> FakeChatServer:
        with self._lock:
            self.script.extend(replies)
        return self

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if request.path != "/v1/chat/completions":
                return error(404, f"no route {request.path}")
            return self.script.pop(0) if self.script else self.fallback(request)

    def __enter__(self) -> FakeChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve(fallback: Callable[[Request], Reply] | None = None) -> Iterator[FakeChatServer]:
    """Run a server for the duration of a fixture."""
    with FakeChatServer(fallback) as server:
        yield server
