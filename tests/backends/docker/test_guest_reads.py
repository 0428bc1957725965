"""``get_file`` through the guest answers exactly as the archive API does, on every kind of path.

On an image with python3 the docker backend reads files through the
container's guest when it runs, and sends what the guest may not answer
alike (symlinks, files its user may not read, special and large files) to
the archive API. Each case here is read both ways in the same container of
``crabray/debian``, running as its unprivileged ``user``, and must give the
same bytes or the same error.
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from crabray.backends import Backend, create_backend
from crabray.backends.base import MAX_FILE_BYTES
from crabray.backends.docker._archive import read_archive
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import CrabrayError
from tests.backends.docker.dockerd import env_image_missing

BIG = 9 * 1024 * 1024 + 1
"""Past the guest's read limit: such a file streams through the archive API."""

PATHS = [
    "f",
    "empty",
    "big",
    "missing",
    "d",
    "d/../f",
    "f/inside-a-file",
    "no-dir/f",
    "rel-link",
    "abs-link",
    "dir-link/g",
    "dir-link",
    "dangling",
    "loop1",
    "fifo",
    "root-only",
    "/etc/shadow",
]
"""Relative to the scratch directory the setup script makes, or absolute."""

SETUP = f"""
set -e
mkdir -p /tmp/t && cd /tmp/t
printf 'hello' > f
: > empty
head -c {BIG} /dev/zero > big
mkdir d && printf 'in d' > d/g
ln -s f rel-link && ln -s /etc/hostname abs-link && ln -s d dir-link
ln -s nowhere dangling && ln -s loop2 loop1 && ln -s loop1 loop2
mkfifo fifo
printf 'secret' > root-only && chmod 000 root-only
"""


@pytest.fixture
def debian_user() -> Iterator[Backend]:
    """A started sandbox of ``crabray/debian`` whose commands run as ``user`` (uid 1000)."""
    missing = env_image_missing("debian")
    if missing:
        pytest.skip(missing)
    config = EnvironmentConfig(
        name="reads",
        backend="docker",
        backend_settings={"image": "crabray/debian:latest", "user": "user", "workdir": "/tmp"},
    )
    backend = create_backend(config)
    backend.start()
    yield backend
    backend.close()


def _outcome(read: Any) -> tuple[str, object]:
    try:
        return "bytes", read()
    except CrabrayError as exc:
        return type(exc).__name__, str(exc)


def test_guest_reads_answer_like_the_archive_api(debian_user: Backend) -> None:
    import docker

    result = debian_user.exec(SETUP, timeout_sec=60)
    assert result.exit_code == 0, result.stderr
    container = debian_user.describe()["container"]
    client = docker.from_env()
    try:
        for name in PATHS:
            path = posixpath.join("/tmp/t", name)
            target = posixpath.normpath(path)
            got = _outcome(lambda path=path: debian_user.get_file(path))
            want = _outcome(
                lambda path=path, target=target: read_archive(
                    client.api, container, path, target, MAX_FILE_BYTES
                )
            )
            assert got == want, name
    finally:
        client.close()
    assert _outcome(lambda: debian_user.get_file("/tmp/t/f")) == ("bytes", b"hello")
    assert debian_user.get_file("/tmp/t/big") == b"\0" * BIG
    assert b"root:" in debian_user.get_file("/etc/shadow")  # the archive API reads as root


def test_a_read_does_not_wait_behind_a_long_command(debian_user: Backend) -> None:
    import docker

    debian_user.put_file("/tmp/note.txt", b"readable meanwhile")
    command = threading.Thread(target=debian_user.exec, args=("sleep 120",), daemon=True)
    command.start()
    time.sleep(0.5)  # the command holds the guest (were it not yet, the read takes the guest)
    client = docker.from_env()
    try:
        assert debian_user.get_file("/tmp/note.txt") == b"readable meanwhile"
        assert command.is_alive(), "the read waited for the command to end"
        container = client.containers.get(debian_user.describe()["container"])
        container.exec_run(["sh", "-c", KILL_SLEEPS])
    finally:
        client.close()
    command.join(timeout=60)


KILL_SLEEPS = 'for p in /proc/[0-9]*; do grep -qa "^sleep" "$p/cmdline" && kill "${p#/proc/}"; done'
"""Ends the test's ``sleep`` from outside the guest (the engine's exec, as root)."""
