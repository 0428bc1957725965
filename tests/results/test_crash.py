"""A writer killed at random moments leaves a readable dataset of whole batches."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from crabray.results import read_episodes, read_steps

RUN = "crash-run"
BATCH = 16
STEPS_PER_EPISODE = 3
KILLS = 6

# Writes batch b = 0, 1, ... forever; each process uses its own attempt number,
# so later processes supersede the rows of earlier ones for the same keys.
WRITER = """
import sys
from crabray.core.result import EpisodeRecord, EpisodeResult, StepRecord
from crabray.results import ResultSink

out_dir, run_id, attempt, batch_size, n_steps = sys.argv[1:6]
attempt, batch_size, n_steps = int(attempt), int(batch_size), int(n_steps)
sink = ResultSink(out_dir, run_id)
for batch in range(1_000_000):
    records = []
    for index in range(batch_size):
        result = EpisodeResult(
            run_id=run_id, suite="s", task_id=f"b{batch:06d}-{index:03d}", agent="a",
            attempt=attempt, termination_reason="success", error="x" * 2000,
        )
        steps = [
            StepRecord(
                episode_id=result.episode_id, run_id=run_id, task_id=result.task_id,
                agent="a", attempt=attempt, step=step, env="root", action="shell",
                arguments_json="{}", result="y" * 2000,
            )
            for step in range(n_steps)
        ]
        records.append(EpisodeRecord(result=result, steps=steps))
    sink.write(records)
"""


def _committed(out: Path) -> int:
    return len(list((out / "episodes" / f"run_id={RUN}").glob("part-*.parquet")))


def _run_and_kill(out: Path, attempt: int, rng: random.Random) -> None:
    before = _committed(out)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(out),
            RUN,
            str(attempt),
            str(BATCH),
            str(STEPS_PER_EPISODE),
        ],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while _committed(out) <= before:
            if process.poll() is not None:
                pytest.fail(f"writer exited early: {process.stderr.read().decode()}")
            if time.monotonic() > deadline:
                pytest.fail("writer committed nothing within 60 s")
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.4))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_sigkilled_writer_leaves_whole_batches(tmp_path):
    rng = random.Random(os.getpid())
    for attempt in range(KILLS):
        _run_and_kill(tmp_path, attempt, rng)

    # On disk, without dedup: every (attempt, batch) is complete or absent.
    raw = [
        pq.read_table(path, columns=["task_id", "attempt"]).to_pylist()
        for path in sorted((tmp_path / "episodes" / f"run_id={RUN}").glob("part-*.parquet"))
    ]
    per_batch: dict[tuple[int, str], int] = {}
    for rows in raw:
        for row in rows:
            key = (row["attempt"], row["task_id"].split("-")[0])
            per_batch[key] = per_batch.get(key, 0) + 1
    assert per_batch
    assert set(per_batch.values()) == {BATCH}

    # Read back: one row per key, each batch whole and from its latest attempt.
    episodes = read_episodes(tmp_path, RUN)
    assert not episodes.duplicated(["run_id", "agent", "task_id", "epoch"]).any()
    episodes["batch"] = episodes["task_id"].str.split("-").str[0]
    latest = {}
    for attempt, batch in per_batch:
        latest[batch] = max(latest.get(batch, -1), attempt)
    assert episodes.groupby("batch").size().to_dict() == dict.fromkeys(latest, BATCH)
    assert episodes.groupby("batch")["attempt"].agg(set).to_dict() == {
        batch: {attempt} for batch, attempt in latest.items()
    }

    # Every kept episode has all of its steps, and only its own.
    steps = read_steps(tmp_path, RUN)
    counts = steps.groupby("episode_id").size()
    assert set(counts.index) == set(episodes["episode_id"])
    assert set(counts) == {STEPS_PER_EPISODE}
