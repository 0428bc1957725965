"""Outages outside the sandbox are the infrastructure's: a model server that is down, and a
worker killed from outside. Neither is scored against the agent."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import ROOT, crabray, raw_episode_rows

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TASK = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, path_exists, run_command, write_file

    ENV = EnvironmentConfig(
        name="box", action_space=[*FILE_ACTIONS, *SHELL_ACTIONS], backend_settings=SETTINGS
    )
    one = BenchmarkConfig(
        name="one",
        environments=[ENV],
        tasks=[
            Task(
                id="write",
                description="write done.txt",
                evaluator=path_exists(path="done.txt"),
                solution=[
                    run_command(command="touch started; sleep 4"),
                    write_file(path="done.txt", content="x"),
                ],
            )
        ],
    )
    """
)


@contextlib.contextmanager
def _server_that_goes_down() -> Iterator[int]:
    """A model server that answers one request (the run's preflight asking whether it is
    there) and then stops: it went down once the run had started. Yields its port."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)

    def answer_once_then_stop() -> None:
        server.handle_request()  # BaseHTTPRequestHandler answers any GET with 501
        server.server_close()

    thread = threading.Thread(target=answer_once_then_stop, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.server_close()


def test_a_model_server_that_is_down_is_infrastructure_not_a_zero(
    tmp_path: Path, bwrap: str
) -> None:
    """A server down before the run starts stops it in the preflight
    (``tests/preflight``); one that goes down during the run is the infrastructure's."""
    suite = tmp_path / "one.py"
    suite.write_text(TASK.replace("SETTINGS", "{}"))
    agents = tmp_path / "agents.toml"
    out = tmp_path / "out"
    with _server_that_goes_down() as port:
        agents.write_text(
            textwrap.dedent(
                f"""
                [[agents]]
                name = "local-llm"
                kind = "openai"
                model = "mock"
                base_url = "http://127.0.0.1:{port}/v1"
                retries = 1
                """
            )
        )
        done = crabray(
            "run", str(suite), "--agent-config", str(agents), "-a", "local-llm", "--out", str(out)
        )
    assert done.returncode == 1, done.stdout + done.stderr
    (row,) = read_episodes(out).to_dict("records")
    assert row["termination_reason"] == "agent_error"
    assert row["error_type"] == "ModelUnreachableError"
    assert row["attribution"] == "infrastructure"
    assert row["attempt"] == 0, "the model client retried it; the episode is not run again"
    assert "1 infrastructure error:" in done.stdout
    # The command to resume it, as it is typed (issue 39: it held a literal "...").
    resume = "resuming the run tries its infrastructure errors again: crabray run --resume "
    assert f"{resume}{row['run_id']} --out {out}" in done.stdout, done.stdout
    assert " ... " not in done.stdout
    assert "ConnectError" in done.stdout
    board = crabray("leaderboard", str(out), "--format", "json", check=True)
    (entry,) = json.loads(board.stdout)
    assert (entry["episodes"], entry["infra_errors"]) == (0, 1), "an outage is not a 0.000"


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc: no tool needed)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _episode_worker(driver: int) -> int | None:
    """The Ray worker of ``driver``'s run that holds a sandbox (a ``bwrap`` below it)."""
    for pid in _descendants(driver):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if not title.startswith(b"ray::"):
            continue
        for below in _descendants(pid):
            try:
                if b"bwrap" in Path(f"/proc/{below}/cmdline").read_bytes():
                    return pid
            except OSError:
                continue
    return None


def test_a_worker_killed_from_outside_is_infrastructure_and_retried(
    tmp_path: Path, bwrap: str
) -> None:
    sandboxes = tmp_path / "sandboxes"
    suite = tmp_path / "one.py"
    suite.write_text(TASK.replace("SETTINGS", repr({"root_dir": str(sandboxes)})))
    out = tmp_path / "out"
    driver = subprocess.Popen(
        [sys.executable, "-m", "crabray", "run", str(suite), "-a", "oracle", "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not list(sandboxes.glob("**/started")):
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "the episode never started its command"
            time.sleep(0.1)
        worker = _episode_worker(driver.pid)
        assert worker is not None, "no Ray worker holding a sandbox below the run"
        os.kill(worker, signal.SIGKILL)
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, stdout + stderr
    (row,) = read_episodes(out).to_dict("records")
    assert row["attempt"] == 1, "retried after the kill"
    assert row["success"]
    assert row["attribution"] == "agent"
    rows = raw_episode_rows(out, ["attempt", "termination_reason", "error"])
    killed = [r for r in rows if r["attempt"] == 0]
    assert killed[0]["termination_reason"] == "env_error"
    assert "killed from outside" in killed[0]["error"]
    assert "1 infrastructure failure, 1 retried" in stdout
    # The killed worker's sandbox (its disk, its cgroup) does not outlive the run.
    assert "left by a worker of this run that was killed from outside" in stderr
    assert [path.name for path in sandboxes.iterdir()] == []
