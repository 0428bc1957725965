"""``crabray run`` end to end on a real local Ray instance, and resuming a killed run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from crabray.results import read_episodes, read_steps
from tests.conftest import ROOT, abandoned_local_sandbox, crabray, write_sleepy_suite
from tests.conftest import raw_episode_rows as raw_rows

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def raw_episode_rows(out: Path) -> list[dict]:
    """Every episode row on disk, duplicates included (no deduplication)."""
    return raw_rows(out, ["task_id", "agent", "epoch", "attempt", "episode_id"])


def test_demo_suite_oracle_and_noop(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = crabray("run", "tasks/demo", "--agent", "oracle", "--agent", "noop", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "run id:" in done.stdout
    episodes = read_episodes(out)
    assert len(episodes) == 22
    by_agent = episodes.groupby("agent")["success"].sum().to_dict()
    assert by_agent == {"oracle": 11, "noop": 0}
    oracle = episodes[episodes.agent == "oracle"]
    assert set(oracle.termination_reason) == {"success"}
    assert (oracle.completeness == 1.0).all()
    noop = episodes[episodes.agent == "noop"]
    assert set(noop.termination_reason) == {"agent_complete"}
    steps = read_steps(out)
    assert set(steps.episode_id) == set(episodes.episode_id)
    assert len(steps[steps.agent == "oracle"]) == int(oracle.steps.sum())

    board = crabray("leaderboard", str(out), "--format", "json", check=True)
    rows = {row["agent"]: row for row in json.loads(board.stdout)}
    assert rows["oracle"]["success_rate"] == 1.0
    assert rows["noop"]["success_rate"] == 0.0
    assert rows["oracle"]["episodes"] == 11


def test_killed_run_resumes_without_rerun_or_duplicates(tmp_path: Path) -> None:
    suite = tmp_path / "slow.py"
    write_sleepy_suite(suite, tasks=10, sleep=0.7)
    out = tmp_path / "out"
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crabray",
            "run",
            str(suite),
            "--agent",
            "oracle",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(raw_episode_rows(out)) < 3:
            assert driver.poll() is None, "the run ended before it could be killed"
            time.sleep(0.1)
        # The driver and the local Ray instance it started die together, mid-run.
        os.killpg(driver.pid, signal.SIGKILL)
    finally:
        driver.kill()
        driver.wait()
    before = raw_episode_rows(out)
    assert 3 <= len(before) < 10, f"expected a partial run, found {len(before)} rows"
    (run_id,) = [p.stem for p in (out / "runs").glob("*.json")]

    resumed = crabray("run", str(suite), "--agent", "oracle", "--out", str(out), "--resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before)} episodes were already finished" in resumed.stdout

    after = raw_episode_rows(out)
    keys = [(r["agent"], r["task_id"], r["epoch"]) for r in after]
    assert len(keys) == len(set(keys)) == 10, "every task has exactly one row"
    assert {r["episode_id"] for r in before} <= {r["episode_id"] for r in after}, (
        "episodes finished before the kill were not run again"
    )
    episodes = read_episodes(out, run_id)
    assert episodes.success.all()

    again = crabray("run", str(suite), "--agent", "oracle", "--out", str(out), "--resume", run_id)
    assert again.returncode == 0, again.stderr
    assert "10 episodes were already finished" in again.stdout
    assert len(raw_episode_rows(out)) == 10


def test_resume_with_another_suite_is_refused(tmp_path: Path) -> None:
    suite = tmp_path / "slow.py"
    write_sleepy_suite(suite, tasks=1, sleep=0.7)
    out = tmp_path / "out"
    first = crabray("run", str(suite), "--agent", "noop", "--out", str(out), check=True)
    run_id = next((out / "runs").glob("*.json")).stem
    assert run_id in first.stdout
    wrong = crabray("run", "tasks/demo", "--agent", "noop", "--out", str(out), "--resume", run_id)
    assert wrong.returncode == 2
    assert f"run {run_id} ran suite" in wrong.stderr
    epochs = crabray(
        "run", str(suite), "--agent", "noop", "--out", str(out), "--resume", run_id, "--epochs", "2"
    )
    assert epochs.returncode == 2
    assert "started with epochs=1, not 2; pass the same --epochs" in epochs.stderr
    unknown = crabray("run", str(suite), "--agent", "noop", "--out", str(out), "--resume", "nope")
    assert unknown.returncode == 2
    assert "no run 'nope'" in unknown.stderr


def test_run_on_a_local_instance_removes_sandboxes_abandoned_by_earlier_runs(
    tmp_path: Path,
) -> None:
    """The driver of a local instance cleans up itself; a dead owner's sandbox goes."""
    root = tmp_path / "sandboxes"
    settings = {"root_dir": str(root), "isolation": "none"}
    abandoned = abandoned_local_sandbox(settings)
    suite = tmp_path / "suite.py"
    suite.write_text(
        "from crabray import BenchmarkConfig, EnvironmentConfig, Task\n"
        "from crabray.actions import SHELL_ACTIONS, path_exists, run_command\n"
        "ENV = EnvironmentConfig(name='box', action_space=SHELL_ACTIONS, "
        f"backend_settings={settings})\n"
        "bench = BenchmarkConfig(name='b', environments=[ENV], tasks=[Task(id='t', "
        "description='touch', evaluator=path_exists(path='x'), "
        "solution=[run_command(command='touch x')])])\n"
    )
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert not abandoned.exists(), "the abandoned sandbox should have been removed"
    # A plain sentence saying what went and why: no log-line date, no logger path.
    said = "".join(done.stderr.split())  # the terminal may fold the long line anywhere
    assert (
        "".join(
            "warning: removed 1 sandbox left by an earlier run that ended without cleaning up: "
            f"sandbox folder {abandoned}".split()
        )
        in said
    )
    assert "WARNING" not in done.stderr
    assert read_episodes(tmp_path / "out")["success"].tolist() == [True]


def ray_processes(temp_dir: Path) -> list[str]:
    """The command lines of the processes of a Ray instance started under ``temp_dir``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and str(temp_dir) in argv:
            found.append(argv)
    return found


def gone(temp_dir: Path, within_sec: float = 30) -> list[str]:
    """What is still running of the instance after ``within_sec`` (processes killed but
    not yet reaped on a loaded machine get that long)."""
    deadline = time.monotonic() + within_sec
    while (left := ray_processes(temp_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_ctrl_c_mid_run_then_resume_leave_no_ray_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither a Ctrl-C nor a normal end leaves a process of the run's local Ray instance
    running (each run gets its own RAY_TMPDIR, so its processes can be told apart)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="crt", dir="/tmp"))  # Ray's socket paths are short
    monkeypatch.setenv("RAY_TMPDIR", str(temp_dir))
    try:
        suite = write_sleepy_suite(tmp_path / "slow.py", tasks=6, sleep=1.0)
        out = tmp_path / "out"
        driver = subprocess.Popen(
            [sys.executable, "-m", "crabray", "run", str(suite), "-a", "oracle", "-o", str(out)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not raw_episode_rows(out):
            assert driver.poll() is None, "the run ended before it could be interrupted"
            time.sleep(0.1)
        assert ray_processes(temp_dir), "the run's Ray instance is under RAY_TMPDIR"
        driver.send_signal(signal.SIGINT)
        _, stderr = driver.communicate(timeout=120)
        assert driver.returncode != 0, "interrupted mid-run"
        assert "Traceback" not in stderr, stderr
        assert gone(temp_dir) == []
        # Episodes stopped mid-way are on disk too, as `cancelled`: they run again.
        rows = raw_rows(out, ["task_id", "termination_reason"])
        finished = sum(row["termination_reason"] != "cancelled" for row in rows)
        assert 1 <= finished < 6
        (run_id,) = [p.stem for p in (out / "runs").glob("*.json")]
        resumed = crabray("run", str(suite), "-a", "oracle", "-o", str(out), "--resume", run_id)
        assert resumed.returncode == 0, resumed.stderr
        assert f"{finished} episodes were already finished" in resumed.stdout
        assert "leaderboard" in resumed.stdout
        assert gone(temp_dir) == []
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
