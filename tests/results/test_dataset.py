"""Writing with ResultSink and reading back: round trip, dedup, resume, damaged files."""

from __future__ import annotations

import importlib.util
import math
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crabray.core.errors import ResultsError
from crabray.core.result import EpisodeResult, StepRecord, TerminationReason
from crabray.results import (
    EPISODES_SCHEMA,
    STEPS_SCHEMA,
    ResultSink,
    attempts_so_far,
    episodes_table,
    finished_keys,
    read_episode_table,
    read_episodes,
    read_steps,
    steps_table,
)
from crabray.results.store import schema as results_schema
from tests.conftest import ROOT, raw_episode_rows

RUN = "run-a"


def _plain(value: Any) -> Any:
    """A frame cell as the model holds it (NaN back to None, numpy scalars to Python)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value.item() if hasattr(value, "item") else value


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _files(out: Path, table: str, run_id: str = RUN) -> list[Path]:
    return sorted((out / table / f"run_id={run_id}").glob("part-*.parquet"))


def test_round_trip_of_every_column(tmp_path, make_record):
    full = make_record(
        "t1",
        tags=["gui", "files"],
        model="gpt-x",
        score=0.75,
        completeness=0.5,
        action_errors=2,
        tokens_in=1234,
        tokens_out=56,
        wall_time_sec=12.5,
        setup_time_sec=1.25,
        node="node-7",
        error="boom",
        error_type="RuntimeError",
        reason=TerminationReason.AGENT_FAIL,
    )
    full.steps[0] = full.steps[0].model_copy(
        update={"error": "no such file", "agent_message": "trying", "result": "ok"}
    )
    bare = make_record("t2", tags=[])
    ResultSink(tmp_path, RUN).write([full, bare])

    episodes = [EpisodeResult.model_validate(row) for row in _rows(read_episodes(tmp_path, RUN))]
    assert episodes == [full.result, bare.result]
    steps = [StepRecord.model_validate(row) for row in _rows(read_steps(tmp_path, RUN))]
    assert sorted(steps, key=lambda s: (s.task_id, s.step)) == [*full.steps, *bare.steps]


def test_frames_have_schema_columns_and_utc_timestamps(tmp_path, make_record):
    ResultSink(tmp_path, RUN).write([make_record("t1")])
    episodes = read_episodes(tmp_path, RUN)
    assert list(episodes.columns) == EPISODES_SCHEMA.names
    assert str(episodes["finished_at"].dt.tz) == "UTC"
    assert episodes["tags"].iloc[0] == []
    assert list(read_steps(tmp_path, RUN).columns) == STEPS_SCHEMA.names


def test_absent_dataset_reads_as_empty_frames_with_columns(tmp_path):
    assert read_episodes(tmp_path / "nothing").empty
    assert list(read_episodes(tmp_path, RUN).columns) == EPISODES_SCHEMA.names
    assert list(read_episodes(tmp_path, columns=["agent", "score"]).columns) == ["agent", "score"]
    assert list(read_steps(tmp_path, RUN).columns) == STEPS_SCHEMA.names
    assert finished_keys(tmp_path, RUN) == set()
    assert attempts_so_far(tmp_path, RUN) == {}


def test_column_selection_and_unknown_columns(tmp_path, make_record):
    ResultSink(tmp_path, RUN).write([make_record("t1")])
    frame = read_episodes(tmp_path, RUN, columns=["score", "task_id"])
    assert list(frame.columns) == ["score", "task_id"]
    assert frame["task_id"].tolist() == ["t1"]
    with pytest.raises(ResultsError, match="scroe"):
        read_episodes(tmp_path, RUN, columns=["scroe"])
    with pytest.raises(ResultsError, match="known columns"):
        read_steps(tmp_path, RUN, columns=["nope"])


def test_empty_batch_writes_nothing(tmp_path):
    ResultSink(tmp_path, RUN).write([])
    assert not (tmp_path / "episodes").exists()
    assert not (tmp_path / "steps").exists()


def test_one_steps_file_and_one_episodes_file_per_batch(tmp_path, make_record):
    sink = ResultSink(tmp_path, RUN)
    sink.write([make_record("t1"), make_record("t2")])
    sink.write([make_record("t3", n_steps=0)])
    assert len(_files(tmp_path, "episodes")) == 2
    assert len(_files(tmp_path, "steps")) == 1  # the step-less batch writes no steps file
    assert not list(tmp_path.rglob(".tmp-*"))


def test_latest_attempt_is_kept_with_only_its_steps(tmp_path, make_record):
    sink = ResultSink(tmp_path, RUN)
    failed = make_record("t1", attempt=0, reason=TerminationReason.ENV_ERROR, n_steps=3)
    retried = make_record("t1", attempt=1, n_steps=2, finished_offset_sec=-30)
    other_epoch = make_record("t1", epoch=1, n_steps=1)
    sink.write([retried, other_epoch])
    sink.write([failed])  # written last and finished last, but a lower attempt

    episodes = read_episodes(tmp_path, RUN)
    assert len(episodes) == 2
    kept = episodes.set_index("epoch").loc[0]
    assert kept["episode_id"] == retried.result.episode_id
    steps = read_steps(tmp_path, RUN)
    assert set(steps["episode_id"]) == {retried.result.episode_id, other_epoch.result.episode_id}
    assert len(steps) == 3
    assert failed.result.episode_id not in set(steps["episode_id"])


def test_same_attempt_tie_goes_to_latest_finished(tmp_path, make_record):
    sink = ResultSink(tmp_path, RUN)
    later = make_record("t1", finished_offset_sec=10)
    earlier = make_record("t1", finished_offset_sec=0)
    sink.write([later])
    sink.write([earlier])
    assert read_episodes(tmp_path, RUN)["episode_id"].tolist() == [later.result.episode_id]


@pytest.mark.parametrize("columns", [None, ["task_id", "score"]])
def test_full_tie_goes_to_the_greatest_episode_id(tmp_path, make_record, columns):
    """Same attempt, same finished_at: episode_id decides, asked for or not."""
    winner = make_record("t1", score=0.25, episode_id="ep-z")
    ResultSink(tmp_path, RUN).write([winner, make_record("t1", score=0.75, episode_id="ep-a")])
    assert read_episodes(tmp_path, RUN, columns)["score"].tolist() == [0.25]
    assert set(read_steps(tmp_path, RUN)["episode_id"]) == {"ep-z"}


def test_categorical_columns_read_as_categoricals(tmp_path, make_record):
    ResultSink(tmp_path, RUN).write([make_record("t1"), make_record("t2", agent="agent-2")])
    plain = read_episodes(tmp_path, columns=["run_id", "agent", "task_id", "score"])
    categorical = read_episodes(
        tmp_path, columns=["run_id", "agent", "task_id", "score"], categorical=True
    )
    assert all(isinstance(categorical[c].dtype, pd.CategoricalDtype) for c in ("run_id", "agent"))
    pd.testing.assert_frame_equal(categorical.astype(plain.dtypes.to_dict()), plain)


def test_orphan_steps_of_an_uncommitted_episode_are_dropped(tmp_path, make_record):
    sink = ResultSink(tmp_path, RUN)
    sink.write([make_record("t1")])
    orphan = make_record("t2")
    # What a crash between the steps file and the episodes file leaves behind.
    pq.write_table(
        steps_table(orphan.steps), tmp_path / "steps" / f"run_id={RUN}" / "part-1-orphan00.parquet"
    )
    assert set(read_steps(tmp_path, RUN)["task_id"]) == {"t1"}


def test_finished_keys_exclude_infra_failures(tmp_path, make_record):
    ResultSink(tmp_path, RUN).write(
        [
            make_record("ok"),
            make_record("lost", reason=TerminationReason.AGENT_FAIL),
            make_record("broken", reason=TerminationReason.ENV_ERROR),
            make_record("retried", reason=TerminationReason.ENV_ERROR),
            make_record("retried", attempt=1, reason=TerminationReason.TIMEOUT),
        ]
    )
    ResultSink(tmp_path, "run-b").write(
        [make_record("other", run_id="run-b", reason=TerminationReason.SUCCESS)]
    )
    assert finished_keys(tmp_path, RUN) == {
        ("agent-1", "ok", 0),
        ("agent-1", "lost", 0),
        ("agent-1", "retried", 0),
    }
    assert attempts_so_far(tmp_path, RUN) == {
        ("agent-1", "ok", 0): 0,
        ("agent-1", "lost", 0): 0,
        ("agent-1", "broken", 0): 0,
        ("agent-1", "retried", 0): 1,
    }
    assert finished_keys(tmp_path, "run-b") == {("agent-1", "other", 0)}


def test_reading_every_run(tmp_path, make_record):
    ResultSink(tmp_path, "run-a").write([make_record("t1", run_id="run-a")])
    ResultSink(tmp_path, "run-b").write([make_record("t1", run_id="run-b")])
    frame = read_episodes(tmp_path)
    assert frame["run_id"].tolist() == ["run-a", "run-b"]
    assert sorted(read_steps(tmp_path)["run_id"].unique()) == ["run-a", "run-b"]


def test_sink_refuses_rows_of_another_run(tmp_path, make_record):
    with pytest.raises(ResultsError, match="run-b"):
        ResultSink(tmp_path, RUN).write([make_record("t1", run_id="run-b")])
    record = make_record("t1")
    record.steps[1] = record.steps[1].model_copy(update={"episode_id": "elsewhere"})
    with pytest.raises(ResultsError, match="elsewhere"):
        ResultSink(tmp_path, RUN).write([record])
    assert not (tmp_path / "episodes").exists()


@pytest.mark.parametrize("run_id", ["", "../escape", ".hidden", "a/b", "x" * 200])
def test_unusable_run_ids_are_refused(tmp_path, run_id):
    with pytest.raises(ResultsError, match="run id"):
        ResultSink(tmp_path, run_id)
    with pytest.raises(ResultsError, match="run id"):
        read_episodes(tmp_path, run_id)


def test_leftover_temporary_files_are_ignored(tmp_path, make_record):
    sink = ResultSink(tmp_path, RUN)
    sink.write([make_record("t1")])
    before_episodes, before_steps = read_episodes(tmp_path, RUN), read_steps(tmp_path, RUN)
    for table in ("episodes", "steps"):
        committed = _files(tmp_path, table)[0].read_bytes()
        directory = tmp_path / table / f"run_id={RUN}"
        (directory / ".tmp-part-2-half0000.parquet").write_bytes(committed[: len(committed) // 2])
        (directory / ".tmp-part-3-empty000.parquet").write_bytes(b"")
    pd.testing.assert_frame_equal(read_episodes(tmp_path, RUN), before_episodes)
    pd.testing.assert_frame_equal(read_episodes(tmp_path), before_episodes)
    pd.testing.assert_frame_equal(read_steps(tmp_path, RUN), before_steps)
    sink.write([make_record("t2")])
    sink.compact()
    assert len(read_episodes(tmp_path, RUN)) == 2


def test_a_run_with_nothing_committed_yet_reads_as_no_rows(tmp_path, make_record):
    """A reader polling a run in progress (as the kill-and-resume tests do) never crashes."""
    half = ResultSink(tmp_path / "other", RUN)
    half.write([make_record("t1")])
    committed = _files(tmp_path / "other", "episodes")[0].read_bytes()
    for table in ("episodes", "steps"):
        directory = tmp_path / table / f"run_id={RUN}"
        directory.mkdir(parents=True)
        (directory / ".tmp-part-1-half0000.parquet").write_bytes(committed[: len(committed) // 2])
    (tmp_path / "episodes" / "run_id=run-b").mkdir()
    assert read_episodes(tmp_path, RUN).empty
    assert read_episodes(tmp_path).empty
    assert read_steps(tmp_path, RUN).empty
    assert finished_keys(tmp_path, RUN) == set()
    assert raw_episode_rows(tmp_path, ["task_id", "attempt"]) == []
    ResultSink(tmp_path, RUN).write([make_record("t1")])
    assert raw_episode_rows(tmp_path, ["task_id", "attempt"]) == [{"task_id": "t1", "attempt": 0}]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
@pytest.mark.parametrize("table", ["episodes", "steps"])
def test_corrupt_part_file_is_an_error_naming_it(tmp_path, make_record, damage, table):
    sink = ResultSink(tmp_path, RUN)
    sink.write([make_record("t1")])
    sink.write([make_record("t2")])
    victim = _files(tmp_path, table)[-1]
    content = victim.read_bytes()
    victim.write_bytes(
        {"garbage": b"not parquet at all" * 10, "truncated": content[: len(content) // 2]}.get(
            damage, b""
        )
    )
    read = read_episodes if table == "episodes" else read_steps
    with pytest.raises(ResultsError, match=str(victim.name)) as caught:
        read(tmp_path, RUN)
    assert str(victim) in str(caught.value)
    with pytest.raises(ResultsError, match=str(victim.name)):
        read(tmp_path)
    with pytest.raises(ResultsError, match=str(victim.name)):
        sink.compact()


def test_compaction_keeps_the_deduplicated_content(tmp_path, make_record):
    sink = ResultSink(tmp_path, RUN)
    sink.write([make_record("t1", reason=TerminationReason.ENV_ERROR), make_record("t2")])
    sink.write([make_record("t1", attempt=1), make_record("t3", n_steps=0)])
    sink.write([make_record("t4", epoch=2)])
    before_episodes, before_steps = read_episodes(tmp_path, RUN), read_steps(tmp_path, RUN)
    raw_rows = sum(pq.read_metadata(path).num_rows for path in _files(tmp_path, "episodes"))

    sink.compact()

    assert len(_files(tmp_path, "episodes")) == 1
    assert len(_files(tmp_path, "steps")) == 1
    assert pq.read_metadata(_files(tmp_path, "episodes")[0]).num_rows == raw_rows
    pd.testing.assert_frame_equal(read_episodes(tmp_path, RUN), before_episodes)
    pd.testing.assert_frame_equal(read_steps(tmp_path, RUN), before_steps)
    sink.compact()  # nothing left to merge
    assert len(_files(tmp_path, "episodes")) == 1


@pytest.mark.parametrize(
    "column", ["setup_output", "conversation_json", "checkpoints", "attribution"]
)
def test_a_run_written_before_a_column_existed_still_compacts(tmp_path, make_record, column):
    """A resumed old run merges its old part files (no column) with new rows (the column).

    Each of these columns came after the first release; the old rows read as null
    (attribution: from the one rule, as every reader gives it).
    """
    sink = ResultSink(tmp_path, RUN)
    sink.write([make_record("t1")])
    (old,) = _files(tmp_path, "episodes")
    pq.write_table(pq.read_table(old).drop_columns([column]), old)
    fresh = make_record("t2")
    fresh.result.setup_output = "[box] init\nready"
    sink.write([fresh])

    sink.compact()

    rows = read_episodes(tmp_path, RUN).set_index("task_id")
    assert len(_files(tmp_path, "episodes")) == 1
    if column == "attribution":
        assert rows["attribution"]["t1"] == rows["attribution"]["t2"] == "agent"
    elif column == "setup_output":
        assert rows["setup_output"]["t2"] == "[box] init\nready"
        assert rows[column].isna()["t1"]
    else:
        assert rows[column].isna()["t1"] and not rows[column].isna()["t2"]


def test_compaction_interrupted_before_deleting_parts_is_harmless(tmp_path, make_record):
    sink = ResultSink(tmp_path, RUN)
    sink.write([make_record("t1", reason=TerminationReason.ENV_ERROR)])
    sink.write([make_record("t1", attempt=1), make_record("t2")])
    before_episodes, before_steps = read_episodes(tmp_path, RUN), read_steps(tmp_path, RUN)
    saved = tmp_path / "saved"
    shutil.copytree(tmp_path / "episodes", saved / "episodes")
    shutil.copytree(tmp_path / "steps", saved / "steps")

    sink.compact()
    # Put the merged parts back: the state a kill after the commit, before the deletes, leaves.
    shutil.copytree(saved / "episodes", tmp_path / "episodes", dirs_exist_ok=True)
    shutil.copytree(saved / "steps", tmp_path / "steps", dirs_exist_ok=True)
    assert len(_files(tmp_path, "episodes")) == 3

    pd.testing.assert_frame_equal(read_episodes(tmp_path, RUN), before_episodes)
    pd.testing.assert_frame_equal(read_steps(tmp_path, RUN), before_steps)
    sink.compact()
    (merged,) = _files(tmp_path, "episodes")
    assert pq.read_metadata(merged).num_rows == 3  # both attempts of t1, and t2, once each
    (merged_steps,) = _files(tmp_path, "steps")
    assert pq.read_metadata(merged_steps).num_rows == 6
    pd.testing.assert_frame_equal(read_steps(tmp_path, RUN), before_steps)


def test_raw_pandas_reading_as_documented(tmp_path, make_record):
    ResultSink(tmp_path, RUN).write([make_record("t1"), make_record("t2")])
    ResultSink(tmp_path, "run-b").write([make_record("t1", run_id="run-b")])
    (tmp_path / "episodes" / f"run_id={RUN}" / ".tmp-part-9-deadbeef.parquet").write_bytes(b"x")
    raw = pd.read_parquet(tmp_path / "episodes")
    assert sorted(raw["run_id"]) == ["run-a", "run-a", "run-b"]
    one = pd.read_parquet(tmp_path / "episodes", filters=[("run_id", "==", RUN)])
    assert sorted(one["task_id"]) == ["t1", "t2"] and set(one["run_id"]) == {RUN}
    steps = pd.read_parquet(tmp_path / "steps")
    assert sorted(set(steps["run_id"])) == ["run-a", "run-b"]


def _as_written_before(out: Path, run_id: str, records: list[Any]) -> None:
    """Part files as crabray wrote them before: the run id a column of the files too."""
    stem = f"part-1-{run_id[:8].ljust(8, '0')}"
    for table, rows in (
        ("steps", steps_table([step for record in records for step in record.steps])),
        ("episodes", episodes_table([record.result for record in records])),
    ):
        folder = out / table / f"run_id={run_id}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, folder / f"{stem}.parquet")


def test_a_root_written_before_run_id_left_the_files_still_reads_and_resumes(tmp_path, make_record):
    """Files holding run_id as a column (older crabray) read through crabray's readers; a
    resumed run's compaction writes them without it, and pandas then reads the folder."""
    old_run = [make_record("t1"), make_record("t2", reason=TerminationReason.ENV_ERROR)]
    _as_written_before(tmp_path, RUN, old_run)
    _as_written_before(tmp_path, "run-b", [make_record("t1", run_id="run-b")])
    assert "run_id" in pq.read_schema(_files(tmp_path, "episodes")[0]).names
    assert sorted(read_episodes(tmp_path)["run_id"]) == ["run-a", "run-a", "run-b"]
    assert finished_keys(tmp_path, RUN) == {("agent-1", "t1", 0)}
    assert attempts_so_far(tmp_path, RUN)[("agent-1", "t2", 0)] == 0
    assert len(read_steps(tmp_path, RUN)) == 4

    sink = ResultSink(tmp_path, RUN)  # the resumed run retries t2
    sink.write([make_record("t2", attempt=1)])
    sink.compact()

    (merged,) = _files(tmp_path, "episodes")
    assert "run_id" not in pq.read_schema(merged).names
    assert "run_id" not in pq.read_schema(_files(tmp_path, "steps")[0]).names
    kept = read_episodes(tmp_path, RUN)
    assert list(kept["task_id"]) == ["t1", "t2"] and list(kept["attempt"]) == [0, 1]
    assert finished_keys(tmp_path, RUN) == {("agent-1", "t1", 0), ("agent-1", "t2", 0)}
    raw = pd.read_parquet(tmp_path / "episodes" / f"run_id={RUN}")
    assert len(raw) == 3 and "run_id" not in raw.columns  # the folder names the run


def test_new_part_files_hold_no_run_id_column(tmp_path, make_record):
    """The run is the partition folder's name, as hive-partitioned readers expect."""
    sink = ResultSink(tmp_path, RUN)
    sink.write([make_record("t1")])
    sink.write([make_record("t2")])
    for table in ("episodes", "steps"):
        assert all("run_id" not in pq.read_schema(f).names for f in _files(tmp_path, table))
    sink.compact()
    for table in ("episodes", "steps"):
        (merged,) = _files(tmp_path, table)
        assert "run_id" not in pq.read_schema(merged).names
    assert list(read_episodes(tmp_path)["run_id"]) == [RUN, RUN]


def _docs_hooks() -> ModuleType:
    """The site's hooks (scripts/docs_hooks.py), which generate the schema page's column tables."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ARROW_SCHEMAS = {
    name: value for name, value in vars(results_schema).items() if isinstance(value, pa.Schema)
}


@pytest.mark.parametrize("name", sorted(ARROW_SCHEMAS))
def test_schema_doc_tables_list_every_column_with_type_and_description(name: str) -> None:
    doc = (ROOT / "docs" / "results-schema.md").read_text()
    page = _docs_hooks().fill_columns(doc)
    assert "<!-- columns:" not in page
    rows = []
    for field in ARROW_SCHEMAS[name]:
        description = " ".join((field.metadata or {}).get(b"description", b"").decode().split())
        assert description, f"column {field.name} of {name} has no description"
        nullable = "yes" if field.nullable else "no"
        rows.append(f"| `{field.name}` | `{field.type}` | {nullable} | {description} |")
    assert "\n".join(rows) in page, f"the table of {name} is not every column, in order"


def test_schema_doc_generation_refuses_gaps() -> None:
    hooks = _docs_hooks()
    with pytest.raises(ValueError, match="no description"):
        hooks.columns_table(pa.schema([pa.field("undescribed", pa.int64())]))
    doc = (ROOT / "docs" / "results-schema.md").read_text()
    with pytest.raises(ValueError, match="STEPS_SCHEMA"):
        hooks.fill_columns(doc.replace("<!-- columns: STEPS_SCHEMA -->", ""))
    with pytest.raises(ValueError, match="NO_SUCH_SCHEMA"):
        hooks.fill_columns(doc + "\n<!-- columns: NO_SUCH_SCHEMA -->\n")


def test_a_part_file_without_a_column_reads_it_as_nulls(tmp_path, make_record):
    """An older part file lacking a column reads it as nulls, beside files that have it."""
    ResultSink(tmp_path, "old").write([make_record("t1", run_id="old", node="n1")])
    ResultSink(tmp_path, "new").write([make_record("t2", run_id="new", node="n2")])
    (part,) = (tmp_path / "episodes" / "run_id=old").glob("*.parquet")
    pq.write_table(pq.read_table(part).drop_columns(["node"]), part)
    rows = read_episode_table(tmp_path, columns=["task_id", "node"]).to_pylist()
    assert sorted(rows, key=lambda row: row["task_id"]) == [
        {"task_id": "t1", "node": None},
        {"task_id": "t2", "node": "n2"},
    ]


def test_a_part_file_without_run_id_or_with_narrower_types_reads_as_the_schema(
    tmp_path, make_record
):
    """run_id comes from the partition directory; an int32 column is cast to the schema's int64."""
    ResultSink(tmp_path, "old").write([make_record("t1", run_id="old", n_steps=3)])
    ResultSink(tmp_path, "new").write([make_record("t2", run_id="new", n_steps=4)])
    (part,) = (tmp_path / "episodes" / "run_id=old").glob("*.parquet")
    table = pq.read_table(part)
    assert "run_id" not in table.column_names
    steps = table.schema.get_field_index("steps")
    table = table.set_column(steps, "steps", table.column("steps").cast("int32"))
    pq.write_table(table, part)
    rows = read_episode_table(tmp_path, columns=["run_id", "task_id", "steps"])
    assert rows.schema.field("steps").type == "int64"
    assert sorted(rows.to_pylist(), key=lambda row: row["task_id"]) == [
        {"run_id": "old", "task_id": "t1", "steps": 3},
        {"run_id": "new", "task_id": "t2", "steps": 4},
    ]
