"""Fixtures for the Ray layer: real local Ray instances and multi-node clusters."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A real single-node Ray instance hosting 2 'local' and 1 'other' sandbox slots."""
    ray.init(
        address="local",
        num_cpus=2,
        resources={"crabray_local": 2, "crabray_other": 1},
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def two_workers() -> Iterator[Cluster]:
    """A real Ray cluster on this machine: a head hosting nothing and two workers.

    Worker 'a' hosts 2 'local' slots labelled family=a; worker 'b' hosts 2
    labelled family=b. This process is connected to it as the driver.
    """
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for family in ("a", "b"):
        cluster.add_node(
            num_cpus=1,
            resources={"crabray_local": 2},
            labels={"crabray-local": "yes", "family": family},
        )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
