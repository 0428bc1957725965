"""A task-folder suite end to end through the real CLI: local Ray, images built from the
tasks' Dockerfiles, a real service on loopback, results and checkpoints in Parquet."""

from __future__ import annotations

import socket
from pathlib import Path

import pandas as pd
import pytest

from crabray.results import read_episodes
from tests.backends.docker.dockerd import require_env_image
from tests.conftest import crabray
from tests.formats.conftest import FakeService, write_task_folder

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_suite(root: Path, service_url: str) -> Path:
    """Four tasks: a good one using a healthy service, an evaluator that raises, an init
    script that fails, and a service that never becomes healthy."""
    write_task_folder(root / "hello", files={"dependencies.yml": "- notes\n"})
    write_task_folder(
        root / "raises",
        files={
            "evaluator.py": "def grade_checkpoints(trajectory=''):\n"
            "    raise RuntimeError('rubric broke')\n"
        },
    )
    write_task_folder(
        root / "init_fails",
        files={"pre_init.py": "import sys\nsys.exit('database seed missing')\n"},
    )
    write_task_folder(root / "sick_service", files={"dependencies.yml": "- broken\n"})
    (root / "services.yml").write_text(
        "services:\n"
        "  notes:\n"
        f"    reset_url: {service_url}/reset\n"
        f"    health_url: {service_url}/health\n"
        "    timeout_sec: 10\n"
        "  broken:\n"
        f"    health_url: http://127.0.0.1:{free_port()}/health\n"
        "    timeout_sec: 2\n"
    )
    return root


def test_oracle_and_noop_with_checkpoints_and_failures(
    tmp_path: Path, service: FakeService
) -> None:
    require_env_image("task-base")
    suite = write_suite(tmp_path / "suite", service.url)
    out = tmp_path / "out"
    done = crabray(
        "run", str(suite), "--agent", "oracle", "--agent", "noop", "--out", str(out), timeout=900
    )
    # The suite's own faults (an evaluator that raises, failing setups) are benchmark errors.
    assert done.returncode == 1, f"{done.stdout}\n{done.stderr}"
    assert "6 benchmark errors" in done.stdout
    episodes = read_episodes(out)
    assert len(episodes) == 8
    rows = {(r.task_id, r.agent): r for r in episodes.itertuples()}

    def checkpoints(task: str, agent: str) -> list[tuple[int, int]]:
        return [(int(c["total"]), int(c["result"])) for c in rows[task, agent].checkpoints]

    oracle = rows["hello", "oracle"]
    assert (oracle.score, oracle.success) == (1.0, True) and pd.isna(oracle.error)
    assert checkpoints("hello", "oracle") == [(1, 1), (1, 1), (2, 2)]
    noop = rows["hello", "noop"]
    assert noop.score == pytest.approx(0.125) and not noop.success
    assert noop.termination_reason == "agent_complete"
    assert checkpoints("hello", "noop") == [(1, 1), (1, 0), (2, 0)]
    assert service.resets == 2  # once before each episode of the task that needs it

    for agent in ("oracle", "noop"):
        raised = rows["raises", agent]
        assert (raised.termination_reason, raised.score) == ("evaluator_error", 0.0)
        assert raised.attribution == "benchmark"
        # Neither the oracle's reference state nor noop's untouched one is an agent's doing.
        assert raised.error.startswith(
            "evaluation 'grade_checkpoints': eval.py: grade_checkpoints raised "
            "RuntimeError: rubric broke ("
        )
        assert len(raised.checkpoints) == 0

        init = rows["init_fails", agent]
        assert (init.termination_reason, init.score) == ("setup_error", 0.0)
        assert init.error.startswith(
            "setup 'run_init_script' failed: init script pre_init.py exited 1"
        )
        assert "database seed missing" in init.error

        sick = rows["sick_service", agent]
        assert (sick.termination_reason, sick.score) == ("setup_error", 0.0)
        assert sick.error.startswith(
            "setup 'prepare_service' failed: service 'broken' is not healthy: GET "
        )


def test_the_services_a_run_started_stop_when_it_ends(tmp_path: Path) -> None:
    """A reset command that starts its service in the background (and a service that
    ignores SIGTERM): once `crabray run` has exited, nothing listens on its port."""
    from tests.formats.test_task_folder_services import STUBBORN, listening

    require_env_image("task-base")
    root = tmp_path / "suite"
    write_task_folder(root / "hello", files={"dependencies.yml": "- notes\n"})
    (root / "server.py").write_text(STUBBORN)
    port = free_port()
    (root / "services.yml").write_text(
        "services:\n  notes:\n"
        f"    reset: nohup python3 server.py {port} > server.log 2>&1 &\n"
        f"    health_url: http://127.0.0.1:{port}/health\n    timeout_sec: 10\n"
    )
    out = tmp_path / "out"
    done = crabray("run", str(root), "--agent", "oracle", "--out", str(out), timeout=600)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    (row,) = read_episodes(out).itertuples()
    assert row.success, "the episode ran with its service up"
    assert not listening(port), "the service the run started was stopped when it ended"
