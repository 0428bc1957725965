"""A small client for OpenAI-compatible chat-completions APIs (hosted APIs, vLLM, Ollama, ...).

Only what tool-calling agents need: one ``POST {base_url}/chat/completions``
with messages and tools, a typed response, and the robustness a long sweep
needs. Rate limits (429, honouring ``Retry-After``), server errors (5xx) and
connection failures are retried with exponential backoff and jitter, as
``ClientConfig`` and its ``RetryPolicy`` (``crabray.core.retry``) say; a
refused key (401/403) fails at once with ``AuthenticationError``; any other
client error fails with the server's own message. The API key is a
``SecretStr``: it is sent in the ``Authorization`` header and nowhere else,
never logged, and scrubbed from any server message that echoes it.
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from crabray.agents.model_limits import Gate, Outcome, WaitCallback
from crabray.core.errors import AuthenticationError, ModelAPIError, ModelUnreachableError
from crabray.core.retry import RetryPolicy
from crabray.core.words import counted

logger = logging.getLogger(__name__)

_AUTH_STATUSES = (401, 403)
_SERVER_MESSAGE_CHARS = 500


_LEASE_MARGIN_SEC = 30.0
"""How much longer than a request's own timeouts a limiter keeps its place without a word."""

MODEL_API_RETRY = RetryPolicy(max_attempts=5, jitter_fraction=0.25)
"""The client's default: four retries, waits from 1 s doubling up to 30 s, a quarter jitter."""


class ClientConfig(BaseModel):
    """Where the API is and how to talk to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="API root, e.g. https://api.openai.com/v1.")
    api_key: SecretStr | None = Field(
        default=None, description="Sent as a bearer token; None for servers that need none."
    )
    key_source: str | None = Field(
        default=None,
        description="Where the key came from (e.g. 'environment variable OPENAI_API_KEY'), "
        "named in authentication errors so the user knows what to fix.",
    )
    timeout_sec: float = Field(default=120.0, gt=0, description="Per request (read and write).")
    connect_timeout_sec: float = Field(default=10.0, gt=0)
    retry: RetryPolicy = Field(
        default=MODEL_API_RETRY, description="Tries of a request that is worth retrying."
    )
    retry_statuses: frozenset[int] = Field(
        default=frozenset({408, 409, 429}),
        description="Client statuses worth retrying; every 5xx is retried as well.",
    )
    retry_connection_errors: bool = Field(
        default=True, description="Retry timeouts, refused connections and dropped sockets."
    )
    max_retry_after_sec: float = Field(
        default=120.0, ge=0, description="Longest server-requested wait that is honoured."
    )

    def retries_status(self, status: int) -> bool:
        """Whether a response with this HTTP status is worth another try."""
        return status in self.retry_statuses or status >= 500

    def wait_sec(self, attempt: int, retry_after_sec: float | None = None) -> float:
        """Seconds to wait before try ``attempt`` (1 for the first retry).

        A server's ``Retry-After`` wins over the policy's backoff, up to
        ``max_retry_after_sec``.
        """
        if retry_after_sec is not None:
            return min(max(retry_after_sec, 0.0), self.max_retry_after_sec)
        return self.retry.backoff_sec(attempt)


@dataclass
class CallTally:
    """What one ``complete`` call cost in tries, 429s and waits, kept also when it fails."""

    attempts: int = 0
    rate_limited: int = 0
    wait_sec: float = 0.0


def _waited(tally: CallTally, on_wait: WaitCallback | None) -> WaitCallback:
    """A callback adding a wait to ``tally`` and telling ``on_wait``."""

    def waited(seconds: float) -> None:
        tally.wait_sec += seconds
        if on_wait is not None:
            on_wait(seconds)

    return waited


class ToolCall(BaseModel):
    """One function call the model asked for, arguments as the raw JSON text it produced."""

    id: str
    name: str
    arguments: str = ""


class ChatResponse(BaseModel):
    """The first choice of a chat completion, with usage and timing."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_sec: float = Field(
        default=0.0,
        description="From the first attempt to the answer, retries included, waits not "
        "(for a limiter's grant, before a retry): the model's own time.",
    )
    attempts: int = Field(default=1, description="Requests sent, the successful one included.")
    rate_limited: int = Field(default=0, description="Requests answered 429 before this one.")
    wait_sec: float = Field(
        default=0.0, description="Seconds waited for a limiter's grants and before retries."
    )

    def assistant_message(self) -> dict[str, Any]:
        """The reply as an ``assistant`` message, to append to the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


class ChatClient:
    """Sends chat-completion requests to one OpenAI-compatible endpoint.

    Args:
        config: Endpoint, key, timeouts and retry policy.
        transport: An httpx transport, for unusual network setups (proxies, unix sockets).

    Example:
        >>> client = ChatClient(ClientConfig(base_url="http://127.0.0.1:8000/v1"))
        >>> messages = [{"role": "user", "content": "hi"}]
        >>> reply = client.complete("my-model", messages)  # doctest: +SKIP
    """

    def __init__(self, config: ClientConfig, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        headers = {"Content-Type": "application/json"}
        if config.api_key is not None:
            headers["Authorization"] = f"Bearer {config.api_key.get_secret_value()}"
        self._http = httpx.Client(
            base_url=config.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(config.timeout_sec, connect=config.connect_timeout_sec),
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"ChatClient(base_url={self.config.base_url!r})"

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        *,
        gate: Gate | None = None,
        on_wait: WaitCallback | None = None,
        tally: CallTally | None = None,
    ) -> ChatResponse:
        """Ask the model for the next message.

        With a ``gate`` (the endpoint's limiter), every request, retries included,
        waits for a grant first and reports how it ended: a 429 makes the limiter
        back off before the retry is granted.

        Args:
            model: The model name the server knows.
            messages: The conversation, OpenAI message dicts.
            tools: OpenAI tool schemas; omitted from the request when empty.
            temperature: Sampling temperature; the server's default when None.
            max_tokens: Most tokens to generate; the server's default when None.
            gate: The endpoint's limiter; None sends at once.
            on_wait: Told each stretch of seconds waited (for a grant or before a retry).
            tally: Filled with the tries, 429s and waits, also when the call fails.

        Returns:
            The first choice, its token usage and the time it took.

        Raises:
            AuthenticationError: The server refused the key (401/403); not retried.
            ModelUnreachableError: No answer (connection, 5xx, 429) after the retries.
            ModelAPIError: Another client error or an unreadable answer.
        """
        body: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            body["tools"] = tools
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        policy = self.config.retry
        tally = tally if tally is not None else CallTally()
        lease = self.config.timeout_sec + self.config.connect_timeout_sec + _LEASE_MARGIN_SEC
        estimate = _estimate_tokens(body, max_tokens)
        started = time.monotonic()
        for attempt in range(policy.max_attempts):
            last = attempt == policy.max_attempts - 1
            ticket = None
            if gate is not None:
                ticket = gate.acquire(estimate, lease, _waited(tally, on_wait))
            tally.attempts += 1
            sent = time.monotonic()
            try:
                response = self._http.post("chat/completions", json=body)
            except httpx.TransportError as exc:
                if gate is not None and ticket is not None:
                    gate.release(ticket, Outcome.SERVER_ERROR)
                problem = f"{type(exc).__name__}: {exc}"
                if last or not self.config.retry_connection_errors:
                    raise ModelUnreachableError(
                        self._describe(f"request failed: {problem}")
                    ) from exc
                self._wait(attempt, None, problem, tally, on_wait)
                continue
            except BaseException:
                if gate is not None and ticket is not None:
                    gate.release(ticket, Outcome.OTHER)
                raise
            took = time.monotonic() - sent
            status = response.status_code
            retry_after = _retry_after_sec(response) if status >= 400 else None
            if status == 429:
                tally.rate_limited += 1
            if gate is not None and ticket is not None:
                self._report(gate, ticket, response, took, retry_after)
            if status < 400:
                reply = self._parse(response, model)
                reply.wait_sec = tally.wait_sec
                reply.latency_sec = max(time.monotonic() - started - tally.wait_sec, 0.0)
                reply.attempts = attempt + 1
                reply.rate_limited = tally.rate_limited
                logger.debug(
                    "%s answered in %.2f s (%s, %d+%d tokens, %.2f s waited)",
                    model,
                    reply.latency_sec,
                    counted(reply.attempts, "attempt"),
                    reply.prompt_tokens,
                    reply.completion_tokens,
                    reply.wait_sec,
                )
                return reply
            self._raise_unless_retryable(response, last)
            self._wait(attempt, retry_after, f"HTTP {status}", tally, on_wait)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    @staticmethod
    def _report(
        gate: Gate, ticket: int, response: httpx.Response, took: float, retry_after: float | None
    ) -> None:
        """Tell the limiter how a granted request ended, so that it adapts."""
        status = response.status_code
        if status < 400:
            usage = _usage_tokens(response)
            gate.release(ticket, Outcome.OK, latency_sec=took, tokens=usage)
        elif status == 429:
            gate.release(ticket, Outcome.RATE_LIMITED, retry_after_sec=retry_after)
        elif status >= 500:
            gate.release(ticket, Outcome.SERVER_ERROR)
        else:
            gate.release(ticket, Outcome.OTHER)

    def _raise_unless_retryable(self, response: httpx.Response, last: bool) -> None:
        status = response.status_code
        message = self._server_message(response)
        if status in _AUTH_STATUSES:
            source = self.config.key_source or "no API key was configured"
            raise AuthenticationError(
                self._describe(
                    f"the server refused the credentials (HTTP {status}: {message}); "
                    f"check the key ({source})"
                ),
                status=status,
            )
        if not self.config.retries_status(status):
            raise ModelAPIError(self._describe(f"HTTP {status}: {message}"), status=status)
        if last:
            tries = self.config.retry.max_attempts
            raise ModelUnreachableError(
                self._describe(f"HTTP {status} after {counted(tries, 'attempt')}: {message}"),
                status=status,
            )

    def _wait(
        self,
        attempt: int,
        retry_after_sec: float | None,
        problem: str,
        tally: CallTally,
        on_wait: WaitCallback | None,
    ) -> None:
        """Wait after try ``attempt`` (from 0) failed, before the next one; the wait is
        counted (told first: the episode's watchdog reads it while this thread sleeps)."""
        delay = self.config.wait_sec(attempt + 1, retry_after_sec)
        _waited(tally, on_wait)(delay)
        logger.warning(
            "model API at %s: %s; retry %d of %d in %.1f s",
            self.config.base_url,
            problem,
            attempt + 1,
            self.config.retry.max_attempts - 1,
            delay,
        )
        time.sleep(delay)

    def _parse(self, response: httpx.Response, model: str) -> ChatResponse:
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
            usage = data.get("usage") or {}
            calls: list[ToolCall] = []
            for index, call in enumerate(message.get("tool_calls") or []):
                # Some servers omit ids or repeat them; tool replies need unique ones.
                call_id = call.get("id") or f"call_{index}"
                if any(c.id == call_id for c in calls):
                    call_id = f"{call_id}_{index}"
                arguments = call["function"].get("arguments") or ""
                if not isinstance(arguments, str):  # a few servers send an object
                    arguments = json.dumps(arguments)
                calls.append(
                    ToolCall(id=call_id, name=call["function"]["name"], arguments=arguments)
                )
            return ChatResponse(
                content=message.get("content"),
                tool_calls=calls,
                finish_reason=choice.get("finish_reason"),
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            )
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            snippet = self._scrub(response.text[:_SERVER_MESSAGE_CHARS])
            raise ModelAPIError(
                self._describe(f"unreadable chat completion for model '{model}': {snippet!r}"),
                status=response.status_code,
            ) from exc

    def _server_message(self, response: httpx.Response) -> str:
        """The server's explanation: ``error.message`` of an OpenAI error body, else the text."""
        text = response.text
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict) and error.get("message"):
                text = str(error["message"])
            elif isinstance(error, str):
                text = error
            elif data.get("message"):
                text = str(data["message"])
        return self._scrub(text.strip()[:_SERVER_MESSAGE_CHARS] or response.reason_phrase)

    def _scrub(self, text: str) -> str:
        """``text`` without the API key, in case the server echoed it."""
        if self.config.api_key is None:
            return text
        secret = self.config.api_key.get_secret_value()
        return text.replace(secret, "***") if secret else text

    def _describe(self, problem: str) -> str:
        return f"model API at {self.config.base_url}: {problem}"


def _estimate_tokens(body: dict[str, Any], max_tokens: int | None) -> int:
    """A request's tokens as a ``tpm`` limit counts them before the answer says: its text at
    about four characters a token, and the most it may generate."""
    return len(json.dumps(body, default=str)) // 4 + (max_tokens or 0)


def _usage_tokens(response: httpx.Response) -> int | None:
    """The tokens an answer says it used (prompt and completion), if it says."""
    try:
        usage = response.json().get("usage") or {}
        return int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
    except (ValueError, AttributeError, TypeError):
        return None


def _retry_after_sec(response: httpx.Response) -> float | None:
    """The server's ``Retry-After`` (seconds or an HTTP date), if it sent a usable one."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        logger.debug("ignoring unparsable Retry-After %r", value)
        return None
    return max(when.timestamp() - time.time(), 0.0)
