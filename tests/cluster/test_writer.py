"""Finished episodes are written on a thread and counted only once they are on disk."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from crabray.agents import agent_spec
from crabray.cluster.sweep import InFlight, SweepItem
from crabray.cluster.writer import ResultBatches
from crabray.core.errors import ResultsError
from crabray.core.result import EpisodeRecord, EpisodeResult
from crabray.results import ResultSink
from tests.conftest import raw_episode_rows

RUN = "writer-run"


def finished(*task_ids: str) -> list[tuple[InFlight, EpisodeRecord]]:
    oracle = agent_spec("oracle")
    return [
        (
            InFlight(SweepItem(task_id=task_id, agent=oracle), 0.0, None),
            EpisodeRecord(
                result=EpisodeResult(
                    run_id=RUN,
                    suite="s",
                    task_id=task_id,
                    agent="oracle",
                    termination_reason="success",
                )
            ),
        )
        for task_id in task_ids
    ]


def written_tasks(out: Path) -> list[str]:
    return sorted(row["task_id"] for row in raw_episode_rows(out, ["task_id"]))


def test_a_batch_counts_once_on_disk_and_the_next_waits_for_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink = ResultSink(out, RUN)
    release = threading.Event()
    started = threading.Event()

    def slow_write(records: list[EpisodeRecord]) -> None:
        started.set()
        assert release.wait(30), "the test never let the write end"
        sink.write(records)

    batches = ResultBatches(slow_write, flush_sec=0.0, flush_records=256)
    try:
        batches.add(finished("t0", "t1"), [])
        assert batches.flush(force=False) == [], "handed to the thread, not on disk yet"
        assert started.wait(30)
        batches.add(finished("t2"), [])
        assert batches.flush(force=False) == [], "one batch at a time"
        assert written_tasks(out) == [] and batches.pending

        release.set()
        done = batches.flush(force=True)
        assert [[f.item.task_id for f, _ in batch] for batch, _ in done] == [["t0", "t1"], ["t2"]]
        assert written_tasks(out) == ["t0", "t1", "t2"], "forced: everything is on disk"
        assert not batches.pending
    finally:
        release.set()
        batches.close()


def test_a_failed_write_is_raised_and_nothing_is_written_after_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink = ResultSink(out, RUN)
    (out / "episodes").mkdir(parents=True)
    (out / "episodes" / f"run_id={RUN}").write_text("a file where the partition goes")
    batches = ResultBatches(sink.write, flush_sec=0.0, flush_records=256)
    try:
        batches.add(finished("t0"), [])
        with pytest.raises(ResultsError, match=f"run_id={RUN}"):
            batches.flush(force=True)
        assert batches.failed
    finally:
        batches.close()
