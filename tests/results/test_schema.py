"""The Arrow schemas stay in step with the result models."""

from __future__ import annotations

import types
import typing
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum

import pyarrow as pa
import pytest
from pydantic import BaseModel

from crabray.core.errors import ResultsError
from crabray.core.result import CheckpointScore, EpisodeResult, StepRecord
from crabray.results import EPISODES_SCHEMA, STEPS_SCHEMA, episodes_table, steps_table
from crabray.results.store.schema import LATER_COLUMNS

PAIRS = [(EPISODES_SCHEMA, EpisodeResult), (STEPS_SCHEMA, StepRecord)]


def _is_optional(annotation: object) -> bool:
    return isinstance(annotation, types.UnionType) and type(None) in typing.get_args(annotation)


@pytest.mark.parametrize(("schema", "model"), PAIRS)
def test_schema_fields_are_the_model_fields_in_order(schema: pa.Schema, model: type[BaseModel]):
    assert schema.names == [*model.model_fields, *model.model_computed_fields]


@pytest.mark.parametrize(("schema", "model"), PAIRS)
def test_nullable_exactly_where_the_model_is_optional(schema: pa.Schema, model: type[BaseModel]):
    """Or where old part files lack the column (``LATER_COLUMNS``): they read as null."""
    for name, info in model.model_fields.items():
        optional = _is_optional(info.annotation) or name in LATER_COLUMNS
        assert schema.field(name).nullable == optional, name


@pytest.mark.parametrize(("schema", "model"), PAIRS)
def test_every_column_is_described(schema: pa.Schema, model: type[BaseModel]):
    for name, info in model.model_fields.items():
        description = schema.field(name).metadata[b"description"].decode()
        assert description
        if info.description:
            assert description == info.description


@pytest.mark.parametrize(("schema", "model"), PAIRS)
def test_types_follow_the_annotations(schema: pa.Schema, model: type[BaseModel]):
    expected = {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: pa.string()}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if _is_optional(annotation):
            (annotation,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        actual = schema.field(name).type
        if annotation is datetime:
            assert actual == pa.timestamp("us", tz="UTC"), name
        elif annotation == list[str]:
            assert actual == pa.list_(pa.string()), name
        elif annotation == list[int]:
            assert actual == pa.list_(pa.int64()), name
        elif annotation == list[float]:
            assert actual == pa.list_(pa.float64()), name
        elif annotation == list[CheckpointScore]:
            points = pa.struct([("total", pa.int64()), ("result", pa.int64())])
            assert actual == pa.list_(points), name
        elif annotation in expected:
            assert actual == expected[annotation], name
        else:  # enums are stored by their string value
            assert actual == pa.string(), name


def test_tables_carry_the_schemas_and_enum_values(make_record):
    record = make_record("t1")
    episodes = episodes_table([record.result])
    steps = steps_table(record.steps)
    assert episodes.schema == EPISODES_SCHEMA
    assert steps.schema == STEPS_SCHEMA
    assert episodes.column("termination_reason").to_pylist() == ["success"]
    assert episodes.column("checkpoints").to_pylist() == [[]]
    assert steps.num_rows == 2


def test_checkpoints_round_trip_as_a_list_of_structs(make_record):
    record = make_record("t1")
    record.result.checkpoints = [
        CheckpointScore(total=2, result=1),
        CheckpointScore(total=1, result=0),
    ]
    episodes = episodes_table([record.result])
    assert episodes.column("checkpoints").to_pylist() == [
        [{"total": 2, "result": 1}, {"total": 1, "result": 0}]
    ]


def test_a_checkpoint_cannot_earn_more_than_it_is_worth():
    with pytest.raises(ValueError, match="result 3 exceeds total 2"):
        CheckpointScore(total=2, result=3)


def test_tables_equal_pyarrows_own_conversion_of_the_same_values(make_record):
    """Built from buffers (no pandas import), the tables hold what ``pa.array`` would."""
    plus_two = timezone(timedelta(hours=2))
    first, second = make_record("t1"), make_record("t2")
    first.result.started_at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=plus_two)
    first.result.finished_at = datetime(2026, 1, 2, 3, 4, 6)  # naive: taken to be UTC
    first.result.checkpoints = [CheckpointScore(total=2, result=1)]
    second.result.tags = ["é", "", "a,b"]
    second.result.model, second.result.error = None, "boom ✗"
    records = [first.result, second.result]
    steps = [*first.steps, *second.steps]
    steps[0].error = None
    for table, models, schema in [
        (episodes_table(records), records, EPISODES_SCHEMA),
        (steps_table(steps), steps, STEPS_SCHEMA),
    ]:
        expected = {
            name: [_stored(getattr(model, name)) for model in models] for name in schema.names
        }
        assert table.equals(pa.Table.from_pydict(expected, schema=schema)), schema
    assert episodes_table(records).column("started_at")[0].as_py() == datetime(
        2026, 1, 2, 1, 4, 5, 678901, tzinfo=UTC
    )


def _stored(value: object) -> object:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list):
        return [item.model_dump() if isinstance(item, BaseModel) else item for item in value]
    return value


@pytest.mark.parametrize(("field", "value"), [("epoch", "one"), ("task_id", 5)])
def test_a_value_of_the_wrong_type_is_a_results_error(make_record, field: str, value: object):
    record = make_record("t1")
    record.result.__dict__[field] = value  # past pydantic, as a schema/model mismatch would be
    with pytest.raises(ResultsError, match="do not fit the results schema"):
        episodes_table([record.result])
