"""``conversation_json``: a conversation kept whole under its cap, cut in the middle past it."""

from __future__ import annotations

import json
import re

import pytest

from crabray.core.result import (
    CUT_SPEAKER,
    MIN_CONVERSATION_BYTES,
    ConversationMessage,
    conversation_json,
)


def _chat(n: int, size: int) -> list[ConversationMessage]:
    first = ConversationMessage(role="system", content="You are an agent. Task: é ✓")
    rest = [
        ConversationMessage(role="assistant" if i % 2 else "tool", content=f"{i}:" + "é" * size)
        for i in range(1, n)
    ]
    return [first, *rest]


def test_a_conversation_under_the_cap_is_written_whole_as_before() -> None:
    messages = _chat(5, 100)
    text = conversation_json(messages, 1_000_000)
    assert text == json.dumps(
        [m.model_dump(exclude_defaults=True) for m in messages], ensure_ascii=False
    )


def test_past_the_cap_the_middle_gives_way_to_a_marker_saying_how_much() -> None:
    messages = _chat(60, 500)  # about 60 kB of UTF-8 ("é" is two bytes)
    whole = conversation_json(messages, 10**9)
    cap = 8192
    text = conversation_json(messages, cap)
    assert len(text.encode("utf-8")) <= cap
    kept = [ConversationMessage.model_validate(m) for m in json.loads(text)]
    markers = [m for m in kept if m.speaker == CUT_SPEAKER]
    assert len(markers) == 1 and markers[0].role == "system"
    at = kept.index(markers[0])
    assert kept[:at] == messages[:at]  # the start: the prompt and the task
    assert kept[at + 1 :] == messages[len(messages) - (len(kept) - at - 1) :]  # how it ended
    assert kept[-1] == messages[-1]
    found = re.search(
        r"\[(\d+) of 60 messages \((\d+) bytes\) left out here: the conversation \((\d+) bytes\) "
        r"passed the agent's max_conversation_bytes \(8192\)\]",
        markers[0].content,
    )
    assert found, markers[0].content
    cut, cut_bytes, total = map(int, found.groups())
    assert cut == 60 - (len(kept) - 1)
    assert total == len(whole.encode("utf-8"))
    dropped = messages[at : at + cut]
    assert cut_bytes == sum(
        len(json.dumps(m.model_dump(exclude_defaults=True), ensure_ascii=False).encode())
        for m in dropped
    )


def test_a_single_message_larger_than_the_cap_is_left_out_whole() -> None:
    messages = [ConversationMessage(role="tool", content="x" * 50_000)]
    kept = json.loads(conversation_json(messages, MIN_CONVERSATION_BYTES))
    assert [m["speaker"] for m in kept] == [CUT_SPEAKER]
    assert "[1 of 1 messages" in kept[0]["content"]


def test_a_cap_too_small_for_the_marker_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 4096"):
        conversation_json(_chat(2, 10), 100)
