"""Episodes queued on a busy actor behind its running one (crabray.cluster.actors.pipeline).

At concurrency 1 on one pooled sandbox every episode after the first waits in
the actor's queue behind the one before it. An episode that fails there must
cost the episode queued behind it nothing: not an attempt, not a row.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from crabray.cluster.sweep.progress import SweepProgress
from crabray.cluster.sweep.scheduler import Scheduler
from crabray.cluster.sweep.settings import Execution, SchedulerSettings
from crabray.formats import Suite
from crabray.results import ResultSink, read_episodes
from tests.conftest import raw_episode_rows, write_sleepy_suite

pytestmark = [pytest.mark.ray, pytest.mark.slow]

# t2's sandbox loses every process, its pid 1 included, as when the host kills them (a
# command cannot kill pid 1): the sandbox is gone, an infrastructure failure (env_error),
# retried on a new one.
BREAKING_SUITE = textwrap.dedent(
    """
    import os
    import time
    from pathlib import Path
    from typing import Any

    from crabray import BenchmarkConfig, EnvironmentConfig, Task, action
    from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, path_exists, run_command, write_file

    def in_namespace(namespace: str) -> list[int]:
        found = []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and os.readlink(proc / "ns" / "pid") == namespace:
                    found.append(int(proc.name))
            except OSError:
                pass
        return found

    @action
    def lose_every_process(env: Any) -> str:
        \"\"\"Kill every process of the sandbox from the host, and wait until they are gone
        (a kill is delivered later on a busy machine: a command sent at once could still
        enter the dying sandbox and succeed).\"\"\"
        namespace = f"pid:[{env.backend.describe()['pid_namespace']}]"
        deadline = time.monotonic() + 30
        while (left := in_namespace(namespace)) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            time.sleep(0.05)
        return "killed"

    ENV = EnvironmentConfig(
        name="box", action_space=[*SHELL_ACTIONS, *FILE_ACTIONS, lose_every_process]
    )
    bench = BenchmarkConfig(
        name="pipe",
        environments=[ENV],
        tasks=[
            Task(
                id=f"t{i}",
                description="write done.txt",
                evaluator=path_exists(path="done.txt"),
                solution=[
                    lose_every_process() if i == 2 else run_command(command="true"),
                    # A command finds the sandbox gone (a file write alone is the host's).
                    run_command(command="true"),
                    write_file(path="done.txt", content="x"),
                ],
            )
            for i in range(5)
        ],
    )
    """
)


# t0's evaluator passes, then leaves a file where its sandbox's directory was: the
# reset that t1's own call makes first fails (a host failure, not t1's).
RESET_BREAKING_SUITE = textwrap.dedent(
    """
    from pathlib import Path

    from crabray import BenchmarkConfig, EnvironmentConfig, Task, evaluator
    from crabray.actions import SHELL_ACTIONS, path_exists, run_command

    @evaluator(env_name="box")
    def passes_then_breaks_the_host(env) -> bool:
        root = Path(env.backend.describe()["root"])
        root.rename(root.with_name(root.name + ".moved"))
        root.write_text("not a directory")
        return True

    # A plain directory (no disk of its own), which the host can lose.
    ENV = EnvironmentConfig(
        name="box",
        action_space=SHELL_ACTIONS,
        backend_settings={"root_dir": "ROOTS", "disk_mb": None},
    )
    bench = BenchmarkConfig(
        name="pipe",
        environments=[ENV],
        tasks=[
            Task(
                id=f"t{i}",
                description="touch done.txt",
                evaluator=passes_then_breaks_the_host() if i == 0 else path_exists(path="done.txt"),
                solution=[run_command(command="touch done.txt")],
            )
            for i in range(3)
        ],
    )
    """
)


def sweep(
    suite_path: Path, out: Path, max_attempts: int = 3, **knobs: Any
) -> tuple[Scheduler, SweepProgress]:
    """Run every task of the suite once with the oracle at concurrency 1, pooled."""
    from crabray.agents import agent_spec
    from crabray.cluster.actors.inflight import SweepItem
    from crabray.cluster.runtime.ray_runtime import connect, disconnect
    from crabray.formats import load_suite, resolve_suite

    suite: Suite = load_suite(resolve_suite(suite_path))
    execution = Execution(concurrency=1, max_attempts=max_attempts)
    settings = SchedulerSettings(run_id="pipe", execution=execution, **knobs)
    scheduler = Scheduler(suite, settings, ResultSink(out, "pipe").write)
    connect(hosts={"local": 2})
    try:
        progress = scheduler.run(
            SweepItem(task_id=t, agent=agent_spec("oracle")) for t in suite.task_ids
        )
    finally:
        disconnect()
    return scheduler, progress


def test_an_episode_that_breaks_its_sandbox_is_retried_alone(tmp_path: Path) -> None:
    suite = tmp_path / "pipe.py"
    suite.write_text(BREAKING_SUITE)
    out = tmp_path / "out"
    scheduler, _ = sweep(suite, out, max_attempts=2, backoff={"backoff_initial_sec": 0.1})
    assert scheduler.pool.stats.queued >= 3, "episodes were queued behind running ones"
    rows = raw_episode_rows(out, ["task_id", "attempt", "termination_reason"])
    broken = sorted((r["attempt"], r["termination_reason"]) for r in rows if r["task_id"] == "t2")
    # Retried once on a new sandbox (max_attempts 2); what the second kill finds there is
    # incidental (a spare's processes may not have started yet), so only the retry counts.
    assert [attempt for attempt, _ in broken] == [0, 1], "retried on a new sandbox, then final"
    assert broken[0][1] == "env_error"
    others = sorted((r["task_id"], r["attempt"], r["termination_reason"]) for r in rows)
    others = [row for row in others if row[0] != "t2"]
    assert others == [(f"t{i}", 0, "success") for i in (0, 1, 3, 4)], (
        "the episode queued behind the broken one ran later, on a clean sandbox, as its "
        "first attempt: one row each"
    )


def test_an_episode_queued_behind_a_timeout_gets_its_own_time(tmp_path: Path) -> None:
    """The first episode is stopped past its limit and its actor killed; the one queued
    behind it never ran there: it runs on a new actor with its full time limit."""
    suite = write_sleepy_suite(tmp_path / "slow.py", 2, sleep=60, limit=1.0)
    out = tmp_path / "out"
    started = time.monotonic()
    scheduler, progress = sweep(suite, out, timeout_grace_sec=1.0, kill_grace_sec=1.0)
    assert time.monotonic() - started < 60, "stopped long before a 60 s command would end"
    assert (progress.done, progress.timeouts, progress.retries) == (2, 2, 0)
    assert scheduler.pool.stats.queued >= 1
    rows = raw_episode_rows(out, ["task_id", "attempt", "termination_reason"])
    assert sorted((r["task_id"], r["attempt"]) for r in rows) == [("t00", 0), ("t01", 0)]
    episodes = read_episodes(out)
    assert set(episodes.termination_reason) == {"timeout"}
    assert (episodes.finished_at - episodes.started_at).dt.total_seconds().min() >= 1.0


def test_an_episode_whose_own_reset_fails_runs_again_elsewhere(tmp_path: Path) -> None:
    """A local follower resets its sandbox in its own call; when that reset fails the
    episode never ran: its actor is retired and it runs on a new one, same attempt."""
    suite = tmp_path / "pipe.py"
    suite.write_text(RESET_BREAKING_SUITE.replace("ROOTS", str(tmp_path / "roots")))
    out = tmp_path / "out"
    scheduler, progress = sweep(suite, out, max_attempts=2, backoff={"backoff_initial_sec": 0.1})
    assert scheduler.pool.stats.failed_resets == 1, "t1's reset failed"
    assert scheduler.pool.stats.created == 2, "the broken sandbox's actor was replaced"
    assert (progress.done, progress.retries, progress.infra_failures) == (3, 0, 0)
    rows = raw_episode_rows(out, ["task_id", "attempt", "termination_reason"])
    assert sorted((r["task_id"], r["attempt"], r["termination_reason"]) for r in rows) == [
        (f"t{i}", 0, "success") for i in range(3)
    ], "one row each: the failed reset cost t1 neither a row nor an attempt"
