"""The run's end on every node: services an episode started on another node are stopped there.

On a real Ray cluster on this machine whose sandbox node keeps its files where
the driver cannot see them (``far_node``), as another machine would.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
import ray

from crabray.cluster.runtime.placement import describe_node, pinned_to
from crabray.cluster.runtime.run_end import end_run_everywhere
from crabray.core.errors import CrabrayError
from crabray.formats import SuiteRef
from crabray.formats.task_folder import load_registry, prepare_service
from tests.cluster.conftest import free_port
from tests.formats.test_task_folder_services import STUBBORN, listening

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _service_started_on(node: dict, tmp_path: Path, stop: str) -> tuple[SuiteRef, int, str]:
    """A task-folder suite whose service (a server ignoring SIGTERM) an episode reset on
    ``node``, as episodes do there before they start: the suite, its port, the node's tmp."""
    port = free_port()
    (tmp_path / "server.py").write_text(STUBBORN)
    (tmp_path / "services.yml").write_text(
        "services:\n  notes:\n"
        f"    reset: nohup {sys.executable} server.py {port} > server.log 2>&1 &\n"
        f"    health_url: http://127.0.0.1:{port}/health\n    timeout_sec: 20\n"
        f"    stop: {stop}\n"
    )
    registry_file = tmp_path / "services.yml"

    def reset() -> str:
        prepare_service(load_registry(registry_file), "notes")
        return tempfile.gettempdir()

    task = ray.remote(num_cpus=0)(reset).options(scheduling_strategy=pinned_to(node))
    node_tmp = str(ray.get(task.remote(), timeout=60))
    assert listening(port), "the reset on the node started the service"
    return SuiteRef(path=str(tmp_path), format="task-folder"), port, node_tmp


def test_a_service_started_on_another_node_is_stopped_there_when_the_run_ends(
    tmp_path: Path, far_node: dict
) -> None:
    suite, port, far_tmp = _service_started_on(far_node, tmp_path, "echo stopping > stopped.txt")
    assert far_tmp != tempfile.gettempdir(), "the node keeps its records where the driver cannot"

    end_run_everywhere(suite, {"local"})

    assert not listening(port), "the server (which ignores SIGTERM) was killed on its node"
    assert (tmp_path / "stopped.txt").read_text() == "stopping\n", "its stop command ran first"
    assert not list(Path(far_tmp).glob("crabray-service-*.sessions")), "nothing left to stop"


def test_what_a_node_could_not_stop_is_named_with_the_node(tmp_path: Path, far_node: dict) -> None:
    suite, port, _ = _service_started_on(far_node, tmp_path, "'echo no such thing >&2; exit 3'")

    with pytest.raises(CrabrayError) as caught:
        end_run_everywhere(suite, {"local"})

    assert str(caught.value).startswith(
        f"on node {describe_node(far_node)}: service 'notes': stop command"
    )
    assert "exited 3" in str(caught.value) and "no such thing" in str(caught.value)
    assert not listening(port), "the service is stopped all the same"


def test_a_node_that_hosts_none_of_the_run_kinds_is_not_asked(
    tmp_path: Path, far_node: dict
) -> None:
    suite, port, _ = _service_started_on(far_node, tmp_path, "'true'")
    try:
        end_run_everywhere(suite, {"docker"})
        assert listening(port), "the run had no docker sandbox: the far node was not its host"
    finally:
        end_run_everywhere(suite, {"local"})
    assert not listening(port)
