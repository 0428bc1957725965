"""A batch the sink cannot write is refused with the file it could not write, and nothing lands."""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray.core.errors import ResultsError
from crabray.core.result import EpisodeRecord, EpisodeResult, TerminationReason
from crabray.results import ResultSink


def test_a_partition_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    out = tmp_path / "out"
    partition = out / "episodes" / "run_id=r"
    partition.parent.mkdir(parents=True)
    partition.write_text("a file where the run's partition goes")
    result = EpisodeResult(
        run_id="r", suite="s", task_id="t", agent="a", termination_reason=TerminationReason.SUCCESS
    )
    with pytest.raises(ResultsError, match=r"could not write .*run_id=r/part-.*FileExistsError"):
        ResultSink(out, "r").write([EpisodeRecord(result=result)])
    assert partition.read_text() == "a file where the run's partition goes"
