"""The orphan cleanup on a cluster: each node removes what dead owners left there, and says so.

On a real Ray cluster on this machine whose sandbox node keeps its files where
the driver cannot see them (``far_node``), as another machine would.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest
import ray

from crabray.cluster.actors.cleanup import cleanup_orphans
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.placement import describe_node, pinned_to
from crabray.core.environment import EnvironmentConfig
from tests.conftest import abandoned_local_sandbox

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SETTINGS = {"isolation": "none"}
"""A local sandbox under its node's temporary folder (no root_dir)."""


def _abandoned_on(node: dict) -> Path:
    """A local sandbox made on ``node``'s temporary folder by an owner that is now dead."""

    def node_tmp() -> str:
        return tempfile.gettempdir()

    task = ray.remote(num_cpus=0)(node_tmp).options(scheduling_strategy=pinned_to(node))
    far_tmp = ray.get(task.remote(), timeout=60)
    root = abandoned_local_sandbox(SETTINGS, tmpdir=far_tmp)
    assert root.is_relative_to(far_tmp)
    return root


def test_each_node_removes_what_dead_owners_left_there_and_the_warning_names_it(
    far_node: dict, caplog: pytest.LogCaptureFixture
) -> None:
    abandoned = _abandoned_on(far_node)
    folder = next(p for p in [abandoned, *abandoned.parents] if p.name.startswith("crabray-"))
    spec = SandboxSpec.of(EnvironmentConfig(name="box", backend_settings=SETTINGS))

    with caplog.at_level(logging.WARNING, logger="crabray.cluster.actors.cleanup"):
        removed = cleanup_orphans([spec])

    assert removed == [f"sandbox folder {folder} on node {describe_node(far_node)}"]
    assert not folder.exists()
    assert caplog.messages == [
        f"removed 1 sandbox left by an earlier run that ended without cleaning up: {removed[0]}"
    ]
    assert cleanup_orphans([spec]) == [], "nothing is left to remove"
