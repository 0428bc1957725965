"""A sandbox without python3: plain-Python actions fail at setup, commands still run.

The busybox image (``crabray/busybox``) and the test VM have a shell but no Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray import BenchmarkConfig, EnvironmentConfig, Task
from crabray.actions import SHELL_ACTIONS, run_command
from crabray.agents import AgentSpec, OracleAgent
from crabray.backends import Backend, create_backend
from crabray.backends.episode_env import EpisodeEnv
from crabray.backends.guest import NoPythonError, python_call
from crabray.core.env import AgentSignals
from crabray.core.errors import ConfigError
from crabray.core.result import TerminationReason
from crabray.episode import EpisodeSettings, run_episode
from tests.backends.conftest import require_kind
from tests.backends.docker.dockerd import BUSYBOX_IMAGE, require_docker
from tests.backends.guest_fixtures.seed_actions import check_file_exist
from tests.backends.vm.vmimage import vm_settings


@pytest.fixture
def busybox() -> Iterator[EnvironmentConfig]:
    require_docker()
    yield EnvironmentConfig(
        name="tiny",
        action_space=SHELL_ACTIONS,
        backend="docker",
        backend_settings={"image": BUSYBOX_IMAGE},
    )


def test_no_python3_names_the_action_the_environment_and_what_is_missing(
    busybox: EnvironmentConfig,
) -> None:
    backend = create_backend(busybox)
    backend.start()
    try:
        env = EpisodeEnv("tiny", backend, AgentSignals())
        with pytest.raises(ConfigError) as caught:
            env.check_python(check_file_exist)
        message = str(caught.value)
        assert "action 'check_file_exist'" in message
        assert "environment 'tiny'" in message
        assert "python3" in message
        assert backend.exec("echo still fine").stdout == "still fine\n"  # the plain exec path
    finally:
        backend.close()


def test_a_task_with_a_plain_evaluator_in_it_is_a_setup_error(busybox: EnvironmentConfig) -> None:
    task = Task(
        id="made",
        description="Make made.txt.",
        evaluator=check_file_exist(file_path="made.txt"),
        solution=[run_command(command="touch made.txt")],
    )
    bench = BenchmarkConfig(name="seed", tasks=[task], environments=[busybox])
    backend: Backend = create_backend(busybox)
    backend.start()
    try:
        record = run_episode(
            bench,
            task,
            OracleAgent(AgentSpec(name="oracle", kind="oracle")),
            {"tiny": backend},
            EpisodeSettings(run_id="r", suite="seed", agent="oracle"),
        )
    finally:
        backend.close()
    result = record.result
    assert result.termination_reason is TerminationReason.SETUP_ERROR
    assert "check_file_exist" in (result.error or "")
    assert "'tiny'" in (result.error or "")
    assert "python3" in (result.error or "")
    assert result.steps == 0


@pytest.mark.component  # QEMU
def test_a_vm_without_python3_keeps_plain_commands_and_names_what_is_missing(
    tmp_path: Path,
) -> None:
    """The test VM is busybox and dropbear in an initramfs: no python3."""
    kind = require_kind("vm")
    config = EnvironmentConfig(name="vm1", backend=kind, backend_settings=vm_settings(tmp_path))
    backend = create_backend(config)
    backend.start()
    try:
        with pytest.raises(NoPythonError, match="python3"):
            backend.check_python()
        assert backend.exec("echo plain").stdout == "plain\n"
        with pytest.raises(NoPythonError):
            backend.call_python(python_call(check_file_exist, {"file_path": "x"}))
    finally:
        backend.close()
