"""An interrupt that escapes the run's own handler (as it released its lock or made its
summary) is judged from disk: a run whose every episode is saved is finished, with
nothing to resume (the race CI met when Ctrl-C landed right after the last episode)."""

from __future__ import annotations

from pathlib import Path

from crabray.results import ResultSink, RunManifest, RunState, read_manifest, write_manifest
from crabray.run.runner import interrupted_after
from tests.results.conftest import build_record

RUN = "20261205-190838-fd675a"


def _running_run(out: Path, planned: int, saved: int) -> None:
    write_manifest(
        out,
        RunManifest(
            run_id=RUN,
            suite="tasks/demo",
            suite_name="demo",
            agents=["agent-1"],
            planned=planned,
            state=RunState.RUNNING,
            crabray_version="0.1.0",
        ),
    )
    ResultSink(out, RUN).write([build_record(f"t{i}", run_id=RUN) for i in range(saved)])


def test_every_episode_saved_is_a_finished_run(tmp_path: Path) -> None:
    _running_run(tmp_path, planned=4, saved=4)
    interrupted = interrupted_after(tmp_path, RUN, 4)
    assert interrupted.complete and (interrupted.finished, interrupted.planned) == (4, 4)
    assert read_manifest(tmp_path, RUN).state == RunState.FINISHED


def test_episodes_left_leave_the_run_interrupted(tmp_path: Path) -> None:
    _running_run(tmp_path, planned=4, saved=3)
    interrupted = interrupted_after(tmp_path, RUN, 4)
    assert not interrupted.complete and interrupted.finished == 3
    assert read_manifest(tmp_path, RUN).state == RunState.INTERRUPTED
