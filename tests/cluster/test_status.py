"""The run status board: bounded, and readable after the run's driver has gone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from crabray.cluster.runtime.placement import node_labels, node_resources
from crabray.cluster.sweep.progress import SweepProgress
from crabray.cluster.sweep.status import BOARD_NAME, NAMESPACE, RunStatus, StatusBoard, run_statuses
from tests.conftest import ROOT, write_sleepy_suite


def status(run_id: str, done: int) -> RunStatus:
    return RunStatus.of(run_id, SweepProgress(total=5, done=done, successes=done, timeouts=1))


def test_the_board_keeps_the_latest_status_of_the_most_recent_runs() -> None:
    board = StatusBoard(max_runs=2)
    board.put(status("a", 1))
    board.put(status("b", 1))
    board.put(status("a", 2))
    board.put(status("c", 1))
    assert [(s.run_id, s.done) for s in board.statuses()] == [("a", 2), ("c", 1)]


DRIVER = textwrap.dedent(
    """
    import sys
    from crabray.cluster.sweep.progress import SweepProgress
    from crabray.cluster.runtime.ray_runtime import connect
    from crabray.cluster.sweep.status import StatusPublisher

    connect(sys.argv[1])
    publisher = StatusPublisher("run-1")
    publisher.publish(SweepProgress(total=3, in_flight=2))
    publisher.publish(SweepProgress(total=3, done=3, successes=2, retries=1), final=True)
    """
)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A real one-node Ray cluster that outlives the drivers connecting to it."""
    started = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        yield started
    finally:
        started.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_status_is_readable_after_its_driver_exits(cluster: Cluster) -> None:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, cluster.address],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        assert run_statuses() == [
            RunStatus(
                run_id="run-1",
                total=3,
                done=3,
                successes=2,
                in_flight=0,
                retries=1,
                infra_failures=0,
            )
        ]
        board = ray.get_actor(BOARD_NAME, namespace=NAMESPACE)
        assert board is not None
        assert ray.available_resources().get("CPU") == 1, "the board holds no CPU"
    finally:
        ray.shutdown()


def _sweep_and_read_statuses(tmp_path: Path, address: str | None) -> list[tuple[str, int]]:
    """Sweep two tasks through the scheduler, then read the board while still connected."""
    from crabray.agents import agent_spec
    from crabray.cluster.actors.inflight import SweepItem
    from crabray.cluster.runtime.ray_runtime import connect, disconnect
    from crabray.cluster.sweep.scheduler import Scheduler
    from crabray.cluster.sweep.settings import Execution, SchedulerSettings
    from crabray.formats import load_suite, resolve_suite
    from crabray.results import ResultSink

    suite = load_suite(resolve_suite(write_sleepy_suite(tmp_path / "sweep.py", tasks=2, sleep=0)))
    settings = SchedulerSettings(run_id="seen", execution=Execution(concurrency=1))
    scheduler = Scheduler(suite, settings, ResultSink(tmp_path / "out", "seen").write)
    connect(address, hosts={"local": 2})
    try:
        progress = scheduler.run(
            SweepItem(task_id=task, agent=agent_spec("oracle")) for task in suite.task_ids
        )
        assert progress.successes == 2
        return [(seen.run_id, seen.done) for seen in run_statuses()]
    finally:
        disconnect()


@pytest.mark.ray
@pytest.mark.slow
def test_a_sweep_on_a_cluster_that_outlives_it_publishes_its_status(tmp_path: Path) -> None:
    hosting = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": node_resources({"local": 2}),
            "labels": node_labels({"local": 2}),
        },
    )
    try:
        assert _sweep_and_read_statuses(tmp_path, hosting.address) == [("seen", 2)]
    finally:
        hosting.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_a_sweep_on_the_local_instance_it_started_starts_no_board(tmp_path: Path) -> None:
    # The instance ends with the run and no `crabray cluster status` reads it: a board's
    # actor there would be a worker process started for nobody.
    assert _sweep_and_read_statuses(tmp_path, None) == []
