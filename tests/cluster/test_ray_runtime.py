"""Starting and stopping the local Ray instance of a run (crabray.cluster.runtime.ray_runtime)."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest
import ray

from crabray.cluster.runtime.ray_runtime import (
    TASK_EVENTS_VAR,
    connect,
    disconnect,
    is_local_instance,
)
from tests.conftest import crabray, raw_episode_rows


def children() -> dict[int, str]:
    """This process's live children: pid -> command line."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, NotADirectoryError):
            continue
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(parent) == os.getpid() and state != "Z":
            found[int(proc.name)] = cmdline
    return found


def test_disconnect_stops_every_process_of_the_local_instance() -> None:
    """The autoscaler monitor, killed first so the shutdown does not wait on it, is one of them.

    If a Ray release renames the monitor's script, the first assertion says so:
    the shutdown would then wait a second for it again. Children this test process
    already had (the session's sshd, Xvfb, chat server...) are not the instance's.
    """
    before = children()
    connect(num_cpus=1, hosts={"local": 1})
    try:
        assert is_local_instance()
        started = {pid: cmd for pid, cmd in children().items() if pid not in before}
        scripts = list(started.values())
        assert any("autoscaler/_private/monitor.py" in script for script in scripts), scripts
        assert any("gcs_server" in script for script in scripts), scripts
    finally:
        disconnect()
    assert not ray.is_initialized() and not is_local_instance()
    deadline = time.monotonic() + 10
    while (left := set(started) & set(children())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, [started[pid] for pid in left]


# Its evaluator runs in the episode's actor, beside the other Ray workers of the instance
# (the raylet's children): it passes when none of them waits idle.
NO_IDLE_WORKER_SUITE = textwrap.dedent(
    """
    import os
    from pathlib import Path
    from typing import Any

    from crabray import BenchmarkConfig, EnvironmentConfig, Task, evaluator
    from crabray.actions import SHELL_ACTIONS, run_command

    @evaluator
    def no_idle_ray_worker(env: Any) -> bool:
        \"\"\"No worker of this Ray instance but this actor's is running.\"\"\"
        idle = []
        for proc in Path("/proc").iterdir():
            try:
                stat = (proc / "stat").read_text()
                argv = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            if parent == os.getppid() and proc.name != str(os.getpid()):
                if argv.startswith(b"ray::IDLE") or b"default_worker.py" in argv:
                    idle.append(argv)
        return not idle

    bench = BenchmarkConfig(
        name="one",
        environments=[EnvironmentConfig(name="box", action_space=SHELL_ACTIONS)],
        tasks=[
            Task(
                id="only",
                description="nothing to do",
                evaluator=no_idle_ray_worker(),
                solution=[run_command(command="true")],
            )
        ],
    )
    """
)


@pytest.mark.ray
@pytest.mark.slow
def test_a_one_task_run_starts_no_ray_worker_it_does_not_use(tmp_path: Path) -> None:
    """Ray starts a worker ahead for every CPU the instance advertises; the run's actors take
    no CPU, so the run advertises its episodes in flight at most, not the machine's cores."""
    suite = tmp_path / "one.py"
    suite.write_text(NO_IDLE_WORKER_SUITE)
    out = tmp_path / "out"
    crabray("run", str(suite), "--agent", "oracle", "--out", str(out), check=True)
    rows = raw_episode_rows(out, ["task_id", "success", "error"])
    assert rows == [{"task_id": "only", "success": True, "error": None}], rows


@ray.remote(num_cpus=0)
def _task_events_setting() -> str | None:
    return os.environ.get(TASK_EVENTS_VAR)


@pytest.mark.parametrize(("given", "seen"), [(None, "0"), ("1000", "1000")])
def test_task_events_are_off_in_the_instance_unless_the_user_set_them(
    monkeypatch: pytest.MonkeyPatch, given: str | None, seen: str
) -> None:
    """Ray's task events (its dashboard's task views) cost CPU at every actor call and a
    quarter second at each disconnect; a local instance runs without them, and a user
    who wants them (``RAY_task_events_report_interval_ms``) keeps them."""
    if given is None:
        monkeypatch.delenv(TASK_EVENTS_VAR, raising=False)
    else:
        monkeypatch.setenv(TASK_EVENTS_VAR, given)
    connect(num_cpus=1, hosts={"local": 1})
    try:
        assert ray.get(_task_events_setting.remote(), timeout=120) == seen
    finally:
        disconnect()
