"""A results root read the obvious way, by every common Parquet reader, not only crabray's.

``OUT/episodes`` and ``OUT/steps`` are hive-partitioned by run (``run_id=<RUN>/``):
pandas, pyarrow, polars and DuckDB read such a folder as it is, the run coming
from the directory name. The roots here are made by a real run.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from crabray.results import list_runs, read_episodes, read_steps
from tests.backends.conftest import require_kind
from tests.conftest import crabray, raw_episode_rows


def _optional(module: str) -> Any:
    """``module``, or skip (fail under ``CI=true``, whose dev install has it) when missing."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        hint = f"{module} is not installed: .venv/bin/pip install -e '.[dev]' installs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(hint)
        pytest.skip(hint)


def _pandas(folder: Path) -> dict[str, list[Any]]:
    frame = pd.read_parquet(folder)
    return {"run_id": [str(run) for run in frame["run_id"]], "episode_id": list(frame.episode_id)}


def _pyarrow_parquet(folder: Path) -> dict[str, list[Any]]:
    return pq.read_table(folder).select(["run_id", "episode_id"]).to_pydict()


def _pyarrow_dataset(folder: Path) -> dict[str, list[Any]]:
    table = ds.dataset(folder, partitioning="hive").to_table(columns=["run_id", "episode_id"])
    return table.to_pydict()


def _polars(folder: Path) -> dict[str, list[Any]]:
    polars = _optional("polars")
    frame = polars.read_parquet(folder)
    return {"run_id": frame["run_id"].to_list(), "episode_id": frame["episode_id"].to_list()}


def _duckdb(folder: Path) -> dict[str, list[Any]]:
    duckdb = _optional("duckdb")
    rows = duckdb.sql(
        f"SELECT run_id, episode_id FROM read_parquet('{folder}/*/*.parquet')"
    ).fetchall()
    return {"run_id": [row[0] for row in rows], "episode_id": [row[1] for row in rows]}


READERS: dict[str, Callable[[Path], dict[str, list[Any]]]] = {
    "pandas.read_parquet": _pandas,
    "pyarrow.parquet.read_table": _pyarrow_parquet,
    "pyarrow.dataset hive": _pyarrow_dataset,
    "polars.read_parquet": _polars,
    "duckdb read_parquet": _duckdb,
}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results root of two real runs of the demo suite (two run partitions, compacted)."""
    require_kind("local-bwrap")
    out = tmp_path_factory.mktemp("raw") / "results"
    for agents in (("-a", "oracle", "-a", "noop"), ("-a", "noop")):
        crabray("run", "tasks/demo", *agents, "--limit", "2", "--out", str(out), check=True)
    assert len(list_runs(out)) == 2
    return out


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("table", ["episodes", "steps"])
def test_the_obvious_reads_of_a_results_root_work(two_runs: Path, reader: str, table: str) -> None:
    """``pd.read_parquet("results/episodes")`` and its kind give every row with its run."""
    read = READERS[reader](two_runs / table)
    if table == "episodes":
        rows = raw_episode_rows(two_runs, ["run_id", "episode_id"])
    else:
        rows = read_steps(two_runs, columns=["run_id", "episode_id"]).to_dict("records")
    expected = sorted((row["run_id"], row["episode_id"]) for row in rows)
    assert sorted(zip(read["run_id"], read["episode_id"], strict=True)) == expected
    assert set(read["run_id"]) == set(list_runs(two_runs))


@pytest.mark.ray
@pytest.mark.slow
def test_crabray_reads_what_the_raw_readers_read(two_runs: Path) -> None:
    episodes = read_episodes(two_runs)
    raw = pd.read_parquet(two_runs / "episodes")
    assert len(episodes) == len(raw) == 6  # 2 tasks x (oracle, noop), then 2 tasks x noop
    assert sorted(episodes["episode_id"]) == sorted(raw["episode_id"])
    assert sorted(episodes["run_id"]) == sorted(str(run) for run in raw["run_id"])
