"""The agent protocol: observations in, action calls out.

An agent is created once per episode (or reused after ``reset``). The episode
gives it a ``TaskBrief`` at reset, then a ``StepInput`` every step, and reads
back an ``AgentStep``. Everything crossing this seam is a pydantic model, so
the same agent runs in-process or inside a Ray episode call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from crabray.core.result import (
    DEFAULT_MAX_CONVERSATION_BYTES,
    MIN_CONVERSATION_BYTES,
    ConversationMessage,
)


class ActionCall(BaseModel):
    """One call the agent wants made, by the name it sees in its action space."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = Field(default=None, description="The agent's id for the call, if any.")


class CallResult(BaseModel):
    """What one call of the previous step gave, fed back to the agent."""

    call_id: str | None = None
    name: str
    output: str = ""
    error: str | None = None


class Observation(BaseModel):
    """One observation of one environment, made after a step."""

    env: str
    name: str
    content: str = ""
    image_path: str | None = Field(default=None, description="A screenshot file, if any.")


class TaskBrief(BaseModel):
    """What the agent learns at the start of an episode."""

    task_id: str
    description: str
    tools: list[dict[str, Any]] = Field(description="OpenAI tool schemas, by call name.")
    environments: dict[str, str] = Field(description="Environment name -> its description.")
    max_steps: int
    solution: list[ActionCall] | None = Field(
        default=None,
        description="The task's reference solution; only scripted baselines may read it.",
    )


class StepInput(BaseModel):
    """What the agent sees at one step: fresh observations and its last calls' results."""

    step: int
    observations: list[Observation] = Field(default_factory=list)
    results: list[CallResult] = Field(default_factory=list)


class AgentStep(BaseModel):
    """The agent's move: calls to make, and any text it produced."""

    calls: list[ActionCall] = Field(default_factory=list)
    message: str | None = None


class AgentUsage(BaseModel):
    """Model usage of an agent over one episode, and the conversation that used it.

    ``conversation`` is what the agent sent to its models and what they replied,
    in order; the episode stores it in the ``conversation_json`` column.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    model_calls: int = 0
    model_latency_sec: float = 0.0
    model_latencies_sec: list[float] = Field(
        default_factory=list, description="Each call's latency, in order (waits left out)."
    )
    model_retries: int = Field(default=0, description="Requests sent again after a failure.")
    model_rate_limited: int = Field(default=0, description="Requests answered 429.")
    model_wait_sec: float = Field(
        default=0.0,
        description="Seconds waited for the model limiter's grants and before retries, "
        "which the episode leaves out of its time limit; grows while a call waits.",
    )
    cost_usd: float = 0.0
    conversation: list[ConversationMessage] = Field(default_factory=list)


class AgentSpec(BaseModel):
    """How to build an agent: what the driver sends to episode calls.

    Args:
        name: The agent's name in results (``oracle``, ``noop``, or a configured name).
        kind: The registry name of the agent class.
        model: The model it uses, if any.
        settings: The agent kind's own options (never secrets: an API key is named by
            the variable holding it).
        max_tokens: Ends an episode (``token_limit``) once the agent used more tokens.
        max_cost_usd: Ends an episode (``cost_limit``) once the agent's model cost more.
        max_conversation_bytes: What the episode's ``conversation_json`` keeps at most
            (UTF-8 bytes); past it the middle of the conversation is left out, with a note.
        epochs: Episodes of each task for this agent; the run's ``epochs`` when unset
            (``crabray audit`` repeats the oracle and noop, not its one-shot probes).
    """

    name: str
    kind: str
    model: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    max_tokens: int | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_conversation_bytes: int = Field(
        default=DEFAULT_MAX_CONVERSATION_BYTES, ge=MIN_CONVERSATION_BYTES
    )
    epochs: int | None = Field(default=None, gt=0)


class Agent(ABC):
    """A policy acting in a task's environments."""

    kind: ClassVar[str]
    replays_reference: ClassVar[bool] = False
    """Whether the agent acts as the benchmark's own reference (the oracle): an
    evaluator that raises on the state it leaves is the benchmark's fault."""

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.usage = AgentUsage()

    @abstractmethod
    def reset(self, brief: TaskBrief) -> None:
        """Start a new episode; forget the previous one."""

    @abstractmethod
    def step(self, observed: StepInput) -> AgentStep:
        """Decide the next calls.

        Raises:
            AgentError: The agent could not decide (its own failure, recorded).
        """
