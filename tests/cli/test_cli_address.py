"""``crabray run --address``: joining a Ray cluster someone else started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ray.cluster_utils import Cluster

from crabray.results import read_episodes
from tests.conftest import crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A real two-node Ray cluster on this machine, started outside crabray."""
    started = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    started.add_node(num_cpus=1, resources={"crabray_local": 2}, labels={"crabray-local": "yes"})
    started.add_node(num_cpus=1, resources={"crabray_local": 2}, labels={"crabray-local": "yes"})
    started.wait_for_nodes()
    try:
        yield started
    finally:
        started.shutdown()


def test_run_joins_an_existing_cluster(cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = crabray(
        "run", "tasks/demo", "--agent", "oracle", "--out", str(out), "--address", cluster.address
    )
    assert done.returncode == 0, done.stderr
    episodes = read_episodes(out)
    assert len(episodes) == 11
    assert episodes.success.all()
    workers = {
        node.node_id[:8] for node in cluster.list_all_nodes() if node is not cluster.head_node
    }
    ran_on = {node.split("/")[-1] for node in episodes.node}
    assert ran_on <= workers, f"episodes ran on {ran_on}; only {workers} host 'local' sandboxes"


def test_a_cluster_that_hosts_no_such_kind_fails_fast(tmp_path: Path) -> None:
    bare = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        done = crabray(
            "run",
            "tasks/demo",
            "--agent",
            "noop",
            "--out",
            str(tmp_path),
            "--address",
            bare.address,
        )
    finally:
        bare.shutdown()
    assert done.returncode == 2
    assert "no node of the Ray cluster hosts sandboxes of kind 'local'" in done.stderr
    assert "crabray cluster start-worker --hosts" in done.stderr


def test_unreachable_address_is_a_clear_error(tmp_path: Path) -> None:
    done = crabray(
        "run", "tasks/demo", "--agent", "noop", "--out", str(tmp_path), "--address", "127.0.0.1:1"
    )
    assert done.returncode == 2
    assert "cannot connect to the Ray cluster at 127.0.0.1:1" in done.stderr
