"""A run as Inspect AI eval logs: one log per suite, agent and model, one sample per episode.

Inspect's log is one task run by one model, so each (suite, agent, model) of
the run becomes one log file in Inspect's JSON log format (format version 2,
what ``inspect_ai.log.read_eval_log`` reads and ``inspect view`` lists): its
samples are the episodes (sample id: the task id; Inspect counts epochs from
1, crabray from 0, so a sample's ``epoch`` is crabray's plus one), each with
its messages, scores and token usage.

- **messages**: an LLM agent's conversation as it was sent (tool calls and tool
  results included); for an agent without a model (oracle, noop) the steps it
  took, as the assistant's tool calls and their results, after the task as
  the user message (``metadata.messages_from`` says which).
- **scores**: ``success`` (``C`` or ``I``) and ``score`` (in [0, 1]), on the
  episodes attributed to the agent only. An episode attributed to the benchmark
  or the infrastructure is an errored sample, with its error and no score, as
  the leaderboard leaves it out of every number; the log's metrics (accuracy,
  its interval, mean score, pass@k) are the leaderboard's own for that group.
- **usage**: each sample's tokens and cost under its model's name; the log's
  ``stats`` sum every episode's (the leaderboard's token columns count graded
  episodes only).

The records written are the models of ``_inspect_log``; the tests read every
export back with Inspect's own reader.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crabray.core.result import Attribution, StepRecord
from crabray.results.export._files import parsed_arguments, safe_name, short_hash, write_file
from crabray.results.export._inspect_log import (
    ROLES,
    InspectChoice,
    InspectConfig,
    InspectDataset,
    InspectError,
    InspectEvalScore,
    InspectLog,
    InspectMessage,
    InspectMetric,
    InspectOutput,
    InspectPlan,
    InspectPlanStep,
    InspectResults,
    InspectSample,
    InspectScore,
    InspectSpec,
    InspectStats,
    InspectToolCall,
    InspectToolCallError,
    InspectUsage,
    Status,
)
from crabray.results.export._source import EvalGroup, ExportedEpisode, RunExport

_STATUS: dict[str | None, Status] = {
    "running": "started",
    "finished": "success",
    "interrupted": "cancelled",
    "failed": "error",
    None: "success",
}
"""An Inspect log's status for each run state (no state: a run from before states)."""


def write_inspect(run: RunExport, out: Path, version: str) -> list[Path]:
    """Write one Inspect JSON log per (suite, agent, model) of ``run`` into folder ``out``.

    Files are named as Inspect names its own (``<time>_<task>_<id>.json``), which
    ``inspect view`` needs to list a JSON log; the same run exports to the same names.

    Raises:
        ResultsError: A file could not be written.
    """
    written = []
    for group in run.groups():
        log = eval_log(run, group, version)
        task = safe_name(f"{group.suite}-{group.agent}")
        path = out / f"{_file_time(run.created_at)}_{task}_{log.eval.eval_id}.json"
        write_file(path, log.model_dump_json(exclude_none=True, indent=1).encode("utf-8"))
        written.append(path)
    return written


def eval_log(run: RunExport, group: EvalGroup, version: str) -> InspectLog:
    """The Inspect log of one group of a run's episodes."""
    model = group.model or f"crabray/{group.agent}"
    samples = [_sample(episode, model) for episode in group.episodes]
    ids = sorted({sample.id for sample in samples})
    eval_id = short_hash(run.run_id, group.suite, group.agent, group.model or "", length=22)
    tags = sorted({tag for episode in group.episodes for tag in episode.result.tags})
    return InspectLog(
        status=_STATUS[None if run.state is None else run.state.value],
        eval=InspectSpec(
            eval_id=eval_id,
            run_id=run.run_id,
            created=run.created_at.isoformat(),
            task=group.suite,
            task_id=short_hash(run.run_id, group.suite, length=22),
            task_display_name=f"{group.suite} ({group.agent})",
            solver=group.agent,
            tags=tags,
            dataset=InspectDataset(
                name=group.suite,
                location=run.manifest.suite if run.manifest is not None else group.suite,
                samples=len(ids),
                sample_ids=ids,
            ),
            model=model,
            config=InspectConfig(epochs=max(s.epoch for s in samples)),
            packages={"crabray": version},
            metadata={
                "crabray_run_id": run.run_id,
                "suite": group.suite,
                "agent": group.agent,
                "model": group.model,
            },
        ),
        plan=InspectPlan(steps=[InspectPlanStep(solver=group.agent)]),
        results=_results(group, samples),
        stats=InspectStats(
            started_at=min(e.result.started_at for e in group.episodes).isoformat(),
            completed_at=max(e.result.finished_at for e in group.episodes).isoformat(),
            model_usage=_summed_usage(model, group.episodes),
        ),
        samples=samples,
    )


def _results(group: EvalGroup, samples: list[InspectSample]) -> InspectResults:
    """The log's results: the scored samples and the leaderboard's metrics of the group."""
    scored = sum(1 for sample in samples if sample.scores is not None)
    board = group.board

    def metrics(names: dict[str, str]) -> dict[str, InspectMetric]:
        return {
            shown: InspectMetric(name=shown, value=float(value))
            for shown, column in names.items()
            if (value := board.get(column)) is not None
        }

    passes = {name: name for name in board if name.startswith(("pass@", "pass^"))}
    success = {
        "accuracy": "success_rate",
        "ci_low": "success_ci_low",
        "ci_high": "success_ci_high",
        "verified_accuracy": "verified_success_rate",
        **passes,
    }
    return InspectResults(
        total_samples=len(samples),
        completed_samples=scored,
        scores=[
            InspectEvalScore(
                name=name,
                scorer=name,
                scored_samples=scored,
                unscored_samples=len(samples) - scored,
                metrics=metrics(names),
            )
            for name, names in (
                ("success", success),
                ("score", {"mean": "mean_score", "stderr": "score_se"}),
            )
        ],
        metadata={"crabray_leaderboard": board},
    )


def _sample(episode: ExportedEpisode, model: str) -> InspectSample:
    """One episode as an Inspect sample."""
    result = episode.result
    from_steps = not episode.messages
    messages = _step_messages(episode) if from_steps else _conversation(episode)
    usage = _usage(result.tokens_in, result.tokens_out, result.cost_usd)
    graded = result.attribution is Attribution.AGENT
    return InspectSample(
        id=result.task_id,
        epoch=result.epoch + 1,
        input=result.description,
        target="\n".join(episode.evaluators),
        messages=messages,
        output=_output(messages, model, usage),
        scores=_scores(episode) if graded else None,
        metadata=_metadata(episode, "steps" if from_steps else "conversation"),
        model_usage={model: usage},
        started_at=result.started_at.isoformat(),
        completed_at=result.finished_at.isoformat(),
        total_time=result.wall_time_sec,
        # As Inspect's: without the waits for the model's rate limits (and before retries).
        working_time=max(result.wall_time_sec - result.model_wait_sec, 0.0),
        uuid=result.episode_id,
        error=None if graded else _error(episode),
    )


def _scores(episode: ExportedEpisode) -> dict[str, InspectScore]:
    """The agent's grade: solved or not, and the score, with what ended the episode."""
    result = episode.result
    ended = f"ended by {result.termination_reason.value}"
    why = f"{ended}: {result.error}" if result.error else ended
    details = {
        "termination_reason": result.termination_reason.value,
        "completeness": result.completeness,
        "grader_trusted": result.grader_trusted,
        "checkpoints": [point.model_dump() for point in result.checkpoints],
    }
    return {
        "success": InspectScore(
            value="C" if result.success else "I", explanation=why, metadata=details
        ),
        "score": InspectScore(value=result.score, explanation=why),
    }


def _error(episode: ExportedEpisode) -> InspectError:
    """Why an episode not attributed to the agent is not scored: whose error, and which."""
    result = episode.result
    whose = result.attribution.value
    message = f"{whose} error, not the agent's (not scored): {result.termination_reason.value}" + (
        f": {result.error}" if result.error else ""
    )
    detail = "\n".join(
        part for part in (result.error_type, result.error, result.setup_output) if part
    )
    return InspectError(message=message, traceback=detail, traceback_ansi=detail)


def _metadata(episode: ExportedEpisode, messages_from: str) -> dict[str, Any]:
    """What Inspect has no field for: crabray's own columns of the episode."""
    result = episode.result
    facts = result.model_dump(
        mode="json",
        exclude={"description", "conversation_json", "graph_json", "checkpoints"},
    )
    facts["messages_from"] = messages_from
    if episode.conversation_note is not None:
        facts["conversation_note"] = episode.conversation_note
    return facts


def _usage(tokens_in: int, tokens_out: int, cost_usd: float) -> InspectUsage:
    return InspectUsage(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        total_tokens=tokens_in + tokens_out,
        total_cost=cost_usd,
    )


def _summed_usage(model: str, episodes: list[ExportedEpisode]) -> dict[str, InspectUsage]:
    """Every episode's usage summed under the group's model."""
    return {
        model: _usage(
            sum(e.result.tokens_in for e in episodes),
            sum(e.result.tokens_out for e in episodes),
            sum(e.result.cost_usd for e in episodes),
        )
    }


def _output(messages: list[InspectMessage], model: str, usage: InspectUsage) -> InspectOutput:
    """The sample's output: the last assistant message, with the episode's usage."""
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    if last is None:
        return InspectOutput(model=model, usage=usage)
    return InspectOutput(
        model=model,
        choices=[
            InspectChoice(message=last, stop_reason="tool_calls" if last.tool_calls else "stop")
        ],
        completion=last.content,
        usage=usage,
    )


def _conversation(episode: ExportedEpisode) -> list[InspectMessage]:
    """An LLM agent's conversation as Inspect messages; tool results name their tool.

    The results of the last calls, which the episode ended on before sending them,
    follow those calls from the step records (``metadata.sent_to_model`` false).
    """
    functions: dict[str, str] = {}
    not_sent = episode.results_not_sent()
    shown = []
    for message in episode.messages:
        role = ROLES.get(message.role, "user")
        extra: dict[str, Any] = {}
        if message.speaker != "agent":
            extra["speaker"] = message.speaker
        content = message.content
        if message.images:
            content += f"\n\n[{message.images} image(s) sent to the model; not kept]"
        calls = [_tool_call(call.id, call.name, call.arguments) for call in message.tool_calls]
        functions.update((call.id, call.function) for call in calls)
        if role == "assistant":
            extra.update(
                (name, value)
                for name in ("tokens_in", "tokens_out", "cost_usd", "latency_sec")
                if (value := getattr(message, name)) is not None
            )
        shown.append(
            InspectMessage(
                role=role,
                content=content,
                source="generate" if role == "assistant" else None,
                metadata=extra or None,
                tool_calls=calls or None,
                model=message.model if role == "assistant" else None,
                tool_call_id=message.tool_call_id if role == "tool" else None,
                function=functions.get(message.tool_call_id or "") if role == "tool" else None,
            )
        )
        shown.extend(
            _result(call.id, record, {"sent_to_model": False})
            for call in calls
            if (record := not_sent.get(call.id)) is not None
        )
    return shown


def _result(call_id: str, call: StepRecord, metadata: dict[str, Any]) -> InspectMessage:
    """A recorded call's result as a tool message (its error, if it failed)."""
    return InspectMessage(
        role="tool",
        content=call.result if call.error is None else call.result or call.error,
        tool_call_id=call_id,
        function=call.action,
        error=None if call.error is None else InspectToolCallError(message=call.error),
        metadata={"env": call.env, "duration_sec": call.duration_sec, **metadata},
    )


def _step_messages(episode: ExportedEpisode) -> list[InspectMessage]:
    """The steps of an agent without a model as messages: the task, then per step the
    observation (if one was recorded), the calls and their results."""
    shown = [InspectMessage(role="user", content=episode.result.description, source="input")]
    steps: dict[int, list[StepRecord]] = {}
    for call in episode.steps:
        steps.setdefault(call.step, []).append(call)
    for number, calls in sorted(steps.items()):
        first = calls[0]
        if first.observation:
            shown.append(
                InspectMessage(
                    role="user",
                    content=first.observation,
                    metadata={"observation_before_step": number + 1},
                )
            )
        ids = [f"step{number + 1}-call{call.call_index + 1}" for call in calls]
        shown.append(
            InspectMessage(
                role="assistant",
                content="\n".join(c.agent_message for c in calls if c.agent_message),
                tool_calls=[
                    _tool_call(call_id, call.action, call.arguments_json)
                    for call_id, call in zip(ids, calls, strict=True)
                ],
                metadata={"step": number + 1},
            )
        )
        shown.extend(_result(call_id, call, {}) for call_id, call in zip(ids, calls, strict=True))
    return shown


def _tool_call(call_id: str, name: str, arguments: str) -> InspectToolCall:
    """A call as Inspect has it: arguments an object; text that is none kept, and why."""
    parsed, problem = parsed_arguments(arguments)
    if problem is not None:
        parsed = {"raw_arguments": arguments}
    return InspectToolCall(id=call_id, function=name, arguments=parsed, parse_error=problem)


def _file_time(when: datetime) -> str:
    """How Inspect's file names write a time (``2026-11-23T07-53-00+00-00``), in UTC."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H-%M-%S+00-00")
