"""An episode whose sandbox kills the worker running it is that episode's result, not a retry."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]

# A hostile command: walk up from itself to the Ray worker running the episode
# (its process title starts with "ray::") and kill it with SIGKILL, as the
# kernel's OOM killer would. Unconfined on purpose: bubblewrap's pid namespace
# hides the worker.
KILL_THE_WORKER = """
import os
p = os.getppid()
while p > 1:
    if open(f"/proc/{p}/cmdline", "rb").read().startswith(b"ray::"):
        os.kill(p, 9)
    p = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
"""

SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import SHELL_ACTIONS, FILE_ACTIONS, path_exists, run_command, write_file

    ENV = EnvironmentConfig(
        name="box",
        action_space=[*SHELL_ACTIONS, *FILE_ACTIONS],
        backend_settings={"isolation": "none"},
    )
    hostile = BenchmarkConfig(
        name="hostile",
        environments=[ENV],
        tasks=[
            Task(
                id="killer",
                description="kill the worker",
                evaluator=path_exists(path="done.txt"),
                solution=[
                    write_file(path="kill.py", content=KILL),
                    run_command(command="python3 kill.py"),
                    write_file(path="done.txt", content="x"),
                ],
            ),
            Task(
                id="fine",
                description="write done.txt",
                evaluator=path_exists(path="done.txt"),
                solution=[write_file(path="done.txt", content="x")],
            ),
        ],
    )
    """
)


def test_a_worker_killed_by_its_episodes_command_is_a_sandbox_error(tmp_path: Path) -> None:
    suite = tmp_path / "hostile.py"
    suite.write_text(SUITE.replace("KILL", repr(KILL_THE_WORKER)))
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out), "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out).set_index("task_id")
    assert episodes.loc["fine", "termination_reason"] == "success"
    assert episodes.loc["killer", "termination_reason"] == "sandbox_error"
    assert episodes.loc["killer", "attempt"] == 0, "a result, never retried"
    assert "died while its node lived" in episodes.loc["killer", "error"]
    assert "infrastructure failure" not in done.stdout
