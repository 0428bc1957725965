"""Reading a dataset from fsspec URLs, and deduplication when reading a column subset."""

from __future__ import annotations

import fsspec
import pandas as pd
import pytest

from crabray.core.errors import ResultsError
from crabray.core.result import TerminationReason
from crabray.results import (
    LEADERBOARD_INPUT_COLUMNS,
    ResultSink,
    leaderboard,
    read_episodes,
    read_steps,
)

RUN = "fs"


@pytest.fixture
def local(tmp_path, make_record):
    out = tmp_path / "out"
    sink = ResultSink(out, RUN)
    sink.write([make_record("t1", run_id=RUN, reason=TerminationReason.ENV_ERROR)])
    sink.write([make_record("t1", run_id=RUN, attempt=1, n_steps=3)])
    sink.write([make_record("t2", run_id=RUN, reason=TerminationReason.AGENT_FAIL)])
    return out


@pytest.fixture
def memory_url(local, request):
    fs = fsspec.filesystem("memory")
    root = f"/crabray-test-{request.node.name}"
    fs.put(str(local), root, recursive=True)
    # A leftover temporary file, which readers must ignore on any file system.
    fs.pipe(f"{root}/episodes/run_id={RUN}/.tmp-part-0.parquet", b"not parquet")
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_memory_url_reads_like_the_local_directory(local, memory_url):
    _same(read_episodes(memory_url), read_episodes(local))
    _same(read_episodes(memory_url, RUN), read_episodes(local, RUN))
    _same(read_steps(memory_url), read_steps(local))
    assert len(read_episodes(memory_url)) == 2
    assert len(read_steps(memory_url)) == 3 + 2  # the retried attempt's steps only


def test_leaderboard_from_a_memory_url(memory_url):
    episodes = read_episodes(memory_url, columns=list(LEADERBOARD_INPUT_COLUMNS))
    row = leaderboard(episodes).iloc[0]
    assert (row["episodes"], row["successes"], row["infra_errors"]) == (2, 1, 0)


def test_file_url(local):
    _same(read_episodes(local.as_uri()), read_episodes(local))
    assert len(read_steps(local.as_uri(), RUN)) == 5


def test_absent_url_reads_as_empty(memory_url):
    assert read_episodes(memory_url + "-nothing-here").empty


def test_unknown_scheme_is_named():
    with pytest.raises(ResultsError, match="nosuchscheme://x"):
        read_episodes("nosuchscheme://x")


def test_sink_writes_locally_only(tmp_path):
    with pytest.raises(ResultsError, match="writing needs a local directory"):
        ResultSink("memory://somewhere", RUN)
    sink = ResultSink((tmp_path / "via-url").as_uri(), RUN)
    assert sink.out_dir == tmp_path / "via-url"


def test_column_subset_still_deduplicates(local):
    """Only success and score asked for: the key and rank columns are still read."""
    frame = read_episodes(local, RUN, ["success", "score"])
    assert list(frame.columns) == ["success", "score"]
    assert sorted(frame["success"]) == [False, True]  # t1's retry, not its env_error
    assert read_episodes(local, RUN, ["attempt"])["attempt"].tolist() == [1, 0]
