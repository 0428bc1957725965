"""``tasks/docker_demo`` end to end through the real CLI, on local Ray and real containers."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from crabray.results import read_episodes
from tests.backends.docker.dockerd import require_docker
from tests.conftest import crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_docker_demo_oracle_succeeds_and_noop_fails(tmp_path: Path) -> None:
    require_docker()
    out = tmp_path / "out"
    done = crabray(
        "run",
        "tasks/docker_demo",
        "--agent",
        "oracle",
        "--agent",
        "noop",
        "--out",
        str(out),
        timeout=600,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    episodes = read_episodes(out)
    assert len(episodes) == 16
    by_agent = episodes.groupby("agent")["success"].sum().to_dict()
    assert by_agent == {"oracle": 8, "noop": 0}
    oracle = episodes[episodes.agent == "oracle"]
    assert set(oracle.termination_reason) == {"success"}
    assert (oracle.completeness == 1.0).all()
    # The run removed its own containers (other processes' are none of its business).
    run_ids = set(episodes.run_id)
    client = docker.from_env()
    try:
        left = [
            c.name
            for c in client.containers.list(all=True, filters={"label": "crabray.run"})
            if c.labels.get("crabray.run") in run_ids
        ]
    finally:
        client.close()
    assert run_ids and all(run_ids)
    assert left == []
