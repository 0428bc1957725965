"""A run as JSON Lines: one episode a line, with its steps and its messages.

Made for Hugging Face ``datasets.load_dataset("json", data_files=...)``, which
takes one Arrow type per field from the first part of the file it reads (10 MB
by default) and casts the rest to it. So every line has every field, each
always of one type: text is text or null, never an object; call arguments stay
the JSON text they were (an object's keys differ from call to call); lists are
lists of records whose fields are all always there. And the lines that first
give each field a value (a step, a message, an error) come first, so the part
``datasets`` reads first types every field however large the file; the others
follow in the run's order (episode key: agent, task, epoch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from crabray.core.result import CheckpointScore, ConversationMessage, StepRecord
from crabray.results.export._files import write_file
from crabray.results.export._source import ExportedEpisode, RunExport


class JsonlToolCall(BaseModel):
    """A tool call of a message."""

    id: str
    name: str
    arguments: str = Field(description="The arguments as the model wrote them (JSON text).")


class JsonlMessage(BaseModel):
    """One message of the conversation (``ConversationMessage``), every field present."""

    role: str
    speaker: str
    content: str
    images: int
    tool_calls: list[JsonlToolCall]
    tool_call_id: str | None
    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    latency_sec: float | None


class JsonlStep(BaseModel):
    """One call of the agent (a ``steps`` row without the keys the episode already gives)."""

    step: int
    call_index: int
    env: str
    action: str
    arguments_json: str
    result: str
    error: str | None
    agent_message: str | None
    observation: str | None
    screenshot_path: str | None
    graph_passed: list[int]
    duration_sec: float
    graph_passed_nodes: int
    graph_total_nodes: int
    completeness: float
    timestamp: str


class JsonlEpisode(BaseModel):
    """One line: an episode's columns (``docs/results-schema.md``), its evaluators, its
    steps and its messages. Times are ISO 8601 text in UTC."""

    episode_id: str
    run_id: str
    suite: str
    task_id: str
    tags: list[str]
    agent: str
    model: str | None
    epoch: int
    attempt: int
    termination_reason: str
    attribution: str
    success: bool
    score: float
    completeness: float
    checkpoints: list[CheckpointScore]
    steps_taken: int = Field(description="The episode's ``steps`` column: agent steps taken.")
    action_errors: int
    tokens_in: int
    tokens_out: int
    model_calls: int
    model_latency_sec: float
    model_latencies_sec: list[float]
    model_retries: int
    model_rate_limited: int
    model_wait_sec: float
    cost_usd: float
    wall_time_sec: float
    setup_time_sec: float
    node: str | None
    grader_trusted: bool | None
    grader_untrusted_reason: str | None
    error: str | None
    error_type: str | None
    description: str
    evaluators: list[str]
    graph_json: str
    setup_output: str | None
    started_at: str
    finished_at: str
    conversation_note: str | None
    steps: list[JsonlStep]
    messages: list[JsonlMessage]


def write_jsonl(run: RunExport, out: Path) -> list[Path]:
    """Write ``run``'s episodes to the JSON Lines file ``out``.

    Raises:
        ResultsError: The file could not be written.
    """
    lines = [_line(episode) for episode in run.episodes]
    order = _typing_first([line.model_dump(mode="json") for line in lines])
    text = "".join(lines[index].model_dump_json() + "\n" for index in order)
    write_file(out, text.encode("utf-8"))
    return [out]


def _line(episode: ExportedEpisode) -> JsonlEpisode:
    """One episode as a line."""
    result = episode.result
    row = result.model_dump(
        exclude={"conversation_json", "steps", "checkpoints", "started_at", "finished_at"}
    )
    return JsonlEpisode(
        **row,
        checkpoints=result.checkpoints,
        steps_taken=result.steps,
        evaluators=episode.evaluators,
        started_at=result.started_at.isoformat(),
        finished_at=result.finished_at.isoformat(),
        conversation_note=episode.conversation_note,
        steps=[_step(call) for call in episode.steps],
        messages=[_message(message) for message in episode.messages],
    )


def _step(call: StepRecord) -> JsonlStep:
    values = call.model_dump(
        exclude={"episode_id", "run_id", "task_id", "agent", "epoch", "attempt"}
    )
    values["timestamp"] = call.timestamp.isoformat()
    return JsonlStep(**values)


def _message(message: ConversationMessage) -> JsonlMessage:
    return JsonlMessage(
        **message.model_dump(exclude={"tool_calls"}),
        tool_calls=[JsonlToolCall(**call.model_dump()) for call in message.tool_calls],
    )


def _typing_first(lines: list[dict[str, Any]]) -> list[int]:
    """The order to write ``lines`` in: first the fewest that give every field a value
    somewhere (greedily), then the rest, each part in the run's order."""
    given = [_valued(line) for line in lines]
    wanted = set().union(*given) if given else set()
    first: list[int] = []
    while wanted:
        best = max(range(len(lines)), key=lambda index: len(given[index] & wanted))
        first.append(best)
        wanted -= given[best]
    chosen = set(first)
    return sorted(first) + [index for index in range(len(lines)) if index not in chosen]


def _valued(value: Any, path: str = "") -> set[str]:
    """The paths of ``value`` that hold something other than null or an empty list."""
    if isinstance(value, dict):
        return {p for key, item in value.items() for p in _valued(item, f"{path}.{key}")}
    if isinstance(value, list):
        found = {path} if value else set()
        return found.union(*(_valued(item, f"{path}[]") for item in value))
    return set() if value is None else {path}
