"""The sink writes episodes' files under the output directory, and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from crabray.core.errors import ResultsError
from crabray.core.result import EpisodeRecord, EpisodeResult, TerminationReason
from crabray.results import ResultSink, read_episodes


def record(artifacts: dict[str, bytes]) -> EpisodeRecord:
    result = EpisodeResult(
        run_id="r", suite="s", task_id="t", agent="a", termination_reason=TerminationReason.SUCCESS
    )
    return EpisodeRecord(result=result, artifacts=artifacts)


def test_artifacts_are_written_before_the_rows(tmp_path: Path) -> None:
    ResultSink(tmp_path, "r").write([record({"artifacts/r/e/step0.png": b"\x89PNG data"})])
    assert (tmp_path / "artifacts/r/e/step0.png").read_bytes() == b"\x89PNG data"
    assert len(read_episodes(tmp_path)) == 1


@pytest.mark.parametrize("path", ["../outside.png", "/tmp/abs.png", "artifacts/../../x.png"])
def test_an_artifact_outside_the_output_directory_is_refused(tmp_path: Path, path: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(ResultsError, match="leaves the output directory"):
        ResultSink(out, "r").write([record({path: b"x"})])
    assert not (tmp_path / "outside.png").exists()
    assert read_episodes(out).empty, "nothing of the refused batch is recorded"
