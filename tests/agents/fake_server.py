"""A real HTTP server speaking the chat-completions protocol, scripted by tests.

``crabray.agents.chat_server.ChatServer`` (what ``crabray llm serve`` runs)
with a scripted responder: it listens on 127.0.0.1 (a random port) in a thread
of the test process and answers ``POST /v1/chat/completions`` with the next
scripted reply: a tool call, plain text, or an HTTP error with headers. Every
request it receives is recorded (headers and JSON body) so tests can assert
what the agent sent. Ray workers reach it over the same socket, so it serves
CLI runs too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from crabray.agents import chat_server
from crabray.agents.chat_server import COMPLETIONS_PATH, ChatServer, error_reply, tool_call_message
from crabray.agents.chat_server import ChatReply as Reply
from crabray.agents.chat_server import ChatRequest as Request

__all__ = [
    "FakeChatServer",
    "Reply",
    "Request",
    "completion",
    "error",
    "text",
    "tool_call",
    "tool_calls",
]

error = error_reply


def completion(
    message: dict[str, Any], usage: tuple[int, int] = (100, 20), finish: str = "stop"
) -> Reply:
    return chat_server.completion(message, usage, model="fake", finish=finish)


def tool_call(name: str, usage: tuple[int, int] = (100, 20), **arguments: Any) -> Reply:
    """A reply calling one tool with JSON arguments."""
    return tool_calls([(name, json.dumps(arguments))], usage=usage)


def tool_calls(calls: list[tuple[str, str]], usage: tuple[int, int] = (100, 20)) -> Reply:
    """A reply calling several tools; arguments are raw strings (so they can be malformed)."""
    return completion(tool_call_message(calls), usage=usage, finish="tool_calls")


def text(content: str, usage: tuple[int, int] = (100, 20)) -> Reply:
    """A reply with text and no tool call."""
    return completion({"role": "assistant", "content": content}, usage=usage)


class FakeChatServer(ChatServer):
    """Serves scripted replies in order; when the script runs out, ``fallback`` answers.

    Args:
        fallback: Builds the reply once the script is used up; by default a 400 error,
            so a test that under-scripts fails loudly instead of hanging.
    """

    def __init__(self, fallback: Callable[[Request], Reply] | None = None) -> None:
        # Looked up per request, so a test can wrap ``_next`` after the server starts.
        super().__init__(lambda request: self._next(request))
        self.script: list[Reply] = []
        self.requests: list[Request] = []
        self.fallback = fallback or (lambda _: error(400, "fake server: script exhausted"))
        self._lock = threading.Lock()

    def add(self, *replies: Reply) -> FakeChatServer:
        with self._lock:
            self.script.extend(replies)
        return self

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if request.path != COMPLETIONS_PATH:
                return error(404, f"no route {request.path}")
            return self.script.pop(0) if self.script else self.fallback(request)

    def __enter__(self) -> FakeChatServer:
        super().__enter__()
        return self
