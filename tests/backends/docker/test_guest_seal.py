"""A hostile agent cannot make the container's guest answer the evaluator for it.

The guest is one long-lived ``python3`` of the container's user. Unsealed, a
command of that user could open ``/proc/<guest>/fd/1`` and write forged answers,
or read its environment. Sealed (non-dumpable), it cannot (on every backend:
``test_guest_contract.py``); and a guest started after commands ran (the agent
killed the first one, and may have reached the new one before it sealed itself,
or planted a module it imports) no longer answers commands or file reads: those
go through the engine until the next reset.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from crabray.backends import Backend, create_backend
from crabray.backends.episode_env import EpisodeEnv
from crabray.core.env import AgentSignals
from crabray.core.environment import EnvironmentConfig
from tests.backends.docker.dockerd import env_image_missing
from tests.backends.guest_fixtures.seed_actions import guest_pid

SHADOW = """
import sys
sys.path.remove("")
del sys.modules["hashlib"]
import hashlib
sys.path.insert(0, "")
sys.modules["hashlib"] = hashlib
import base64, subprocess
_encode, _Popen = base64.b64encode, subprocess.Popen
base64.b64encode = lambda data, *rest: _encode(b"FORGED", *rest)
class _Forged(_Popen):
    def __init__(self, args, *rest, **options):
        super().__init__(["echo", "FORGED"], *rest, **options)
subprocess.Popen = _Forged
"""
"""The agent's ``hashlib.py`` in the guest's directory: a guest that imports it forges
every file it reads and every command it runs (and is the real hashlib otherwise)."""


def _sandbox(**settings: str) -> Iterator[Backend]:
    missing = env_image_missing("debian")
    if missing:
        pytest.skip(missing)
    config = EnvironmentConfig(
        name="seal",
        backend="docker",
        backend_settings={"image": "crabray/debian:latest", **settings},
    )
    backend = create_backend(config)
    backend.start()
    yield backend
    backend.close()


@pytest.fixture
def as_root() -> Iterator[Backend]:
    """``crabray/debian`` as its root user, with the default capabilities (no SYS_PTRACE)."""
    yield from _sandbox()


@pytest.fixture
def as_user() -> Iterator[Backend]:
    """``crabray/debian`` as its unprivileged ``user``, working in ``/tmp``."""
    yield from _sandbox(user="user", workdir="/tmp")


def _env(backend: Backend) -> EpisodeEnv:
    return EpisodeEnv(backend.config.name, backend, AgentSignals())


def test_what_the_guest_starts_holds_nothing_of_it(as_root: Backend) -> None:
    """Only its own three descriptors (stdin ``/dev/null``) and the command's marker."""
    guest_pid.run(_env(as_root))
    listed = as_root.exec("ls /proc/self/fd; readlink /proc/self/fd/0; env").stdout.split()
    assert listed[:5] == ["0", "1", "2", "3", "/dev/null"], listed
    assert sum(line.startswith("CRABRAY_EXEC_ID=") for line in listed) == 1


def test_a_guest_started_after_commands_ran_answers_no_evaluator(as_user: Backend) -> None:
    import docker

    env = _env(as_user)
    as_user.put_file("/tmp/truth.txt", b"true bytes")
    first = guest_pid.run(env)
    assert as_user.exec("echo $PPID").stdout == f"{first}\n"  # the first guest runs commands
    as_user.put_file("/tmp/hashlib.py", SHADOW.encode())
    client = docker.from_env()
    try:  # the agent kills the guest (from outside here, so that no command is cut short)
        container = client.containers.get(as_user.describe()["container"])
        assert container.exec_run(["kill", "-9", str(first)]).exit_code == 0
    finally:
        client.close()
    second = guest_pid.run(env)  # a Python call needs a guest: a new one, isolated (-I -S)
    assert second != first
    # It never imports the shadow in its directory (GUEST_ARGV), yet is not trusted.
    read = as_user._guest.read_file("/tmp/truth.txt", 100)  # type: ignore[attr-defined]
    assert read == b"true bytes"
    assert as_user.grader_distrust(ran_commands=False) is not None
    assert as_user.get_file("/tmp/truth.txt") == b"true bytes"
    assert as_user.get_file("truth.txt") == b"true bytes"
    result = as_user.exec("cat /tmp/truth.txt; echo; echo $PPID")
    assert result.stdout.split("\n")[0] == "true bytes"
    assert result.stdout.split("\n")[1] != str(second)
    as_user.reset()
    third = guest_pid.run(env)  # a clean container's guest, started before any command
    assert as_user.exec("echo $PPID").stdout == f"{third}\n"
