"""What LLM agents share: a windowed tool-calling dialogue and a metered model caller.

A ``Dialogue`` is one model's view of an episode: a system message, the task
message, and a list of turns. A turn is the user message of one step (its
observations), the assistant's reply, and the ``tool`` messages answering the
reply's tool calls, which arrive with the next step's results. Trimming the
history drops whole turns, so an assistant message with tool calls is never
separated from its tool replies (the API rejects a conversation that does).

Tool calls become ``ActionCall``s with the model's call id, so the episode's
``CallResult`` for each comes back to the right ``tool`` message. A call the
model botched (arguments that are not a JSON object) still becomes an
``ActionCall``, with arguments no action accepts: the episode rejects it and
records it as that step's action error, and the model is told what was wrong.
"""

from __future__ import annotations

import base64
import json
import logging
import mimetypes
from pathlib import Path
from typing import Any

from crabray.agents.base import ActionCall, AgentSpec, AgentUsage, CallResult, Observation
from crabray.agents.config import LLMSettings, llm_settings, resolve_api_key
from crabray.agents.llm_client import (
    MODEL_API_RETRY,
    CallTally,
    ChatClient,
    ChatResponse,
    ClientConfig,
)
from crabray.agents.model_gate import gate_for
from crabray.core.result import ConversationMessage, ToolCallRecord

logger = logging.getLogger(__name__)

MALFORMED_KEY = "!malformed_arguments"
"""Argument name of a botched call: not an identifier, so no action parameter can accept it."""

Content = str | list[dict[str, Any]]


class Dialogue:
    """One model's conversation over an episode, trimmed to a window of turns.

    Args:
        system: The system prompt.
        task: The first user message: the task itself, always kept.
        window: Most recent turns kept in what is sent to the model.
    """

    def __init__(self, system: str, task: str, window: int, name: str = "agent") -> None:
        self.head: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": task},
        ]
        self.window = window
        self.name = name
        self.turns: list[list[dict[str, Any]]] = []
        self.pending: list[str] = []
        self.problems: dict[str, str] = {}
        self.recorded = 0

    def messages(self) -> list[dict[str, Any]]:
        """What is sent to the model: system and task, then the last ``window`` turns."""
        return [*self.head, *(m for turn in self.turns[-self.window :] for m in turn)]

    def unrecorded(self) -> list[dict[str, Any]]:
        """Messages of the whole history (not the window) not yet in the transcript; marks them."""
        history = [*self.head, *(m for turn in self.turns for m in turn)]
        new = history[self.recorded :]
        self.recorded = len(history)
        return new

    def open_turn(self, content: Content) -> None:
        """Start a turn with the user message of a step."""
        self.turns.append([{"role": "user", "content": content}])

    def answer_pending(self, results: list[CallResult], fallback: str | None = None) -> None:
        """Reply to every tool call of the last assistant message, with the episode's results.

        Args:
            results: What the episode reported for the calls, matched by call id.
            fallback: The reply for a call with no result; by default it says it did not run.
        """
        by_id = {r.call_id: r for r in results if r.call_id is not None}
        for call_id in self.pending:
            result = by_id.get(call_id)
            if call_id in self.problems:
                text = f"error: {self.problems[call_id]}; the call was not run"
            elif result is None:
                text = fallback or "error: this call was not run"
            elif result.error is not None:
                text = f"error: {result.error}"
            else:
                text = result.output or "(no output)"
            self.answer(call_id, text)
        self.pending, self.problems = [], {}

    def answer(self, call_id: str, text: str) -> None:
        """Add the ``tool`` message answering one call."""
        self.turns[-1].append({"role": "tool", "tool_call_id": call_id, "content": text})

    def record_reply(self, response: ChatResponse) -> None:
        """Add the model's reply to the current turn; its tool calls now await answers."""
        if not self.turns:
            self.open_turn("Continue.")
        self.turns[-1].append(response.assistant_message())
        self.pending = [call.id for call in response.tool_calls]

    def action_calls(self, response: ChatResponse, tool_names: set[str]) -> list[ActionCall]:
        """The reply's tool calls as calls for the episode; botched ones are marked to fail.

        Args:
            response: The model's reply, already recorded.
            tool_names: The names this model was offered.
        """
        calls = []
        for call in response.tool_calls:
            problem = None
            try:
                arguments = json.loads(call.arguments) if call.arguments.strip() else {}
            except ValueError as exc:
                problem = f"the arguments are not valid JSON ({exc})"
            else:
                if not isinstance(arguments, dict):
                    problem = f"the arguments must be a JSON object, not {type(arguments).__name__}"
            if problem is None and call.name not in tool_names:
                problem = (
                    f"there is no tool '{call.name}'; available: {', '.join(sorted(tool_names))}"
                )
            if problem is not None:
                logger.info("model made a malformed call to '%s': %s", call.name, problem)
                self.problems[call.id] = problem
                arguments = {MALFORMED_KEY: call.arguments}
            calls.append(ActionCall(name=call.name, arguments=arguments, call_id=call.id))
        return calls


class ModelCaller:
    """Calls one agent's models and meters every call into the agent's usage.

    The key is read here, when the agent starts its first episode, in the
    process that runs it: never in the spec, never in a log line.

    Args:
        spec: The agent's spec; its settings must be ``LLMSettings``.
        usage: The agent's usage record, updated after every call.

    Raises:
        ConfigError: The spec's settings are invalid.
    """

    def __init__(self, spec: AgentSpec, usage: AgentUsage) -> None:
        self.spec = spec
        self.settings: LLMSettings = llm_settings(spec)
        self.usage = usage
        self._client: ChatClient | None = None

    def client(self) -> ChatClient:
        """The HTTP client, built on first use.

        Raises:
            AuthenticationError: The key's variable is not set (or its file lost it).
        """
        if self._client is None:
            key, source = resolve_api_key(self.spec.name, self.settings)
            self._client = ChatClient(
                ClientConfig(
                    base_url=self.settings.base_url,
                    api_key=key,
                    key_source=source,
                    timeout_sec=self.settings.timeout_sec,
                    retry=MODEL_API_RETRY.model_copy(
                        update={"max_attempts": self.settings.retries + 1}
                    ),
                )
            )
        return self._client

    def _waited(self, seconds: float) -> None:
        """Count a wait for the model's limiter or before a retry: the episode leaves it out
        of its time limit (read live, from another thread, by its watchdog)."""
        self.usage.model_wait_sec += seconds

    def ask(
        self, dialogue: Dialogue, tools: list[dict[str, Any]] | None, model: str | None = None
    ) -> ChatResponse:
        """Send ``dialogue`` to the model, record the reply in it, and meter the call.

        Raises:
            ModelAPIError: The request failed (``AuthenticationError`` for a refused key).
        """
        name = model or self.spec.model or ""
        tally = CallTally()
        try:
            response = self.client().complete(
                name,
                dialogue.messages(),
                tools=tools,
                temperature=self.settings.temperature,
                max_tokens=self.settings.max_tokens_per_call,
                gate=gate_for(self.settings, name),
                on_wait=self._waited,
                tally=tally,
            )
        finally:  # a call that failed still made its requests and met its 429s
            self.usage.model_retries += max(tally.attempts - 1, 0)
            self.usage.model_rate_limited += tally.rate_limited
        self.usage.model_calls += 1
        self.usage.tokens_in += response.prompt_tokens
        self.usage.tokens_out += response.completion_tokens
        self.usage.model_latency_sec += response.latency_sec
        self.usage.model_latencies_sec.append(round(response.latency_sec, 4))
        cost = self.settings.cost_usd(response.prompt_tokens, response.completion_tokens)
        self.usage.cost_usd += cost
        sent = dialogue.unrecorded()
        dialogue.record_reply(response)
        *before, reply = [transcript_entry(m, dialogue.name) for m in sent + dialogue.unrecorded()]
        self.usage.conversation.extend(before)
        self.usage.conversation.append(
            reply.model_copy(
                update={
                    "model": name or None,
                    "tokens_in": response.prompt_tokens,
                    "tokens_out": response.completion_tokens,
                    "cost_usd": cost,
                    "latency_sec": response.latency_sec,
                }
            )
        )
        return response


def transcript_entry(message: dict[str, Any], speaker: str) -> ConversationMessage:
    """An API message as the results keep it: text, tool calls, images counted, not kept."""
    content = message.get("content")
    images = 0
    if isinstance(content, list):
        texts = [part.get("text", "") for part in content if part.get("type") == "text"]
        images = sum(1 for part in content if part.get("type") == "image_url")
        content = "\n".join(texts)
    calls = [
        ToolCallRecord(
            id=call["id"], name=call["function"]["name"], arguments=call["function"]["arguments"]
        )
        for call in message.get("tool_calls") or []
    ]
    return ConversationMessage(
        role=message["role"],
        speaker=speaker,
        content=content or "",
        images=images,
        tool_calls=calls,
        tool_call_id=message.get("tool_call_id"),
    )


def observation_content(
    header: str, observations: list[Observation], vision: bool, note: str | None = None
) -> Content:
    """A step's user message: a header, text observations, screenshots, and any note.

    With ``vision`` a screenshot is attached as an image (a data URL, as the
    OpenAI API takes it); without, or when the file cannot be read, the model
    gets a line saying a screenshot exists, so it knows what it is missing.
    """
    lines = [header]
    images: list[dict[str, Any]] = []
    for obs in observations:
        if obs.content:
            lines.append(f"[{obs.env}/{obs.name}] {obs.content}")
        if obs.image_path is None:
            continue
        if not vision:
            lines.append(f"[{obs.env}/{obs.name}] (a screenshot was taken; this agent reads text)")
            continue
        try:
            images.append(_image_part(Path(obs.image_path)))
            lines.append(f"[{obs.env}/{obs.name}] screenshot attached")
        except OSError as exc:
            logger.warning("cannot attach screenshot %s: %s", obs.image_path, exc)
            lines.append(f"[{obs.env}/{obs.name}] (screenshot unreadable: {exc.strerror})")
    if note:
        lines.append(note)
    text = "\n".join(lines)
    return [{"type": "text", "text": text}, *images] if images else text


def results_text(results: list[CallResult]) -> str:
    """The results of the last calls as lines of text, for models that made none of them."""
    lines = []
    for r in results:
        outcome = f"error: {r.error}" if r.error is not None else (r.output or "(no output)")
        lines.append(f"- {r.name}: {outcome}")
    return "\n".join(lines)


def tool_names(tools: list[dict[str, Any]]) -> set[str]:
    """The function names of OpenAI tool schemas."""
    return {t["function"]["name"] for t in tools}


def _image_part(path: Path) -> dict[str, Any]:
    mime = mimetypes.guess_type(path.name)[0] or "image/png"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
