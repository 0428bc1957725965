"""Explicit Arrow schemas of the ``episodes`` and ``steps`` tables.

The schemas are written out by hand rather than inferred so that a column's
type never depends on the first batch that happened to be written (an all-null
``model`` column would otherwise become ``null`` typed and clash with the next
file). A test asserts they match ``EpisodeResult`` and ``StepRecord`` field for
field (computed fields, such as ``attribution``, last), so the models and the files
cannot drift apart.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from enum import Enum
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from crabray.core.errors import ResultsError
from crabray.core.result import EpisodeResult, StepRecord
from crabray.results._numpy import from_pylist

logger = logging.getLogger(__name__)

TIMESTAMP = pa.timestamp("us", tz="UTC")

# Meanings of the fields whose model declares no description.
_EXTRA_DESCRIPTIONS: dict[str, str] = {
    "run_id": "Id of the run the row belongs to: the hive partition value, the name of the "
    "folder `run_id=<RUN>` that holds the file (older files hold it as a column too).",
    "suite": "Path or name of the suite the task came from.",
    "task_id": "Id of the task within its suite.",
    "tags": "Tags of the task, for slicing results.",
    "agent": "Name of the agent configuration.",
    "model": "Model the agent used, if it uses one.",
    "epoch": "Repetition index of the same task and agent.",
    "attempt": "Infrastructure retry number, from 0.",
    "termination_reason": "Why the episode ended; 'env_error' is an infrastructure failure, "
    "'cancelled' an interrupted run's (both run again on resume).",
    "success": "Whether the task was solved.",
    "tokens_in": "Prompt tokens the agent consumed.",
    "tokens_out": "Completion tokens the agent produced.",
    "wall_time_sec": "Wall-clock seconds of the whole episode, setup included.",
    "started_at": "When the episode started (UTC).",
    "finished_at": "When the episode finished (UTC).",
    "action": "Name of the action called.",
    "duration_sec": "Seconds the call took.",
    "graph_passed_nodes": "Evaluator nodes passed after this call.",
    "graph_total_nodes": "Evaluator nodes in the task's graph.",
    "completeness": "Evaluator-graph completeness after this call.",
    "timestamp": "When the call finished (UTC).",
}


def _field(name: str, type_: pa.DataType, model: type[BaseModel], *, nullable: bool) -> pa.Field:
    """A schema field whose metadata carries the model's description of it."""
    info = model.model_fields.get(name) or model.model_computed_fields.get(name)
    description = (info.description if info else None) or _EXTRA_DESCRIPTIONS.get(name)
    if description is None:
        raise ResultsError(f"column {name!r} of {model.__name__} has no description")
    return pa.field(name, type_, nullable=nullable, metadata={"description": description})


def _episode_field(name: str, type_: pa.DataType, *, nullable: bool = False) -> pa.Field:
    return _field(name, type_, EpisodeResult, nullable=nullable)


def _step_field(name: str, type_: pa.DataType, *, nullable: bool = False) -> pa.Field:
    return _field(name, type_, StepRecord, nullable=nullable)


LATER_COLUMNS = frozenset(
    {
        "checkpoints",
        "conversation_json",
        "model_latencies_sec",
        "model_retries",
        "model_rate_limited",
        "model_wait_sec",
    }
)
"""Columns the model always sets, nullable all the same: they came after the first
release, so part files written before hold none, read as null, and a resumed old
run's compaction must be able to write those nulls into its merged file."""


EPISODES_SCHEMA = pa.schema(
    [
        _episode_field("episode_id", pa.string()),
        _episode_field("run_id", pa.string()),
        _episode_field("suite", pa.string()),
        _episode_field("task_id", pa.string()),
        _episode_field("tags", pa.list_(pa.string())),
        _episode_field("agent", pa.string()),
        _episode_field("model", pa.string(), nullable=True),
        _episode_field("epoch", pa.int64()),
        _episode_field("attempt", pa.int64()),
        _episode_field("termination_reason", pa.string()),
        _episode_field("success", pa.bool_()),
        _episode_field("score", pa.float64()),
        _episode_field("completeness", pa.float64()),
        _episode_field(
            "checkpoints",
            pa.list_(pa.struct([("total", pa.int64()), ("result", pa.int64())])),
            nullable=True,  # LATER_COLUMNS
        ),
        _episode_field("steps", pa.int64()),
        _episode_field("action_errors", pa.int64()),
        _episode_field("tokens_in", pa.int64()),
        _episode_field("tokens_out", pa.int64()),
        _episode_field("model_calls", pa.int64()),
        _episode_field("model_latency_sec", pa.float64()),
        _episode_field("cost_usd", pa.float64()),
        _episode_field("wall_time_sec", pa.float64()),
        _episode_field("setup_time_sec", pa.float64()),
        _episode_field("node", pa.string(), nullable=True),
        _episode_field("grader_trusted", pa.bool_(), nullable=True),
        _episode_field("grader_untrusted_reason", pa.string(), nullable=True),
        _episode_field("error", pa.string(), nullable=True),
        _episode_field("error_type", pa.string(), nullable=True),
        _episode_field("description", pa.string()),
        _episode_field("graph_json", pa.string()),
        _episode_field("conversation_json", pa.string(), nullable=True),  # LATER_COLUMNS
        _episode_field("setup_output", pa.string(), nullable=True),
        _episode_field("started_at", TIMESTAMP),
        _episode_field("finished_at", TIMESTAMP),
        _episode_field("model_latencies_sec", pa.list_(pa.float64()), nullable=True),  # LATER
        _episode_field("model_retries", pa.int64(), nullable=True),  # LATER_COLUMNS
        _episode_field("model_rate_limited", pa.int64(), nullable=True),  # LATER_COLUMNS
        _episode_field("model_wait_sec", pa.float64(), nullable=True),  # LATER_COLUMNS
        _episode_field("attribution", pa.string()),
    ],
    metadata={"description": "One row per episode attempt (crabray EpisodeResult)."},
)

STEPS_SCHEMA = pa.schema(
    [
        _step_field("episode_id", pa.string()),
        _step_field("run_id", pa.string()),
        _step_field("task_id", pa.string()),
        _step_field("agent", pa.string()),
        _step_field("epoch", pa.int64()),
        _step_field("attempt", pa.int64()),
        _step_field("step", pa.int64()),
        _step_field("call_index", pa.int64()),
        _step_field("env", pa.string()),
        _step_field("action", pa.string()),
        _step_field("arguments_json", pa.string()),
        _step_field("result", pa.string()),
        _step_field("error", pa.string(), nullable=True),
        _step_field("agent_message", pa.string(), nullable=True),
        _step_field("observation", pa.string(), nullable=True),
        _step_field("screenshot_path", pa.string(), nullable=True),
        _step_field("graph_passed", pa.list_(pa.int64())),
        _step_field("duration_sec", pa.float64()),
        _step_field("graph_passed_nodes", pa.int64()),
        _step_field("graph_total_nodes", pa.int64()),
        _step_field("completeness", pa.float64()),
        _step_field("timestamp", TIMESTAMP),
    ],
    metadata={"description": "One row per agent action call (crabray StepRecord)."},
)

PARTITION_COLUMN = "run_id"
"""The column whose value is the folder a part file is in (``run_id=<RUN>/``), not a column
of the file: every hive-partitioned reader (pandas, pyarrow, polars, DuckDB) then reads a
table's folder as it is, taking the column from the folder's name."""


def file_schema(schema: pa.Schema) -> pa.Schema:
    """The columns a part file of ``schema``'s table holds: all but ``PARTITION_COLUMN``.

    A file that held it as well (as older files do) made pandas and
    ``pyarrow.parquet`` refuse the folder (its type as a column and as a
    partition differ); crabray's readers read both kinds of file.
    """
    return schema.remove(schema.get_field_index(PARTITION_COLUMN))


EPISODE_KEY = ("run_id", "agent", "task_id", "epoch")
"""Columns that identify an episode across its attempts."""

STEP_KEY = ("episode_id", "step", "call_index")
"""Columns that identify one call of one execution."""


def _column_value(value: Any) -> Any:
    """A model attribute as Arrow takes it (enums by value)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return [item.model_dump() for item in value]
    return value


def _models_to_table(models: Sequence[BaseModel], schema: pa.Schema) -> pa.Table:
    """Columns of ``models`` in ``schema`` order, typed by it.

    Built by ``from_pylist``, not ``pa.Table.from_pydict``: pyarrow 26 imports
    pandas (0.3 to 0.8 s of a run's driver under load) for its first ``pa.array``.
    """
    try:
        columns = [
            from_pylist([_column_value(getattr(model, field.name)) for model in models], field.type)
            for field in schema
        ]
        return pa.Table.from_arrays(columns, schema=schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise ResultsError(
            f"records do not fit the results schema ({type(exc).__name__}: {exc}); "
            "check that crabray.results.store.schema matches crabray.core.result"
        ) from exc


def episodes_table(results: Sequence[EpisodeResult]) -> pa.Table:
    """The ``episodes`` table of ``results``, one row each, typed by ``EPISODES_SCHEMA``.

    Naive datetimes are taken to be UTC (Arrow's rule); the models produce aware ones.

    Raises:
        ResultsError: A value does not fit its column (the schema and model disagree).
    """
    return _models_to_table(results, EPISODES_SCHEMA)


def steps_table(steps: Sequence[StepRecord]) -> pa.Table:
    """The ``steps`` table of ``steps``, one row each, typed by ``STEPS_SCHEMA``.

    Raises:
        ResultsError: A value does not fit its column (the schema and model disagree).
    """
    return _models_to_table(steps, STEPS_SCHEMA)
