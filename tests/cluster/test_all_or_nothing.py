"""Episodes that need several environments never hang a sweep (issue 26).

On a cluster with two slots, an episode needing two environments used to take
one actor while an idle pooled environment of another configuration held the
second slot, and waited for it for good. It now gets every environment at once
or waits holding none, and idle environments yield their slots to it. A task
needing more environments than the cluster has slots fails at once, saying why.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from crabray.cluster.sweep.progress import SweepProgress
from crabray.cluster.sweep.scheduler import Scheduler
from crabray.cluster.sweep.settings import Execution, SchedulerSettings
from crabray.formats import Suite
from crabray.results import ResultSink
from tests.cluster.conftest import crabray_head
from tests.conftest import raw_episode_rows

pytestmark = [pytest.mark.ray, pytest.mark.slow]

# Three configurations of the 'local' kind; single-environment tasks on each, tasks
# spanning two of them, and one spanning all three (more than the cluster's 2 slots).
MIXED_SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, path_exists, write_file

    ENVS = [EnvironmentConfig(name=n, action_space=FILE_ACTIONS) for n in ("a", "b", "c")]

    def task(task_id, envs):
        return Task(
            id=task_id,
            description="write done.txt everywhere",
            environments=envs,
            evaluator=path_exists(path="done.txt").on(envs[-1]),
            solution=[write_file(path="done.txt", content="x").on(env) for env in envs],
        )

    bench = BenchmarkConfig(
        name="mixed",
        environments=ENVS,
        default_env="a",
        tasks=[
            task("one-a", ["a"]),
            task("one-b", ["b"]),
            task("one-c", ["c"]),
            task("two-ab", ["a", "b"]),
            task("two-bc", ["b", "c"]),
            task("two-ca", ["c", "a"]),
            task("one-a2", ["a"]),
            task("one-c2", ["c"]),
            task("three-abc", ["a", "b", "c"]),
        ],
    )
    """
)


# One long single-environment task first, then a task needing both slots, then a
# stream of shorter single-environment tasks behind it (longest-expected first).
STREAM_SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import SHELL_ACTIONS, command_succeeds, run_command

    ENVS = [EnvironmentConfig(name=n, action_space=SHELL_ACTIONS) for n in ("a", "b")]

    def task(task_id, envs, limit):
        return Task(
            id=task_id,
            description="wait a little",
            environments=envs,
            time_limit_sec=limit,
            evaluator=command_succeeds(command="true").on(envs[-1]),
            solution=[run_command(command="sleep 2").on(env) for env in envs],
        )

    bench = BenchmarkConfig(
        name="stream",
        environments=ENVS,
        default_env="a",
        tasks=[
            task("first", ["a"], 600),
            task("pair", ["a", "b"], 500),
            *(task(f"single-{i}", ["a"], 300) for i in range(12)),
        ],
    )
    """
)


def sweep(
    suite_path: Path,
    out: Path,
    *,
    pooling: bool,
    agents: tuple[str, ...] = ("oracle", "noop"),
    reserve_after_sec: float = 5.0,
) -> SweepProgress:
    """Run every task once per agent at concurrency 2 on 2 'local' slots."""
    from crabray.agents import agent_spec
    from crabray.cluster.actors.inflight import SweepItem
    from crabray.cluster.runtime.ray_runtime import connect, disconnect
    from crabray.formats import load_suite, resolve_suite

    suite: Suite = load_suite(resolve_suite(suite_path))
    settings = SchedulerSettings(
        run_id="mixed",
        execution=Execution(concurrency=2, pooling=pooling),
        reserve_after_sec=reserve_after_sec,
    )
    scheduler = Scheduler(suite, settings, ResultSink(out, "mixed").write)
    connect(hosts={"local": 2})
    try:
        return scheduler.run(
            SweepItem(task_id=t, agent=agent_spec(a)) for a in agents for t in suite.task_ids
        )
    finally:
        disconnect()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("pooling", [True, False], ids=["pooled", "unpooled"])
def test_multi_environment_episodes_finish_on_a_two_slot_cluster(
    tmp_path: Path, pooling: bool
) -> None:
    suite = tmp_path / "mixed.py"
    suite.write_text(MIXED_SUITE)
    out = tmp_path / "out"
    progress = sweep(suite, out, pooling=pooling)
    assert (progress.done, progress.total) == (18, 18), "every episode reached a final row"
    rows = raw_episode_rows(out, ["task_id", "agent", "termination_reason", "error"])
    outcome = {(r["task_id"], r["agent"]): r["termination_reason"] for r in rows}
    assert len(rows) == 18, "one row each: nothing was retried"
    for task_id in ("one-a", "one-b", "one-c", "two-ab", "two-bc", "two-ca", "one-a2"):
        assert outcome[(task_id, "oracle")] == "success", task_id
    (three,) = [r for r in rows if r["task_id"] == "three-abc" and r["agent"] == "oracle"]
    assert three["termination_reason"] == "env_error", "the cluster's failure, not the agent's"
    assert "needs 3 sandboxes of kind 'local'" in three["error"]
    assert "has 2 slots" in three["error"]


@pytest.mark.timeout(300)
def test_an_episode_needing_both_slots_is_not_starved_by_a_stream_of_single_ones(
    tmp_path: Path,
) -> None:
    """Single-environment episodes behind it used to take each slot as it freed, so the
    two-environment episode waited until the queue ran dry. Once it has waited
    (reserve_after_sec, 0 here) the slots are kept for it: it starts as soon as the
    long episode ahead of it ends, and every episode of the stream starts after it."""
    suite = tmp_path / "stream.py"
    suite.write_text(STREAM_SUITE)
    out = tmp_path / "out"
    progress = sweep(suite, out, pooling=True, agents=("oracle",), reserve_after_sec=0)
    assert (progress.done, progress.total) == (14, 14)
    rows = raw_episode_rows(out, ["task_id", "termination_reason", "started_at"])
    assert {r["termination_reason"] for r in rows} == {"success"}
    started = {r["task_id"]: r["started_at"] for r in rows}
    after_pair = [t for t in started if t.startswith("single-") and started[t] > started["pair"]]
    assert len(after_pair) == 12, (
        "the pair started before the stream behind it",
        sorted(started, key=started.__getitem__),
    )


@pytest.mark.timeout(600)
def test_a_submitted_run_finishes_on_a_two_slot_head_and_its_results_come_back(
    tmp_path: Path,
) -> None:
    """Job mode as the issue's user ran it: a head hosting local=2, a run submitted to its
    Job Submission API without --out. It finishes, and its rows reach ./results here."""
    from crabray.results import read_episodes

    with crabray_head(tmp_path, "mixed.py", MIXED_SUITE) as head:
        run = head.cli(
            "run", "mixed.py", "--agent", "oracle", "--concurrency", "2", "--address", head.jobs,
        )  # fmt: skip
        assert "copied into results" in run.stderr, run.stdout + run.stderr
        episodes = read_episodes(head.laptop / "results")
        assert len(episodes) == 9, "every episode's row came back to this machine"
        outcome = dict(zip(episodes.task_id, episodes.termination_reason, strict=True))
        assert outcome["two-ab"] == outcome["two-bc"] == outcome["one-c2"] == "success"
        assert outcome["three-abc"] == "env_error", "more than the head's slots: fails, no hang"


@pytest.mark.timeout(300)
def test_an_episode_whose_slots_are_held_elsewhere_fails_as_infrastructure(
    tmp_path: Path,
) -> None:
    """Another holder (as another run on the same cluster) has every 'local' slot: the
    episode's actor is never placed, and after placement_timeout_sec it is a row saying
    so, not a wait for good."""
    import ray

    from crabray.agents import agent_spec
    from crabray.cluster.actors.inflight import SweepItem
    from crabray.cluster.runtime.ray_runtime import connect, disconnect
    from crabray.formats import load_suite, resolve_suite

    (tmp_path / "mixed.py").write_text(MIXED_SUITE)
    suite: Suite = load_suite(resolve_suite(tmp_path / "mixed.py"))
    settings = SchedulerSettings(
        run_id="held",
        execution=Execution(concurrency=2, placement_timeout_sec=3, max_attempts=1),
    )
    out = tmp_path / "out"
    scheduler = Scheduler(suite, settings, ResultSink(out, "held").write)
    connect(hosts={"local": 2})
    try:

        @ray.remote(num_cpus=0, resources={"crabray_local": 2})
        class Holder:
            def ready(self) -> bool:
                return True

        holder = Holder.remote()  # type: ignore[attr-defined]
        assert ray.get(holder.ready.remote(), timeout=60)
        progress = scheduler.run([SweepItem(task_id="one-a", agent=agent_spec("oracle"))])
    finally:
        disconnect()
    assert progress.done == 1
    (row,) = raw_episode_rows(out, ["termination_reason", "error", "error_type"])
    assert row["termination_reason"] == "env_error", "the cluster's failure, not the agent's"
    assert row["error_type"] == "PlacementError"
    assert "did not place the environment actors of 'a' within 3 s" in row["error"]
