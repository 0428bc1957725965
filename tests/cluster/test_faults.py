"""Fault tolerance for real: a worker node killed mid-sweep, episodes past their time limit."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray.cluster_utils import Cluster

from crabray.core.errors import CrabrayError
from crabray.results import read_episodes
from tests.conftest import ROOT, raw_episode_rows, write_sleepy_suite

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def raw_rows(out: Path) -> list[dict]:
    return raw_episode_rows(out, ["task_id", "attempt", "termination_reason", "node", "success"])


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A Ray cluster of a head that hosts no sandboxes; a test adds nodes with ``add_worker``."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        yield cluster
    finally:
        cluster.shutdown()


def add_worker(cluster: Cluster) -> Any:
    """A node hosting two local sandboxes, joined; its handle, for ``remove_node``."""
    node = cluster.add_node(num_cpus=1, resources={"crabray_local": 2})
    cluster.wait_for_nodes()
    return node


def run_command(suite: Path, out: Path, address: str) -> list[str]:
    """``crabray run`` of the oracle over ``suite`` on the cluster at ``address``."""
    return [sys.executable, "-m", "crabray", "run", str(suite), "--agent", "oracle",
            "--out", str(out), "--address", address, "--concurrency", "4"]  # fmt: skip


def start_driver(suite: Path, out: Path, address: str) -> subprocess.Popen[str]:
    """``crabray run`` in a process of its own, its output captured."""
    command = run_command(suite, out, address)
    return subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_rows(out: Path, at_least: int, driver: subprocess.Popen[Any]) -> None:
    """Until ``at_least`` episodes are recorded in ``out`` (or 240 s); the driver must live on."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(raw_rows(out)) < at_least:
        assert driver.poll() is None, driver.communicate()
        time.sleep(0.1)


def sweep_losing_a_worker(cluster: Cluster, suite: Path, out: Path, after: int) -> tuple[Any, str]:
    """Run ``suite`` on two workers; remove one once ``after`` episodes are recorded.

    Returns:
        The removed node, and what the driver printed (it must have exited 0).
    """
    doomed = add_worker(cluster)
    add_worker(cluster)
    driver = start_driver(suite, out, cluster.address)
    try:
        wait_for_rows(out, after, driver)
        cluster.remove_node(doomed)
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        driver.kill()
    assert driver.returncode == 0, stderr
    return doomed, stdout


def test_killing_a_worker_node_mid_sweep_loses_nothing(tmp_path: Path, cluster: Cluster) -> None:
    suite = write_sleepy_suite(tmp_path / "sweep.py", tasks=12, sleep=1.5)
    out = tmp_path / "out"
    doomed, stdout = sweep_losing_a_worker(cluster, suite, out, after=2)

    rows = raw_rows(out)
    final = [r for r in rows if r["termination_reason"] != "env_error"]
    assert sorted(r["task_id"] for r in final) == [f"t{i:02d}" for i in range(12)], (
        "every task ends with exactly one final row"
    )
    assert all(r["success"] for r in final)
    lost = [r for r in rows if r["termination_reason"] == "env_error"]
    assert lost, "the killed node was running episodes; they must show as infra failures"
    for row in lost:
        retried = [r for r in final if r["task_id"] == row["task_id"]]
        assert retried[0]["attempt"] > row["attempt"], "retried as a later attempt"
    assert doomed.node_id[:8] not in {r["node"].split("/")[-1] for r in final if r["attempt"]}
    episodes = read_episodes(out)
    assert len(episodes) == 12 and episodes.success.all()
    assert "infrastructure failure" in stdout  # 1 failure, or N failures


def test_an_episode_past_its_time_limit_is_stopped_and_recorded(tmp_path: Path) -> None:
    """The episode's own check cannot fire inside a 60 s command: the scheduler stops it."""
    from crabray.agents import agent_spec
    from crabray.cluster.actors.inflight import SweepItem
    from crabray.cluster.runtime.ray_runtime import connect, disconnect
    from crabray.cluster.sweep.scheduler import Scheduler
    from crabray.cluster.sweep.settings import Execution, SchedulerSettings
    from crabray.formats import load_suite, resolve_suite
    from crabray.results import ResultSink

    suite = load_suite(
        resolve_suite(write_sleepy_suite(tmp_path / "slow.py", 2, sleep=60, limit=1.0))
    )
    sink = ResultSink(tmp_path / "out", "timeouts")
    settings = SchedulerSettings(
        run_id="timeouts",
        execution=Execution(concurrency=2),
        timeout_grace_sec=1.0,
        kill_grace_sec=1.0,
    )
    connect(hosts={"local": 2})
    try:
        started = time.monotonic()
        progress = Scheduler(suite, settings, sink.write).run(
            SweepItem(task_id=t, agent=agent_spec("oracle")) for t in suite.task_ids
        )
        elapsed = time.monotonic() - started
    finally:
        disconnect()
    assert elapsed < 45, "stopped long before the 60 s command would have ended"
    assert (progress.done, progress.timeouts, progress.retries) == (2, 2, 0)
    episodes = read_episodes(tmp_path / "out")
    assert set(episodes.termination_reason) == {"timeout"}
    assert episodes.error.str.contains("past its time limit").all()
    # The driver made these rows, not the episode: they still carry the task's instruction.
    assert (episodes.description == "sleep, then write done.txt").all()
    assert not episodes.success.any()
    assert (episodes.started_at <= episodes.finished_at).all(), "a timeout ends after it starts"
    assert (episodes.finished_at - episodes.started_at).dt.total_seconds().min() >= 1.0


def test_killing_the_driver_mid_sweep_then_resuming_on_the_cluster(
    tmp_path: Path, cluster: Cluster
) -> None:
    for _ in range(2):
        add_worker(cluster)
    suite = write_sleepy_suite(tmp_path / "sweep.py", tasks=12, sleep=1.0)
    out = tmp_path / "out"
    driver = start_driver(suite, out, cluster.address)
    wait_for_rows(out, 3, driver)
    driver.kill()  # the driver alone dies; the cluster lives on
    driver.communicate()
    before = raw_rows(out)
    assert 3 <= len(before) < 12
    (run_id,) = [p.stem for p in (out / "runs").glob("*.json")]
    resumed = subprocess.run(
        [*run_command(suite, out, cluster.address), "--resume", run_id],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before)} episodes were already finished" in resumed.stdout
    after = raw_rows(out)
    assert sorted(r["task_id"] for r in after) == [f"t{i:02d}" for i in range(12)], (
        "every task exactly once: nothing finished ran again, nothing was lost"
    )
    assert all(r["success"] for r in after)


def test_losing_the_only_node_of_a_kind_stops_the_run_after_the_wait(
    tmp_path: Path, cluster: Cluster
) -> None:
    """Nothing can host what is left: the run stops after ``host_wait_sec``, not minutes later.

    The only node hosting 'local' sandboxes goes away as the first episode is dispatched,
    before the driver has seen it go: the episodes dispatched then wait for actors that can
    never be placed, which Ray keeps pending forever. They must not hold the run open.
    """
    from crabray.agents import agent_spec
    from crabray.cluster.actors.inflight import SweepItem
    from crabray.cluster.runtime.ray_runtime import connect, disconnect
    from crabray.cluster.sweep.scheduler import Scheduler
    from crabray.cluster.sweep.settings import Execution, SchedulerSettings
    from crabray.formats import load_suite, resolve_suite
    from crabray.results import ResultSink

    only = add_worker(cluster)
    suite = load_suite(resolve_suite(write_sleepy_suite(tmp_path / "s.py", tasks=6, sleep=1.0)))
    sink = ResultSink(tmp_path / "out", "lost")
    removed: list[float] = []

    def lose_the_node_at_first_dispatch(_item: object, _time: float) -> None:
        if not removed:
            cluster.remove_node(only)
            removed.append(time.monotonic())

    settings = SchedulerSettings(
        run_id="lost",
        execution=Execution(concurrency=2),
        host_wait_sec=5.0,
    )
    scheduler = Scheduler(suite, settings, sink.write, on_submit=lose_the_node_at_first_dispatch)
    items = [SweepItem(task_id=t, agent=agent_spec("oracle")) for t in suite.task_ids]
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            scheduler.run(items)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    connect(cluster.address)
    try:
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(timeout=150)
        stopped_after = time.monotonic() - removed[0]
        still_running = thread.is_alive()
    finally:
        disconnect()
    # The wait is 5 s; before the fix the run sat with 2 episodes "in flight" for minutes.
    assert not still_running, f"the run was still going {stopped_after:.0f} s after losing its node"
    assert isinstance(outcome[0], CrabrayError), outcome
    assert "no node hosts sandboxes of kind 'local'" in str(outcome[0])
    assert "--resume lost" in str(outcome[0])
    rows = raw_episode_rows(tmp_path / "out", ["task_id", "termination_reason"])
    assert rows and {r["termination_reason"] for r in rows} == {"env_error"}, (
        "the episodes it gave up are recorded as infrastructure failures, to run on resume"
    )


def test_rows_of_timeouts_and_dead_nodes_have_ordered_times_and_a_node(
    tmp_path: Path, cluster: Cluster
) -> None:
    """A row the driver writes for an episode that did not return still says when and where."""
    suite = write_sleepy_suite(tmp_path / "sweep.py", tasks=6, sleep=3.0, limit=30.0)
    out = tmp_path / "out"
    sweep_losing_a_worker(cluster, suite, out, after=1)
    columns = ["task_id", "termination_reason", "node", "started_at", "finished_at"]
    rows = raw_episode_rows(out, columns)
    lost = [r for r in rows if r["termination_reason"] == "env_error"]
    assert lost, "the removed node was running episodes"
    for row in rows:
        assert row["node"], f"{row['task_id']} ({row['termination_reason']}) has no node"
        assert row["started_at"] <= row["finished_at"], row
