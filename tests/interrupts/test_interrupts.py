"""Ctrl-C and SIGTERM stop a run cleanly, and ``--resume latest`` alone finishes it.

Through the real CLI on a real local Ray instance: the signal goes to the
driver's whole process group, as a terminal sends Ctrl-C to its foreground job
(Ray's own processes included).
"""

from __future__ import annotations

import re
import shlex
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from crabray.results import read_episodes, read_steps
from tests.conftest import ROOT, raw_episode_rows, write_sleepy_suite
from tests.interrupts.conftest import Driver, crabray_in, finished_rows, resume_command

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TASKS = 6


def _no_duplicates(out: Path) -> None:
    """One final row per episode, every task finished, and no step written twice."""
    rows = finished_rows(out)
    keys = Counter((r["agent"], r["task_id"], r["epoch"]) for r in rows)
    assert len(keys) == TASKS and set(keys.values()) == {1}, keys
    episodes = read_episodes(out)
    assert len(episodes) == TASKS and episodes.success.all()
    steps = read_steps(out)
    per_call = Counter(zip(steps.episode_id, steps.step, steps.call_index, strict=True))
    assert set(per_call.values()) == {1}, "a step was written twice"
    assert set(steps.episode_id) == set(episodes.episode_id)


def test_ctrl_c_then_resume_latest_alone_finishes_the_run(tmp_path: Path) -> None:
    suite = write_sleepy_suite(tmp_path / "slow.py", tasks=TASKS, sleep=4.0)
    out = tmp_path / "results"  # the default results root of a run started in tmp_path
    driver = Driver(tmp_path, str(suite), "--agent", "oracle")
    driver.wait_for_rows(out, 1)
    driver.signal_group(signal.SIGINT)
    code, stdout, stderr = driver.finish()

    assert code == 130, driver.output()
    assert "Traceback" not in stderr, stderr
    (run_id,) = [p.stem for p in (out / "runs").glob("*.json")]
    finished = len(finished_rows(out))
    assert 1 <= finished < TASKS
    assert f"interrupted (SIGINT): {finished} of {TASKS} episodes are finished and saved" in stdout
    command = shlex.split(resume_command(stdout))
    assert command[1:] == ["run", "--resume", run_id], "the default root needs no --out"
    cancelled = [
        r
        for r in raw_episode_rows(out, ["task_id", "termination_reason", "error"])
        if r["termination_reason"] == "cancelled"
    ]
    assert cancelled, "the episodes in flight were saved as they stood"
    assert all("interrupted" in r["error"] for r in cancelled)

    listed = crabray_in(tmp_path, "runs", "list")
    assert listed.returncode == 0, listed.stderr
    assert f"{finished}/{TASKS}" in listed.stdout and "interrupted" in listed.stdout

    resumed = crabray_in(tmp_path, "run", "--resume", "latest")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"{finished} episodes were already finished" in resumed.stdout
    _no_duplicates(out)
    listed = crabray_in(tmp_path, "runs", "list")
    assert f"{TASKS}/{TASKS}" in listed.stdout and "finished" in listed.stdout


@pytest.mark.parametrize("delay_sec", [0.0, 0.1])
def test_ctrl_c_once_every_episode_is_saved_says_the_run_finished(
    tmp_path: Path, delay_sec: float
) -> None:
    """Ctrl-C as the last episode finishes (issue 39: it said "before any episode ran",
    exited without the leaderboard while `runs list` said finished): the run is said to
    have finished, its leaderboard is printed, and it is recorded as finished.

    Right after the last progress line the signal lands while the run winds up (the
    scheduler's end, the suite's services stopped); 0.1 s later, while Ray shuts down.
    """
    demo = str(ROOT / "tasks" / "demo")
    driver = Driver(tmp_path, demo, "-a", "oracle", "-a", "noop", "--limit", "2")
    driver.wait_for_progress("episodes 4/4, 2 ok")
    time.sleep(delay_sec)
    driver.signal_group(signal.SIGINT)
    code, stdout, stderr = driver.finish()

    assert code == 130, driver.output()
    assert "Traceback" not in stderr, stderr
    assert "before any episode ran" not in stdout, stdout
    assert "resume with" not in stdout, "nothing is left to resume"
    assert "the run had finished: all 4 episodes are saved" in stdout, stdout
    board = stdout[stdout.index("leaderboard") :]
    assert re.search(r"oracle\s+2\s+2\s+1\.000", board), stdout
    assert re.search(r"noop\s+2\s+0\s+0\.000", board), stdout
    listed = crabray_in(tmp_path, "runs", "list")
    assert "4/4" in listed.stdout and "finished" in listed.stdout, listed.stdout


def test_sigterm_stops_with_143_and_a_second_writer_is_refused(tmp_path: Path) -> None:
    suite = write_sleepy_suite(tmp_path / "slow.py", tasks=TASKS, sleep=4.0)
    out = tmp_path / "elsewhere"
    driver = Driver(tmp_path, str(suite), "--agent", "oracle", "--out", str(out))
    driver.wait_for_rows(out, 1)
    driver.signal_group(signal.SIGTERM)
    code, stdout, stderr = driver.finish()

    assert code == 143, driver.output()
    assert "Traceback" not in stderr and "SIGTERM" not in stderr, stderr
    assert "interrupted (SIGTERM)" in stdout
    (run_id,) = [p.stem for p in (out / "runs").glob("*.json")]
    command = shlex.split(resume_command(stdout))
    assert command[1:] == ["run", "--resume", run_id, "--out", str(out)]

    first = Driver(tmp_path, "--resume", "latest", "--out", str(out))
    try:
        first.wait_for_text("episodes to run")  # it holds the run's lock from before this
        second = crabray_in(tmp_path, "run", "--resume", run_id, "--out", str(out))
        listed = crabray_in(tmp_path, "runs", "list", str(out))
    finally:
        code, stdout, stderr = first.finish()
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"run {run_id} is being written by another crabray process" in second.stderr
    assert "Traceback" not in second.stderr
    assert "running" in listed.stdout, "its writer holds the lock: the run is running"
    assert code == 0, first.output()
    _no_duplicates(out)


def test_options_given_with_resume_must_match_the_run(tmp_path: Path) -> None:
    suite = write_sleepy_suite(tmp_path / "quick.py", tasks=1, sleep=0.1)
    done = crabray_in(tmp_path, "run", str(suite), "-a", "noop", "--max-steps", "3")
    assert done.returncode == 0, done.stderr
    refused = crabray_in(tmp_path, "run", "--resume", "latest", "--max-steps", "5")
    assert refused.returncode == 2
    assert "was started with max_steps=3, not 5; pass the same --max-steps" in refused.stderr
    again = crabray_in(tmp_path, "run", "--resume", "latest", "--concurrency", "1")
    assert again.returncode == 0, again.stderr
    assert "1 episode was already finished" in again.stdout
    empty = crabray_in(tmp_path / "results", "run", "--resume", "latest")
    assert empty.returncode == 2
    assert "no run to resume" in empty.stderr


def test_a_manifest_from_before_says_which_option_to_pass(tmp_path: Path) -> None:
    """A manifest written before a field was recorded still resumes, given that option."""
    import json

    suite = write_sleepy_suite(tmp_path / "quick.py", tasks=1, sleep=0.1)
    done = crabray_in(tmp_path, "run", str(suite), "-a", "noop", "--max-steps", "3")
    assert done.returncode == 0, done.stderr
    (path,) = (tmp_path / "results" / "runs").glob("*.json")
    manifest = json.loads(path.read_text())
    for field in ("agent_config", "planned", "state"):
        del manifest[field]
    del manifest["options"]["max_steps"]
    path.write_text(json.dumps(manifest))

    refused = crabray_in(tmp_path, "run", "--resume", "latest")
    assert refused.returncode == 2
    assert "does not record max_steps; pass --max-steps" in refused.stderr
    resumed = crabray_in(tmp_path, "run", "--resume", "latest", "--max-steps", "3")
    assert resumed.returncode == 0, resumed.stderr
    recorded = json.loads(path.read_text())
    assert recorded["options"]["max_steps"] == 3, "the resume recorded what it was given"
    again = crabray_in(tmp_path, "run", "--resume", "latest")
    assert again.returncode == 0, again.stderr
    listed = crabray_in(tmp_path, "runs", "list")
    assert listed.returncode == 0, listed.stderr
    assert "1/1" in listed.stdout and "finished" in listed.stdout
