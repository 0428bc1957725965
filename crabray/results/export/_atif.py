"""A run as Harbor's Agent Trajectory Interchange Format (ATIF): one trajectory per episode.

Each episode becomes ``OUT/<task>__<agent>__<epoch>/agent/trajectory.json``,
where Harbor keeps a trial's trajectory. Its steps, numbered from 1:

- an LLM agent's conversation, message by message: system and user messages as
  ``system`` and ``user`` steps, each model reply as an ``agent`` step with its
  tool calls and its metrics (tokens, cost, latency), and the tool results that
  answer those calls as that step's observation;
- for an agent without a model (oracle, noop): the task as the ``user`` step,
  then one ``agent`` step per crabray step, its calls and their results or
  errors (``llm_call_count`` 0: no model was asked).

``final_metrics`` holds the episode's tokens, cost and step count; what ATIF has
no field for (success, score, attribution, termination reason, error, the
evaluators) is under ``extra.crabray``, and ``notes`` says it in a sentence.

The models below are the part of ATIF written here (schema ATIF-v1.7); the
tests read every export back with Harbor's own ``Trajectory`` model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from crabray.core.result import ConversationMessage, EpisodeResult, StepRecord
from crabray.results.export._files import parsed_arguments, safe_name, write_file
from crabray.results.export._source import ExportedEpisode, RunExport

SCHEMA_VERSION = "ATIF-v1.7"
"""The ATIF version written: the first with ``trajectory_id`` and ``llm_call_count``."""

TRAJECTORY_FILE = Path("agent") / "trajectory.json"
"""Where a trial's trajectory lives in its folder, as Harbor lays trials out."""

Source = Literal["system", "user", "agent"]


class _Atif(BaseModel):
    """ATIF objects refuse fields they do not define; so do these."""

    model_config = ConfigDict(extra="forbid")


class AtifToolCall(_Atif):
    """A call the agent made: ATIF's ``ToolCall``."""

    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None


class AtifResult(_Atif):
    """What one call returned: ATIF's ``ObservationResult``."""

    source_call_id: str | None = None
    content: str | None = None
    extra: dict[str, Any] | None = None


class AtifObservation(_Atif):
    """The environment's answer to a step's calls: ATIF's ``Observation``."""

    results: list[AtifResult]


class AtifMetrics(_Atif):
    """One model call's usage: ATIF's ``Metrics``."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    extra: dict[str, Any] | None = None


class AtifStep(_Atif):
    """One turn: ATIF's ``Step``."""

    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Source
    model_name: str | None = None
    message: str
    tool_calls: list[AtifToolCall] | None = None
    observation: AtifObservation | None = None
    metrics: AtifMetrics | None = None
    llm_call_count: int | None = None
    extra: dict[str, Any] | None = None


class AtifAgent(_Atif):
    """The agent that produced the trajectory: ATIF's ``Agent``."""

    name: str
    version: str
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class AtifFinalMetrics(_Atif):
    """The episode's totals: ATIF's ``FinalMetrics``."""

    total_prompt_tokens: int
    total_completion_tokens: int
    total_cost_usd: float
    total_steps: int
    extra: dict[str, Any] | None = None


class AtifTrajectory(_Atif):
    """One episode: ATIF's ``Trajectory``."""

    schema_version: str = SCHEMA_VERSION
    session_id: str
    trajectory_id: str
    agent: AtifAgent
    steps: list[AtifStep] = Field(min_length=1)
    notes: str
    final_metrics: AtifFinalMetrics
    extra: dict[str, Any]


def write_atif(run: RunExport, out: Path, version: str) -> list[Path]:
    """Write one ATIF trajectory per episode of ``run`` under folder ``out``.

    Raises:
        ResultsError: A file could not be written.
    """
    written = []
    for episode in run.episodes:
        path = out / trial_name(episode.result) / TRAJECTORY_FILE
        text = trajectory(episode, version).model_dump_json(exclude_none=True, indent=2)
        write_file(path, text.encode("utf-8"))
        written.append(path)
    return written


def trial_name(result: EpisodeResult) -> str:
    """The folder of an episode's trajectory: its task, agent and epoch (unique in a run)."""
    return "__".join(safe_name(part) for part in (result.task_id, result.agent, str(result.epoch)))


def trajectory(episode: ExportedEpisode, version: str) -> AtifTrajectory:
    """The ATIF trajectory of one episode."""
    result = episode.result
    if episode.messages:
        steps = _conversation_steps(episode)
    else:
        steps = _recorded_steps(result, episode.steps)
    return AtifTrajectory(
        session_id=result.run_id,
        trajectory_id=result.episode_id,
        agent=AtifAgent(name=result.agent, version=version, model_name=result.model),
        steps=steps,
        notes=_notes(result),
        final_metrics=AtifFinalMetrics(
            total_prompt_tokens=result.tokens_in,
            total_completion_tokens=result.tokens_out,
            total_cost_usd=result.cost_usd,
            total_steps=len(steps),
            extra={
                "crabray_steps": result.steps,
                "model_calls": result.model_calls,
                "model_latency_sec": result.model_latency_sec,
                "model_retries": result.model_retries,
                "model_rate_limited": result.model_rate_limited,
                "model_wait_sec": result.model_wait_sec,
                "wall_time_sec": result.wall_time_sec,
            },
        ),
        extra={"crabray": _facts(episode)},
    )


def _notes(result: EpisodeResult) -> str:
    """The outcome in a sentence: what a reader of the trajectory looks for first."""
    whose = result.attribution.value
    if whose != "agent":
        verdict = f"not scored: a {whose} error, not the agent's"
    else:
        verdict = f"{'solved' if result.success else 'not solved'}, score {result.score:.2f}"
    error = f"; error: {result.error}" if result.error else ""
    return (
        f"crabray episode of task {result.task_id} (suite {result.suite}), epoch {result.epoch}: "
        f"{verdict}; ended by {result.termination_reason.value}{error}"
    )


def _facts(episode: ExportedEpisode) -> dict[str, Any]:
    """crabray's columns of the episode that ATIF has no field for."""
    facts = episode.result.model_dump(
        mode="json", exclude={"conversation_json", "graph_json", "description"}
    )
    facts["evaluators"] = episode.evaluators
    if episode.conversation_note is not None:
        facts["conversation_note"] = episode.conversation_note
    return facts


def _conversation_steps(episode: ExportedEpisode) -> list[AtifStep]:
    """An LLM agent's conversation as steps: each tool result in the step of its call.

    The results of the last calls, which the episode ended on before sending them,
    come from the step records (``extra.sent_to_model`` false).
    """
    steps: list[AtifStep] = []
    owner: dict[str, AtifStep] = {}
    not_sent = episode.results_not_sent()
    for message in episode.messages:
        if message.role == "tool":
            _observe(steps, owner, message)
            continue
        extra: dict[str, Any] = {"speaker": message.speaker} if message.speaker != "agent" else {}
        content = message.content
        if message.images:
            extra["images"] = message.images
        if message.role != "assistant":
            source: Source = "system" if message.role == "system" else "user"
            steps.append(
                AtifStep(
                    step_id=len(steps) + 1, source=source, message=content, extra=extra or None
                )
            )
            continue
        calls = [_tool_call(call.id, call.name, call.arguments) for call in message.tool_calls]
        step = AtifStep(
            step_id=len(steps) + 1,
            source="agent",
            model_name=message.model,
            message=content,
            tool_calls=calls or None,
            metrics=_metrics(message),
            llm_call_count=1,
            extra=extra or None,
        )
        steps.append(step)
        owner.update((call.tool_call_id, step) for call in calls)
        unsent = [
            _call_result(call.id, record, sent=False)
            for call in message.tool_calls
            if (record := not_sent.get(call.id)) is not None
        ]
        if unsent:
            step.observation = AtifObservation(results=unsent)
    return steps


def _observe(
    steps: list[AtifStep], owner: dict[str, AtifStep], message: ConversationMessage
) -> None:
    """Add a tool result to the step whose call it answers (else the last agent step's,
    else a step of its own): ATIF puts observations beside the calls they answer."""
    call_id = message.tool_call_id or ""
    step = owner.get(call_id) or next((s for s in reversed(steps) if s.source == "agent"), None)
    if step is None:
        step = AtifStep(step_id=len(steps) + 1, source="system", message="")
        steps.append(step)
    answered = (
        call_id
        if step.tool_calls and call_id in {c.tool_call_id for c in step.tool_calls}
        else None
    )
    if step.observation is None:
        step.observation = AtifObservation(results=[])
    step.observation.results.append(AtifResult(source_call_id=answered, content=message.content))


def _metrics(message: ConversationMessage) -> AtifMetrics | None:
    """A reply's usage; None when its model reported none."""
    if message.tokens_in is None and message.tokens_out is None and message.cost_usd is None:
        return None
    latency = {"latency_sec": message.latency_sec} if message.latency_sec is not None else None
    return AtifMetrics(
        prompt_tokens=message.tokens_in,
        completion_tokens=message.tokens_out,
        cost_usd=message.cost_usd,
        extra=latency,
    )


def _recorded_steps(result: EpisodeResult, calls: list[StepRecord]) -> list[AtifStep]:
    """The task, then one agent step per recorded crabray step: its calls and their results."""
    steps = [
        AtifStep(
            step_id=1,
            timestamp=result.started_at.isoformat(),
            source="user",
            message=result.description,
        )
    ]
    grouped: dict[int, list[StepRecord]] = {}
    for call in calls:
        grouped.setdefault(call.step, []).append(call)
    for number, group in sorted(grouped.items()):
        ids = [f"step{number + 1}-call{call.call_index + 1}" for call in group]
        steps.append(
            AtifStep(
                step_id=len(steps) + 1,
                timestamp=group[-1].timestamp.isoformat(),
                source="agent",
                message="\n".join(call.agent_message for call in group if call.agent_message),
                tool_calls=[
                    _tool_call(call_id, call.action, call.arguments_json, env=call.env)
                    for call_id, call in zip(ids, group, strict=True)
                ],
                observation=AtifObservation(
                    results=[
                        _call_result(call_id, call)
                        for call_id, call in zip(ids, group, strict=True)
                    ]
                ),
                llm_call_count=0,
                extra=_step_extra(number, group),
            )
        )
    return steps


def _step_extra(number: int, group: list[StepRecord]) -> dict[str, Any]:
    """What a recorded step says beyond its calls: the evaluators passed after it, what the
    agent observed before it."""
    last = group[-1]
    extra: dict[str, Any] = {
        "crabray_step": number,
        "evaluators_passed": last.graph_passed_nodes,
        "evaluators_total": last.graph_total_nodes,
        "completeness": last.completeness,
    }
    if group[0].observation:
        extra["observation_before"] = group[0].observation
    if group[0].screenshot_path:
        extra["screenshot_path"] = group[0].screenshot_path
    return extra


def _call_result(call_id: str, call: StepRecord, *, sent: bool = True) -> AtifResult:
    """What one recorded call returned, or why it failed (``sent``: whether to a model)."""
    extra: dict[str, Any] = {"duration_sec": call.duration_sec}
    if not sent:
        extra["sent_to_model"] = False
    if call.error is not None:
        extra["error"] = call.error
    content = call.result if call.error is None else call.result or f"error: {call.error}"
    return AtifResult(source_call_id=call_id, content=content, extra=extra)


def _tool_call(call_id: str, name: str, arguments: str, *, env: str | None = None) -> AtifToolCall:
    """A call with its arguments as an object; text that is no object kept in ``extra``."""
    parsed, problem = parsed_arguments(arguments)
    extra: dict[str, Any] = {}
    if problem is not None:
        extra.update(raw_arguments=arguments, arguments_problem=problem)
    if env is not None:
        extra["env"] = env
    return AtifToolCall(
        tool_call_id=call_id, function_name=name, arguments=parsed, extra=extra or None
    )
