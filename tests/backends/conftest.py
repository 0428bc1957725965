"""Fixtures that hand the contract suite started backends of every kind.

To add a kind (docker, ssh, vm): add it to ``BACKEND_KINDS``, give it a
requirement check in ``_MISSING`` (``None`` when usable, else an install hint),
default settings in ``_SETTINGS`` and a leftover check in ``LEFTOVER_CHECKS``.
A kind whose component is missing is skipped with its hint, except under
``CI=true``, where a missing component fails the run instead of hiding it.

A contract id may also be a variant of a kind with other settings
(``local-bwrap``: the local kind confined by bubblewrap); ``KIND_OF`` names its
kind, and the other tables are keyed by the id.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from crabray.backends import Backend, create_backend
from crabray.core.environment import EnvironmentConfig
from tests.backends.docker.dockerd import (
    docker_leftovers,
    docker_missing,
    docker_settings,
    env_image_missing,
)
from tests.backends.ssh.sshd import shared_sshd, sshd_missing
from tests.backends.vm.vmimage import (
    vm_leftovers,
    vm_missing,
    vm_python_missing,
    vm_python_settings,
    vm_settings,
)

BACKEND_KINDS = ["local", "local-bwrap", "ssh", "docker", "docker-python", "vm"]
"""Every kind (or variant, see ``KIND_OF``) the contract suite runs against."""

KIND_OF = {"local-bwrap": "local", "docker-python": "docker", "vm-python": "vm"}
"""Contract ids that are a settings variant of a backend kind, and that kind.

``docker-python`` is a container of ``crabray/debian``, which has python3: its
commands go through the sandbox's guest process, where busybox's take plain execs.
``vm-python`` is the test VM with python3; only the guest tests use it (its
boots are slow, and ssh runs the same command path)."""

LOCAL_KINDS = frozenset({"local", "local-bwrap"})
"""The kinds (and variants) whose sandboxes are processes of this machine; every other kind
starts sshd, a container or a VM, and its tests are ``component`` tests (``kind_params``)."""

BackendFactory = Callable[..., Backend]
LeftoverCheck = Callable[[dict[str, Any], list[int]], list[str]]


def _local_missing() -> str | None:
    return None if os.path.exists("/bin/sh") else "the local backend needs /bin/sh"


def _bwrap_missing() -> str | None:
    from crabray.backends.local import _bwrap as bwrap

    usable, why = bwrap.probe()
    return None if usable else f"bubblewrap does not work here ({why}): {bwrap.INSTALL_HINT}"


_MISSING: dict[str, Callable[[], str | None]] = {
    "local": _local_missing,
    "local-bwrap": _bwrap_missing,
    "ssh": sshd_missing,
    "docker": docker_missing,
    "docker-python": lambda: env_image_missing("debian"),
    "vm": vm_missing,
    "vm-python": vm_python_missing,
}
"""Per kind: ``None`` when its component is usable here, else what to install."""


def _local_settings(tmp_path: Path) -> dict[str, Any]:
    return {"root_dir": str(tmp_path / "sandboxes"), "isolation": "none"}


def _local_bwrap_settings(tmp_path: Path) -> dict[str, Any]:
    return {"root_dir": str(tmp_path / "sandboxes"), "isolation": "bwrap"}


def _ssh_settings(tmp_path: Path) -> dict[str, Any]:
    return shared_sshd().settings(remote_root=str(tmp_path / "ssh-sandboxes"))


_SETTINGS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "local": _local_settings,
    "local-bwrap": _local_bwrap_settings,
    "ssh": _ssh_settings,
    "docker": docker_settings,
    "docker-python": lambda _tmp_path: {"image": "crabray/debian:latest"},
    "vm": vm_settings,
    "vm-python": vm_python_settings,
}
"""Per kind: default ``backend_settings`` for a test sandbox."""


def host_pid_alive(pid: int) -> bool:
    """Whether host process ``pid`` still runs; a zombie awaiting its reaper counts as dead."""
    stat_file = Path(f"/proc/{pid}/stat")
    if sys.platform.startswith("linux"):
        try:
            state = stat_file.read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_until(condition: Callable[[], bool], within_sec: float = 5.0) -> bool:
    """Poll ``condition`` until it holds or ``within_sec`` passes (killing takes a moment)."""
    deadline = time.monotonic() + within_sec
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _local_leftovers(described: dict[str, Any], pids: list[int]) -> list[str]:
    leftovers = []
    root = described.get("root")
    if root and os.path.lexists(root):
        leftovers.append(f"directory {root} still exists")
    wait_until(lambda: not any(host_pid_alive(pid) for pid in pids))
    leftovers += [f"process {pid} still runs" for pid in pids if host_pid_alive(pid)]
    return leftovers


def _bwrap_leftovers(described: dict[str, Any], pids: list[int]) -> list[str]:
    """The pids are from inside the sandbox's pid namespace: look for that namespace instead."""
    leftovers = _local_leftovers(described, [])
    namespace = f"pid:[{described['pid_namespace']}]"

    def members() -> list[str]:
        found = []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and os.readlink(proc / "ns" / "pid") == namespace:
                    found.append(proc.name)
            except OSError:
                continue
        return [pid for pid in found if host_pid_alive(int(pid))]

    wait_until(lambda: not members())
    return leftovers + [f"process {pid} of the sandbox still runs" for pid in members()]


LEFTOVER_CHECKS: dict[str, LeftoverCheck] = {
    "local": _local_leftovers,
    "local-bwrap": _bwrap_leftovers,
    # The test sshd is on loopback: the "remote" directory and pids are this host's.
    "ssh": _local_leftovers,
    "docker": docker_leftovers,
    "docker-python": docker_leftovers,
    "vm": vm_leftovers,
    "vm-python": vm_leftovers,
}
"""Per kind: what a closed sandbox left behind, given its ``describe()`` from before
``close()`` and the pids it reported from inside; an empty list means nothing."""


@pytest.fixture
def leftovers(contract_kind: str) -> LeftoverCheck:
    """What a closed sandbox of the kind under test left behind (see ``LEFTOVER_CHECKS``)."""
    return LEFTOVER_CHECKS[contract_kind]


@pytest.fixture
def backend_kind(contract_kind: str) -> str:
    """The backend kind under test (``local`` for ``local-bwrap``)."""
    return KIND_OF.get(contract_kind, contract_kind)


def kind_params(kinds: Sequence[str]) -> list[Any]:
    """``kinds`` as the params of a fixture, each kind outside ``LOCAL_KINDS`` marked ``component``
    (tests/conftest.py), so that ``-m fast`` runs the local kinds and ``-m component`` the rest."""
    component = pytest.mark.component
    return [kind if kind in LOCAL_KINDS else pytest.param(kind, marks=component) for kind in kinds]


@pytest.fixture(params=kind_params(BACKEND_KINDS))
def contract_kind(request: pytest.FixtureRequest) -> str:
    """The kind (or variant) under test; skipped (or failed under ``CI=true``) when not usable."""
    return require_kind(request.param)


def require_kind(kind: str) -> str:
    """``kind``, or skip the test (fail it under ``CI=true``) when its component is missing."""
    hint = _MISSING[kind]()
    if hint is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"backend '{kind}' is required under CI=true: {hint}")
        pytest.skip(f"backend '{kind}' not usable here: {hint}")
    return kind


@pytest.fixture
def backend_factory(
    contract_kind: str, backend_kind: str, tmp_path: Path
) -> Iterator[BackendFactory]:
    """Make started backends of the kind under test; every one is closed afterwards.

    Keyword arguments override the default ``backend_settings``.
    """
    made: list[Backend] = []

    def make(name: str = "contract", **settings: Any) -> Backend:
        config = EnvironmentConfig(
            name=name,
            backend=backend_kind,
            backend_settings={**_SETTINGS[contract_kind](tmp_path), **settings},
        )
        backend = create_backend(config)
        made.append(backend)
        backend.start()
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def backend(backend_factory: BackendFactory) -> Backend:
    """One started backend of the kind under test."""
    return backend_factory()
