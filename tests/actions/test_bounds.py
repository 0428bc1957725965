"""Bounds on what an agent sets: action timeouts and file reads, on real sandboxes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.actions import launch_app, read_file, run_command
from crabray.actions.limits import MAX_READ_BYTES, MAX_TIMEOUT_SEC
from crabray.backends import Backend, create_backend
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ActionParameterError


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Backend]:
    config = EnvironmentConfig(
        name="bounds",
        backend="local",
        backend_settings={"root_dir": str(tmp_path / "sandboxes"), "isolation": "none"},
    )
    backend = create_backend(config)
    backend.start()
    yield backend
    backend.close()


@pytest.mark.parametrize("action", [run_command, launch_app])
def test_every_shipped_timeout_has_one_bound_the_agent_sees(action, sandbox: Backend) -> None:
    schema = action.to_openai_tool()["function"]["parameters"]["properties"]
    assert schema["timeout_sec"]["maximum"] == MAX_TIMEOUT_SEC
    with pytest.raises(ActionParameterError, match="timeout_sec"):
        action.run(sandbox, command="true", timeout_sec=MAX_TIMEOUT_SEC + 1)


def test_a_run_command_past_the_bound_never_reaches_the_sandbox(sandbox: Backend) -> None:
    with pytest.raises(ActionParameterError, match="less than or equal to 300"):
        run_command.run(sandbox, command="touch ran", timeout_sec=10**9)
    assert "no" in run_command.run(sandbox, command="test -e ran && echo yes || echo no")
    assert "exit code 0" in run_command.run(sandbox, command="true", timeout_sec=MAX_TIMEOUT_SEC)


def test_read_file_cuts_a_big_file_and_says_so(sandbox: Backend) -> None:
    size = 3 * MAX_READ_BYTES
    run_command.run(sandbox, command=f"head -c {size} /dev/zero | tr '\\0' a > big.txt")
    text = read_file.run(sandbox, path="big.txt")
    body, marker = text.rsplit("\n", 1)
    assert body == "a" * MAX_READ_BYTES
    assert marker == f"[read_file cut 'big.txt' at {MAX_READ_BYTES} bytes of {size}]"


def test_read_file_of_an_endless_device_ends(sandbox: Backend) -> None:
    text = read_file.run(sandbox, path="/dev/zero")
    assert text.endswith(f"[read_file cut '/dev/zero' at {MAX_READ_BYTES} bytes]")
    assert len(text) < 2 * MAX_READ_BYTES


def test_read_file_returns_a_small_file_whole(sandbox: Backend) -> None:
    sandbox.put_file("small.txt", "héllo\n".encode())
    assert read_file.run(sandbox, path="small.txt") == "héllo\n"
