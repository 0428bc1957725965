"""What every exporter reads: a run's kept episodes, each with its steps and its conversation.

Rows come from the dataset's one reader (``read_episode_table``, ``read_steps``:
one row per episode, its latest attempt) and are validated back into the
result models they were written from (``EpisodeResult``, ``StepRecord``), so
an exporter works on typed records and never on a column name typed twice.
The leaderboard's numbers of each (suite, agent, model) come from
``leaderboard_table``, the rule ``crabray leaderboard`` applies, so an export
states the same success rate as every other report.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from crabray.core.errors import ResultsError
from crabray.core.result import (
    ConversationMessage,
    EpisodeResult,
    StepRecord,
)
from crabray.results.board._columns import LEADERBOARD_INPUT_COLUMNS
from crabray.results.board.arrow_board import leaderboard_table
from crabray.results.store.dataset import decode_dictionaries, read_episode_table, read_steps
from crabray.results.store.runs import RunManifest, RunState, list_runs, read_manifest, run_state
from crabray.results.store.schema import EPISODES_SCHEMA, LATER_COLUMNS

logger = logging.getLogger(__name__)

_MESSAGES = TypeAdapter(list[ConversationMessage])

EVAL_KEY = ("suite", "agent", "model")
"""What one evaluation of a run is: one suite's tasks by one agent with one model (an
Inspect eval log is one task by one model)."""


class ExportedEpisode(BaseModel):
    """One episode as the exporters read it: its row, its steps, its model conversation."""

    model_config = ConfigDict(frozen=True)

    result: EpisodeResult = Field(description="The episode's kept row (its latest attempt).")
    steps: list[StepRecord] = Field(description="Its agent's calls, in step and call order.")
    messages: list[ConversationMessage] = Field(
        description="Its LLM agent's conversation with the model; empty for agents without one."
    )
    conversation_note: str | None = Field(
        default=None, description="Why the stored conversation could not be read, if it could not."
    )

    @property
    def evaluators(self) -> list[str]:
        """The labels of the task's evaluator nodes (``graph_json``), in graph order."""
        try:
            graph = json.loads(self.result.graph_json) if self.result.graph_json else {}
        except json.JSONDecodeError:
            return []
        nodes = graph.get("nodes") if isinstance(graph, dict) else None
        return [str(node) for node in nodes] if isinstance(nodes, list) else []

    def results_not_sent(self) -> dict[str, StepRecord]:
        """The recorded calls of the model's last replies whose results it never got, by call id.

        An episode that ends on a call (the task solved, its steps or time used up)
        sends its result to no one, so the conversation stops at the call. Its
        step record has the result: matched from the end, by action and arguments,
        and only while they match.
        """
        answered = {m.tool_call_id for m in self.messages if m.role == "tool"}
        calls = [call for m in self.messages if m.role == "assistant" for call in m.tool_calls]
        found: dict[str, StepRecord] = {}
        records = list(reversed(self.steps))
        for call, record in zip(reversed(calls), records, strict=False):
            if call.id in answered or record.action != call.name:
                break
            if _arguments(record.arguments_json) != _arguments(call.arguments):
                break
            found[call.id] = record
        return found


class EvalGroup(BaseModel):
    """The episodes of one suite, agent and model in a run, with their leaderboard row."""

    suite: str
    agent: str
    model: str | None
    episodes: list[ExportedEpisode]
    board: dict[str, float | int | None] = Field(
        description="The group's leaderboard statistics (``STAT_COLUMNS`` and pass@k), "
        "None where undefined (NaN in the table)."
    )


class RunExport(BaseModel):
    """A run as the exporters read it."""

    run_id: str
    manifest: RunManifest | None = Field(description="The run's manifest, if it has one.")
    state: RunState | None = Field(description="Where the run stands, as ``runs list`` says.")
    episodes: list[ExportedEpisode]

    @property
    def created_at(self) -> datetime:
        """When the run started: its manifest's time, else its first episode's."""
        if self.manifest is not None:
            return self.manifest.created_at
        return min(episode.result.started_at for episode in self.episodes)

    def groups(self) -> list[EvalGroup]:
        """The run's episodes per suite, agent and model, with the leaderboard row of each."""
        members: dict[tuple[str, str, str | None], list[ExportedEpisode]] = defaultdict(list)
        for episode in self.episodes:
            result = episode.result
            members[result.suite, result.agent, result.model].append(episode)
        boards = _boards(self.episodes)
        return [
            EvalGroup(
                suite=suite,
                agent=agent,
                model=model,
                episodes=found,
                board=boards[suite, agent, model],
            )
            for (suite, agent, model), found in members.items()
        ]


def read_run(root: Path, run_id: str) -> RunExport:
    """Read run ``run_id`` of the results root ``root`` for export.

    Raises:
        ResultsError: The run is not in ``root`` (the message names the runs that
            are), has no episode yet, or a part file is unreadable.
    """
    known = list_runs(root)
    table = decode_dictionaries(read_episode_table(root, run_id, ordered=True))
    if table.num_rows == 0:
        raise _no_episodes(root, run_id, known)
    manifest = _manifest(root, run_id) if run_id in known else None
    steps = _steps_by_episode(root, run_id)
    episodes = [_episode(row, steps.get(str(row["episode_id"]), [])) for row in table.to_pylist()]
    state = run_state(root, manifest) if manifest is not None else None
    return RunExport(run_id=run_id, manifest=manifest, state=state, episodes=episodes)


def _manifest(root: Path, run_id: str) -> RunManifest | None:
    """The run's manifest; None, with a warning, when it is unreadable: the episodes
    are still worth exporting (without the run's start time and suite path)."""
    try:
        return read_manifest(root, run_id)
    except ResultsError as exc:
        logger.warning("run %s: exporting without its manifest: %s", run_id, exc)
        return None


def _no_episodes(root: Path, run_id: str, known: list[str]) -> ResultsError:
    """The error of a run with nothing to export: not there, or nothing finished yet."""
    if run_id in known:
        return ResultsError(
            f"run {run_id} in {root} has no finished episode yet; export it once some have "
            f"finished (crabray runs list {root} shows its progress)"
        )
    listed = ", ".join(known[-5:]) if known else "none"
    return ResultsError(
        f"no run {run_id} in {root} (its most recent runs: {listed}); give a run id that "
        f"`crabray runs list {root}` shows, or 'latest'"
    )


def _steps_by_episode(root: Path, run_id: str) -> dict[str, list[StepRecord]]:
    """The run's kept steps grouped by episode id, in step and call order."""
    frame = read_steps(root, run_id)
    if frame.empty:
        return {}
    rows = pa.Table.from_pandas(frame, preserve_index=False).to_pylist()
    grouped: dict[str, list[StepRecord]] = defaultdict(list)
    for row in rows:
        grouped[str(row["episode_id"])].append(StepRecord.model_validate(row))
    return grouped


def _episode(row: dict[str, Any], steps: list[StepRecord]) -> ExportedEpisode:
    """An episode row (with its steps) as the record it was written from.

    Columns added after the first release read back as null from older files;
    they get the model's defaults (no conversation, no checkpoints).
    """
    values = {
        name: value for name, value in row.items() if value is not None or name not in LATER_COLUMNS
    }
    try:
        result = EpisodeResult.model_validate(values)
    except ValidationError as exc:
        raise ResultsError(
            f"episode {row.get('episode_id')} of run {row.get('run_id')} does not fit the "
            f"result model: {exc}"
        ) from exc
    messages, note = _conversation(result)
    return ExportedEpisode(result=result, steps=steps, messages=messages, conversation_note=note)


def _conversation(result: EpisodeResult) -> tuple[list[ConversationMessage], str | None]:
    """The episode's messages, or none and why when its ``conversation_json`` is unreadable.

    An unreadable conversation is logged and noted in the export, not fatal: the
    rest of the episode (its steps, score, usage) is still worth having.
    """
    if not result.conversation_json:
        return [], None
    try:
        return _MESSAGES.validate_json(result.conversation_json), None
    except ValidationError as exc:
        note = f"conversation_json is not a list of conversation messages: {exc.errors()[0]['msg']}"
        logger.warning("episode %s: %s", result.episode_id, note)
        return [], note


def _boards(episodes: list[ExportedEpisode]) -> dict[tuple[str, str, str | None], dict[str, Any]]:
    """The leaderboard row of each (suite, agent, model), by ``leaderboard_table``'s rule."""
    columns = list(dict.fromkeys([*LEADERBOARD_INPUT_COLUMNS, *EVAL_KEY]))
    rows = [{name: _column_value(episode.result, name) for name in columns} for episode in episodes]
    board = leaderboard_table(pa.Table.from_pylist(rows, schema=_input_schema(columns)), EVAL_KEY)
    found: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for row in board.to_pylist():
        key = (str(row["suite"]), str(row["agent"]), row["model"])
        found[key] = {name: _finite(value) for name, value in row.items() if name not in EVAL_KEY}
    return found


def _input_schema(columns: list[str]) -> pa.Schema:
    """The episodes schema's fields of ``columns``, so an all-null column keeps its type."""
    return pa.schema([EPISODES_SCHEMA.field(name) for name in columns])


def _column_value(result: EpisodeResult, name: str) -> Any:
    """A result attribute as its column holds it (enums by value)."""
    value = getattr(result, name)
    return getattr(value, "value", value)


def _arguments(text: str) -> Any:
    """Call arguments as a value to compare (a model's spacing and key order aside)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _finite(value: Any) -> Any:
    """A statistic as JSON can hold it: NaN (undefined: no graded episode) becomes None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
