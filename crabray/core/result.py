"""Records an episode produces: one ``EpisodeResult`` per attempt and one ``StepRecord`` per step.

These models cross every boundary (episode call -> driver -> Parquet), so they
are plain pydantic models of scalars, strings and lists.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, Field, computed_field, model_validator

from crabray.core.errors import (
    AuthenticationError,
    EvaluatorFaultError,
    ModelUnreachableError,
    NoSolutionError,
    SandboxBrokenError,
    SandboxConfigError,
    SandboxHostError,
)


class TerminationReason(StrEnum):
    """Why an episode ended.

    ``env_error`` is an infrastructure failure (the sandbox broke from outside:
    the engine unreachable, the node lost, the host's disk full): the episode
    may be retried as a new attempt. ``cancelled`` is an episode the run's
    interrupt (Ctrl-C, SIGTERM) stopped: its row keeps what it did so far, and
    a resumed run runs it again. Every other reason is a final result;
    ``sandbox_error`` among them: the sandbox broke of what was done inside it
    (:class:`~crabray.core.errors.SandboxBrokenError`: its guest killed, its
    memory exhausted), or the worker running the episode died on a live node of
    something its own sandbox did (a command killed it, or the output or memory
    it caused), so retrying would only repeat it. :func:`sandbox_failure_reason`
    is the one rule that tells them apart for a sandbox's exception.
    """

    SUCCESS = "success"
    AGENT_COMPLETE = "agent_complete"
    AGENT_FAIL = "agent_fail"
    MAX_STEPS = "max_steps"
    TIMEOUT = "timeout"
    SETUP_ERROR = "setup_error"
    ACTION_ERROR = "action_error"
    AGENT_ERROR = "agent_error"
    ENV_ERROR = "env_error"
    SANDBOX_ERROR = "sandbox_error"
    EVALUATOR_ERROR = "evaluator_error"
    TOKEN_LIMIT = "token_limit"
    COST_LIMIT = "cost_limit"
    CANCELLED = "cancelled"

    @property
    def is_infra(self) -> bool:
        """True when the failure is the infrastructure's, not the agent's: retry it."""
        return self is TerminationReason.ENV_ERROR

    @property
    def is_final(self) -> bool:
        """True when the episode needs no other attempt (a resumed run skips it)."""
        return not (self.is_infra or self is TerminationReason.CANCELLED)


def sandbox_failure_reason(error: BaseException) -> TerminationReason:
    """How an episode ends when a sandbox operation raised ``error``: who caused it.

    Decided by where the failure arose, as the backend saw it: inside the
    sandbox (:class:`~crabray.core.errors.SandboxBrokenError`) is the agent's
    ``sandbox_error``; a configuration that cannot work
    (:class:`~crabray.core.errors.SandboxConfigError`) is the benchmark's
    ``setup_error``; anything else around the sandbox is infrastructure,
    ``env_error``, retried.
    """
    if isinstance(error, SandboxBrokenError):
        return TerminationReason.SANDBOX_ERROR
    if isinstance(error, SandboxConfigError):
        return TerminationReason.SETUP_ERROR
    return TerminationReason.ENV_ERROR


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (what every timestamp column holds)."""
    return datetime.now(UTC)


class GraphStats(BaseModel):
    """Progress of an evaluator graph after a step (CRAB's metrics)."""

    total_nodes: int = Field(description="Number of evaluator nodes in the graph.")
    passed_nodes: int = Field(description="Nodes that have passed so far.")
    completeness: float = Field(description="passed_nodes / total_nodes, in [0, 1].")
    completeness_per_action: float = Field(
        description="completeness divided by the number of agent actions taken so far."
    )
    steps_to_complete: int | None = Field(
        default=None, description="Agent step at which the sink passed, if it has."
    )
    longest_unfinished_path: int = Field(
        description="Nodes on the longest path of the graph that has not passed yet."
    )
    success: bool = Field(description="Whether the sink node has passed.")


class Attribution(StrEnum):
    """Whose doing an episode's outcome is: what a leaderboard may count against the agent.

    ``agent``: the agent's own result, success or failure, including whatever it
    caused inside its sandbox (an evaluator that raised on the state it left
    included); counted in every denominator. ``benchmark``: the suite's own
    fault, provable without the agent (a failing setup script, an image it
    names that does not exist, an evaluator bound to arguments it refuses, no
    solution for the oracle); never retried, counted apart. ``infrastructure``: outside the
    sandbox (engine unreachable, node lost, worker killed, model API
    unreachable); retried where a retry can help, counted apart.
    """

    AGENT = "agent"
    BENCHMARK = "benchmark"
    INFRASTRUCTURE = "infrastructure"


ATTRIBUTION_BY_REASON: dict[TerminationReason, Attribution] = {
    TerminationReason.SUCCESS: Attribution.AGENT,
    TerminationReason.AGENT_COMPLETE: Attribution.AGENT,
    TerminationReason.AGENT_FAIL: Attribution.AGENT,
    TerminationReason.MAX_STEPS: Attribution.AGENT,
    TerminationReason.TIMEOUT: Attribution.AGENT,
    TerminationReason.SETUP_ERROR: Attribution.BENCHMARK,
    TerminationReason.ACTION_ERROR: Attribution.AGENT,
    TerminationReason.AGENT_ERROR: Attribution.AGENT,
    TerminationReason.ENV_ERROR: Attribution.INFRASTRUCTURE,
    TerminationReason.SANDBOX_ERROR: Attribution.AGENT,
    TerminationReason.EVALUATOR_ERROR: Attribution.AGENT,
    TerminationReason.TOKEN_LIMIT: Attribution.AGENT,
    TerminationReason.COST_LIMIT: Attribution.AGENT,
    TerminationReason.CANCELLED: Attribution.INFRASTRUCTURE,
}
"""Who a termination reason is attributed to, before the error's evidence
(:data:`ERROR_EVIDENCE`) is read; docs/reference/termination.md has it as a table."""

ERROR_EVIDENCE: dict[tuple[TerminationReason, str], Attribution] = {
    (TerminationReason.AGENT_ERROR, NoSolutionError.__name__): Attribution.BENCHMARK,
    (TerminationReason.AGENT_ERROR, ModelUnreachableError.__name__): Attribution.INFRASTRUCTURE,
    (TerminationReason.AGENT_ERROR, AuthenticationError.__name__): Attribution.INFRASTRUCTURE,
    (TerminationReason.SETUP_ERROR, SandboxHostError.__name__): Attribution.INFRASTRUCTURE,
    (TerminationReason.EVALUATOR_ERROR, EvaluatorFaultError.__name__): Attribution.BENCHMARK,
}
"""A termination reason whose ``error_type`` says otherwise than the reason alone: an
``agent_error`` of an oracle with no solution to replay (the benchmark's) or of a model
API that could not be used (the infrastructure's); a ``setup_error`` of a host that
lacks what every sandbox of the kind needs (the infrastructure's); an ``evaluator_error``
of arguments the task binds wrongly (the benchmark's: any other evaluator error may
be the agent's doing, see :class:`~crabray.core.errors.EvaluatorError`)."""


def attribution_of(reason: TerminationReason | str, error_type: str | None) -> Attribution:
    """Whose doing an episode's outcome is, from its termination reason and error type.

    The one rule: every reader of results (leaderboard, site, run summary, exit
    code) and the ``attribution`` column come from it. Rows written before the
    column existed get it from here when read.

    Example:
        >>> attribution_of("agent_error", "ModelUnreachableError").value
        'infrastructure'
    """
    reason = TerminationReason(reason)
    if error_type is not None and (reason, error_type) in ERROR_EVIDENCE:
        return ERROR_EVIDENCE[reason, error_type]
    return ATTRIBUTION_BY_REASON[reason]


def new_episode_id() -> str:
    """A fresh id for one execution of an episode (joins steps to their episode row)."""
    return uuid.uuid4().hex


class StepRecord(BaseModel):
    """One agent action and what it did: a row of the ``steps`` table."""

    episode_id: str = Field(description="Id of the execution this step belongs to.")
    run_id: str
    task_id: str
    agent: str
    epoch: int = 0
    attempt: int = 0
    step: int = Field(description="0-based index of the agent step.")
    call_index: int = Field(default=0, description="Index of the call within the step.")
    env: str = Field(description="Environment the action ran in ('root' for submit etc.).")
    action: str
    arguments_json: str = Field(description="The call's arguments as a JSON object.")
    result: str = Field(default="", description="The action's return value, shortened.")
    error: str | None = Field(default=None, description="Why the call failed, if it did.")
    agent_message: str | None = Field(default=None, description="Text the agent gave.")
    observation: str | None = Field(
        default=None,
        description="What the agent observed before this step (text, shortened); first call only.",
    )
    screenshot_path: str | None = Field(
        default=None,
        description="Screenshot the agent saw before this step, relative to the output directory.",
    )
    graph_passed: list[int] = Field(
        default_factory=list,
        description="Indices (into the episode's graph_json nodes) of evaluators passed so far.",
    )
    duration_sec: float = 0.0
    graph_passed_nodes: int = 0
    graph_total_nodes: int = 0
    completeness: float = 0.0
    timestamp: datetime = Field(default_factory=utcnow)


class CheckpointScore(BaseModel):
    """One graded checkpoint of a task, as a result records it: points earned of points possible.

    Not to be confused with the TAC-compatible ``scoring.Checkpoint`` a task
    folder's evaluator builds inside its sandbox (it keeps TAC's name); the
    grader turns those into these.
    """

    total: int = Field(ge=0, description="Points the checkpoint is worth.")
    result: int = Field(ge=0, description="Points earned.")

    @model_validator(mode="after")
    def _earned_at_most_total(self) -> CheckpointScore:
        if self.result > self.total:
            raise ValueError(f"result {self.result} exceeds total {self.total}")
        return self


class Score(BaseModel):
    """What a task's scorer may return instead of a bare number: the score and how it came.

    Formats graded by checkpoints (task folders) keep them with the episode,
    so a leaderboard can show partial progress and not only the final number.
    """

    value: float = Field(ge=0.0, le=1.0, description="The task score in [0, 1]; 1 is success.")
    checkpoints: list[CheckpointScore] = Field(default_factory=list)
    explanation: str | None = None


class ToolCallRecord(BaseModel):
    """One tool call of an assistant message, as the model wrote it."""

    id: str = Field(description="The model's id of the call; its tool message names it.")
    name: str = Field(description="The tool (action) called.")
    arguments: str = Field(default="", description="The arguments as the model wrote them.")


class ConversationMessage(BaseModel):
    """One message of an LLM agent's conversation with its model: an item of ``conversation_json``.

    Images sent to the model are not kept (the steps table has the screenshots);
    ``images`` counts them. Usage fields are set on assistant messages only.
    """

    role: str = Field(description="system, user, assistant or tool.")
    speaker: str = Field(
        default="agent",
        description="Which of the agent's dialogues it belongs to (planner, tool caller, ...).",
    )
    content: str = Field(default="", description="The text of the message.")
    images: int = Field(default=0, description="Images attached to the message (not kept).")
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_call_id: str | None = Field(default=None, description="The call a tool message answers.")
    model: str | None = Field(default=None, description="The model that wrote a reply.")
    tokens_in: int | None = Field(default=None, description="Prompt tokens of the call.")
    tokens_out: int | None = Field(default=None, description="Completion tokens of the reply.")
    cost_usd: float | None = Field(default=None, description="Cost of the call (price table).")
    latency_sec: float | None = Field(default=None, description="Seconds the call took.")


DEFAULT_MAX_CONVERSATION_BYTES = 2 * 1024 * 1024
"""What ``conversation_json`` holds at most by default, in UTF-8 bytes (an agent's
``max_conversation_bytes`` changes it): a chatty agent must not make a huge row."""

MIN_CONVERSATION_BYTES = 4096
"""The smallest cap allowed: room for the marker of a cut and a few messages."""

CUT_SPEAKER = "crabray"
"""The ``speaker`` of the message that stands where ``conversation_json`` was cut."""

_CUT_MARKER_ROOM = 512  # bytes kept free for the marker message


def conversation_json(messages: Sequence[ConversationMessage], max_bytes: int) -> str:
    """The ``conversation_json`` of ``messages``: at most ``max_bytes`` of UTF-8 JSON.

    A longer conversation keeps its first messages (the prompt, the task) and
    its last ones (how it ended); in place of the middle stands one message
    (``speaker`` :data:`CUT_SPEAKER`, role ``system``) saying how many messages
    and bytes were left out. A message is kept or left out whole, so the text
    stays a JSON list of messages every reader of the column parses.

    Raises:
        ValueError: ``max_bytes`` is below :data:`MIN_CONVERSATION_BYTES`.
    """
    if max_bytes < MIN_CONVERSATION_BYTES:
        raise ValueError(f"max_bytes must be at least {MIN_CONVERSATION_BYTES}, not {max_bytes}")
    items = [json.dumps(m.model_dump(exclude_defaults=True), ensure_ascii=False) for m in messages]
    whole = "[" + ", ".join(items) + "]"  # what json.dumps(list) writes
    total = len(whole.encode("utf-8"))
    if total <= max_bytes:
        return whole
    sizes = [len(item.encode("utf-8")) + 2 for item in items]  # with its ", "
    room = max_bytes - 2 - _CUT_MARKER_ROOM
    head = used = 0
    while head < len(items) and used + sizes[head] <= room // 2:
        used += sizes[head]
        head += 1
    tail = len(items)
    while tail > head and used + sizes[tail - 1] <= room:
        tail -= 1
        used += sizes[tail]
    left_out = sum(sizes[head:tail]) - 2 * (tail - head)
    marker = ConversationMessage(
        role="system",
        speaker=CUT_SPEAKER,
        content=f"[{tail - head} of {len(items)} messages ({left_out} bytes) left out here: "
        f"the conversation ({total} bytes) passed the agent's max_conversation_bytes "
        f"({max_bytes})]",
    )
    kept = [*items[:head], json.dumps(marker.model_dump(exclude_defaults=True)), *items[tail:]]
    return "[" + ", ".join(kept) + "]"


class EpisodeResult(BaseModel):
    """The outcome of one attempt of one agent at one task: a row of the ``episodes`` table."""

    episode_id: str = Field(
        default_factory=new_episode_id,
        description="Unique id of this execution; its steps carry the same id.",
    )
    run_id: str
    suite: str
    task_id: str
    tags: list[str] = Field(default_factory=list)
    agent: str
    model: str | None = None
    epoch: int = Field(default=0, description="Repetition index of the same task and agent.")
    attempt: int = Field(default=0, description="Infrastructure retry number, from 0.")
    termination_reason: TerminationReason
    success: bool = False
    score: float = Field(default=0.0, description="Task score in [0, 1].")
    completeness: float = Field(default=0.0, description="Evaluator-graph completeness.")
    checkpoints: list[CheckpointScore] = Field(
        default_factory=list,
        description="Checkpoints the scorer graded (total and result points each), if any; "
        "empty for graph-graded tasks, null in files written before the column existed.",
    )
    steps: int = Field(default=0, description="Agent steps taken.")
    action_errors: int = Field(default=0, description="Agent calls that failed.")
    tokens_in: int = 0
    tokens_out: int = 0
    model_calls: int = Field(default=0, description="Calls the agent made to its model.")
    model_latency_sec: float = Field(
        default=0.0, description="Seconds spent waiting for the model, summed over calls."
    )
    cost_usd: float = Field(default=0.0, description="Model cost from the agent's price table.")
    wall_time_sec: float = 0.0
    setup_time_sec: float = Field(
        default=0.0,
        description="Seconds spent setting up the environments: their start or reset "
        "(including a reset the pool did ahead of the episode) and the task's setup.",
    )
    node: str | None = Field(default=None, description="Ray node (or host) that ran it.")
    grader_trusted: bool | None = Field(
        default=None,
        description="Whether every sandbox that graded the episode did so by a path its agent "
        "cannot alter (see docs/isolation.md, 'The grading path'); null when unknown: the "
        "episode never reached its agent, its sandbox failed, or the file predates the column.",
    )
    grader_untrusted_reason: str | None = Field(
        default=None,
        description="Why the grade is unverified when grader_trusted is false: what the "
        "grader had to run or talk to that the agent could change (its live processes, "
        "programs of its sandbox, a backend that cannot freeze or separate); null when "
        "trusted or unknown.",
    )
    error: str | None = Field(default=None, description="Error message, if any.")
    error_type: str | None = Field(default=None, description="Exception type name, if any.")
    description: str = Field(default="", description="The task's instruction, as the agent got it.")
    graph_json: str = Field(
        default="",
        description='The evaluator graph: {"nodes": [labels], "edges": [[from, to], ...]}.',
    )
    conversation_json: str = Field(
        default="",
        description="An LLM agent's conversation with its model: a JSON list of "
        "ConversationMessage objects in the order sent, at most the agent's "
        "max_conversation_bytes (2 MiB by default; past it the middle is replaced by one "
        "message of speaker 'crabray' saying how much was left out); empty for agents without "
        "a model, null in files written before the column existed.",
    )
    setup_output: str | None = Field(
        default=None,
        description="What the task's setup did: per environment reset and setup action, its "
        "label and what it returned (each shortened like a step's result) or why it failed; "
        "null when the setup never ran (the episode never started) and in files written "
        "before the column existed.",
    )
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime = Field(default_factory=utcnow)
    model_latencies_sec: list[float] = Field(
        default_factory=list,
        description="Each model call's latency in seconds, in order (retries included, waits "
        "for the model limiter and before retries left out): the run's p50/p95 per model; "
        "null in files written before the column existed.",
    )
    model_retries: int = Field(
        default=0,
        description="Model requests sent again after a 429, a server error or a dropped "
        "connection; null in files written before the column existed.",
    )
    model_rate_limited: int = Field(
        default=0,
        description="Model requests answered 429 (rate limited); null in files written before "
        "the column existed.",
    )
    model_wait_sec: float = Field(
        default=0.0,
        description="Seconds the agent waited for the model limiter's grants and before "
        "retrying a request, left out of the episode's time limit; null in files written "
        "before the column existed.",
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="Whose doing the outcome is: 'agent' (its score counts), 'benchmark' "
        "(the suite's fault: setup, evaluator, no solution; not retried) or 'infrastructure' "
        "(outside the sandbox: engine, node, worker, model API). Derived from "
        "termination_reason and error_type (docs/reference/termination.md); only 'agent' "
        "rows are in a leaderboard's denominators."
    )
    @property
    def attribution(self) -> Attribution:
        """Whose doing the outcome is (:func:`attribution_of`): never out of step with it."""
        return attribution_of(self.termination_reason, self.error_type)

    @property
    def key(self) -> tuple[str, str, str, int]:
        """What identifies the episode across attempts: (run, agent, task, epoch)."""
        return (self.run_id, self.agent, self.task_id, self.epoch)


ARTIFACTS_DIR = "artifacts"
"""Folder of the output directory where episodes' files (screenshots) land."""


class EpisodeFiles(BaseModel):
    """Files a teardown step hands back: they become artifacts of the episode.

    A task's teardown action returns one (e.g. the files of a sandbox's shared
    folder); each lands at ``artifacts/<run>/<episode>/<name>`` under the output
    directory. Names are relative paths without ``..``.
    """

    files: dict[str, bytes] = Field(default_factory=dict)


class EpisodeRecord(BaseModel):
    """What an episode call returns to the driver: the result, its steps, its files.

    Workers never write the dataset: files an episode produced (screenshots)
    travel here, by path relative to the output directory, and the driver
    writes them next to the dataset.
    """

    result: EpisodeResult
    steps: list[StepRecord] = Field(default_factory=list)
    artifacts: dict[str, bytes] = Field(
        default_factory=dict,
        description="Files of the episode by path relative to the output directory.",
    )
