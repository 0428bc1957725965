"""An episode's model conversation (``conversation_json``) as the episode page shows it."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from crabray.core.result import ConversationMessage
from crabray.results.board.cells import is_missing, usd

logger = logging.getLogger(__name__)

_MESSAGES = TypeAdapter(list[ConversationMessage])


class ConversationFormatError(ValueError):
    """``conversation_json`` is not a JSON list of conversation messages."""


@dataclass(frozen=True)
class ShownCall:
    """A tool call with its arguments indented for reading."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ShownMessage:
    """One message: who wrote it, its text, its calls, and what the call cost."""

    role: str
    speaker: str
    content: str
    images: int
    calls: list[ShownCall]
    answers: str | None
    usage: str | None


def pretty_json(text: str) -> str:
    """Arguments as indented JSON; the raw text when it is not JSON (shown, not hidden)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except (json.JSONDecodeError, TypeError):
        return text


def usage_text(message: ConversationMessage) -> str | None:
    """``300 in · 40 out tokens · $0.00092 · 1.20 s`` for a reply; None for other messages."""
    parts = []
    if message.tokens_in is not None or message.tokens_out is not None:
        parts.append(f"{message.tokens_in or 0} in · {message.tokens_out or 0} out tokens")
    if message.cost_usd is not None:
        parts.append(f"${usd(message.cost_usd)}")
    if message.latency_sec is not None:
        parts.append(f"{message.latency_sec:.2f} s")
    if message.model:
        parts.insert(0, message.model)
    return " · ".join(parts) or None


def parse_conversation(conversation_json: object) -> list[ShownMessage]:
    """The messages of an episode; empty for agents without a model and for older rows.

    Raises:
        ConversationFormatError: The text is not a JSON list of conversation messages.
    """
    if is_missing(conversation_json) or conversation_json == "":
        return []
    try:
        messages = _MESSAGES.validate_json(str(conversation_json))
    except ValidationError as exc:
        raise ConversationFormatError(f"not a list of conversation messages: {exc}") from exc
    return [
        ShownMessage(
            role=message.role,
            speaker=message.speaker,
            content=message.content,
            images=message.images,
            calls=[
                ShownCall(call.id, call.name, pretty_json(call.arguments))
                for call in message.tool_calls
            ],
            answers=message.tool_call_id,
            usage=usage_text(message) if message.role == "assistant" else None,
        )
        for message in messages
    ]
