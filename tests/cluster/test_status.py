"""The run status board: bounded, and readable after the run's driver has gone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster

from crabray.cluster.progress import SweepProgress
from crabray.cluster.status import BOARD_NAME, NAMESPACE, RunStatus, StatusBoard, run_statuses
from tests.conftest import ROOT


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
    from crabray.cluster.progress import SweepProgress
    from crabray.cluster.ray_runtime import connect
    from crabray.cluster.status import StatusPublisher

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
