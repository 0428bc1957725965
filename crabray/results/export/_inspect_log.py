"""The part of Inspect AI's eval log schema that ``crabray export --format inspect`` writes.

Each model mirrors the Inspect class named in its docstring, with only the
fields written here; the fields of another role than a message's own stay
unset and are left out of the file. The tests read every export back with
Inspect's own ``read_eval_log``, so a field named or typed wrong here fails there.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

LOG_VERSION = 2
"""The version of Inspect's log format written."""

Role = Literal["system", "user", "assistant", "tool"]
Status = Literal["started", "success", "cancelled", "error"]
ROLES: dict[str, Role] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
"""Inspect's roles; a message of another role (none is written today) is shown as the user's."""


class InspectToolCall(BaseModel):
    """A tool call of an assistant message (Inspect's ``ToolCall``)."""

    id: str
    function: str
    arguments: dict[str, Any]
    parse_error: str | None = None
    type: Literal["function"] = "function"


class InspectToolCallError(BaseModel):
    """Why a tool call failed (Inspect's ``ToolCallError``)."""

    type: Literal["unknown"] = "unknown"
    message: str


class InspectMessage(BaseModel):
    """A chat message; the fields of another role than its own stay unset (Inspect's
    ``ChatMessageSystem``, ``ChatMessageUser``, ``ChatMessageAssistant``, ``ChatMessageTool``)."""

    role: Role
    content: str
    source: Literal["input", "generate"] | None = None
    metadata: dict[str, Any] | None = None
    tool_calls: list[InspectToolCall] | None = None
    model: str | None = None
    tool_call_id: str | None = None
    function: str | None = None
    error: InspectToolCallError | None = None


class InspectUsage(BaseModel):
    """Token usage and cost of one model (Inspect's ``ModelUsage``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    total_cost: float | None = None


class InspectScore(BaseModel):
    """One scorer's grade of a sample (Inspect's ``Score``)."""

    value: str | float
    answer: str | None = None
    explanation: str | None = None
    metadata: dict[str, Any] | None = None


class InspectChoice(BaseModel):
    """The model's last reply (Inspect's ``ChatCompletionChoice``)."""

    message: InspectMessage
    stop_reason: Literal["stop", "tool_calls"] = "stop"


class InspectOutput(BaseModel):
    """A sample's final output (Inspect's ``ModelOutput``)."""

    model: str = ""
    choices: list[InspectChoice] = Field(default_factory=list)
    completion: str = ""
    usage: InspectUsage | None = None


class InspectError(BaseModel):
    """The error of a sample that is not scored (Inspect's ``EvalError``)."""

    message: str
    traceback: str
    traceback_ansi: str


class InspectSample(BaseModel):
    """One episode (Inspect's ``EvalSample``)."""

    id: str
    epoch: int
    input: str
    target: str
    messages: list[InspectMessage]
    output: InspectOutput
    scores: dict[str, InspectScore] | None = None
    metadata: dict[str, Any]
    model_usage: dict[str, InspectUsage]
    started_at: str
    completed_at: str
    total_time: float
    working_time: float
    uuid: str
    error: InspectError | None = None


class InspectDataset(BaseModel):
    """The samples an eval ran (Inspect's ``EvalDataset``)."""

    name: str
    location: str
    samples: int
    sample_ids: list[str]
    shuffled: bool = False


class InspectConfig(BaseModel):
    """The eval's configuration (Inspect's ``EvalConfig``): only its epochs here."""

    epochs: int


class InspectSpec(BaseModel):
    """What ran (Inspect's ``EvalSpec``)."""

    eval_id: str
    run_id: str
    created: str
    task: str
    task_id: str
    task_version: int = 0
    task_display_name: str
    solver: str
    tags: list[str]
    dataset: InspectDataset
    model: str
    config: InspectConfig
    packages: dict[str, str]
    metadata: dict[str, Any]


class InspectPlanStep(BaseModel):
    """A solver of the plan (Inspect's ``EvalPlanStep``): the agent."""

    solver: str
    params: dict[str, Any] = Field(default_factory=dict)


class InspectPlan(BaseModel):
    """Inspect's ``EvalPlan``."""

    name: str = "plan"
    steps: list[InspectPlanStep]


class InspectMetric(BaseModel):
    """One metric of a scorer (Inspect's ``EvalMetric``)."""

    name: str
    value: float


class InspectEvalScore(BaseModel):
    """A scorer's metrics over the samples (Inspect's ``EvalScore``)."""

    name: str
    scorer: str
    scored_samples: int
    unscored_samples: int
    metrics: dict[str, InspectMetric]


class InspectResults(BaseModel):
    """The eval's results (Inspect's ``EvalResults``)."""

    total_samples: int
    completed_samples: int
    scores: list[InspectEvalScore]
    metadata: dict[str, Any]


class InspectStats(BaseModel):
    """When the eval ran and what it used (Inspect's ``EvalStats``)."""

    started_at: str
    completed_at: str
    model_usage: dict[str, InspectUsage]


class InspectLog(BaseModel):
    """One eval log (Inspect's ``EvalLog``), as its JSON log file holds it."""

    version: int = LOG_VERSION
    status: Status
    eval: InspectSpec
    plan: InspectPlan
    results: InspectResults
    stats: InspectStats
    samples: list[InspectSample]
