"""A confined sandbox reset in place: a hostile episode leaves nothing the next one can see.

Under a root driver the reset keeps the sandbox's holder (its namespaces) and
makes it as clean as a new one, or replaces it when it cannot
(:mod:`crabray.backends.local._inplace`). Each test compares what a command
sees in a new sandbox with what it sees after a hostile episode and a reset.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import LocalBackend
from crabray.backends.base import PythonCall
from crabray.backends.local._inplace import CLEARED
from tests.backends.local.test_local_bwrap import _members, _require_bwrap, make_config

# Everything a command can observe of the sandbox's state, but the observer itself (LOOKING).
LOOK = (
    "p=$(ps -eo uid,stat,args --no-headers); echo \"$p\" | grep -v -e LOOKING -e 'ps -eo' | sort; "
    "find /tmp /home/user /dev /dev/shm /dev/mqueue -printf '%p %m %u %y %l\\n' | sort; "
    "ipcs; umask; env | sort; pwd"
)

# A daemon that keeps forking, a stopped process, a zombie's parent, a file and a FIFO in
# every writable directory (a file in /dev/mqueue is a POSIX message queue), a read-only
# tree, a symlink to a host file, and System V shared memory, a message queue, semaphores.
HOSTILE = r"""
setsid sh -c 'while :; do sleep 0.01 & sleep 0.02; done' >/dev/null 2>&1 < /dev/null &
setsid sh -c 'kill -STOP $$; sleep 1' >/dev/null 2>&1 < /dev/null &
setsid sh -c 'sleep 0 & exec sleep 300' >/dev/null 2>&1 < /dev/null &
for d in . $HOME /tmp /dev /dev/shm /dev/mqueue; do
    touch $d/left && mkfifo $d/fifo.left 2>/dev/null
done
mkdir -p /tmp/ro/deep && touch /tmp/ro/deep/f && chmod 0 /tmp/ro/deep /tmp/ro
ln -s /etc/passwd $HOME/link.left
ipcmk -M 4096 && ipcmk -Q && ipcmk -S 2
cd /tmp && umask 0 && export LEFT=1
"""

GUEST_PID = PythonCall(
    action="pid",
    function="pid",
    units=[("pid.py", 1, "import os\ndef pid():\n    return os.getpid()\n")],
    arguments_json="{}",
)


@pytest.fixture
def as_root(tmp_path: Path) -> Iterator[LocalBackend]:
    _require_bwrap()
    if os.geteuid() != 0:
        pytest.skip("only a root driver's sandbox resets in place (run the tests as root)")
    backend = LocalBackend(make_config(tmp_path))
    backend.start()
    yield backend
    backend.close()


def test_writable_places_are_the_ones_reset_clears(as_root: LocalBackend) -> None:
    found = as_root.exec("find / -path /proc -prune -o -type d -writable -print").stdout
    assert sorted(found.split()) == sorted(f"/{path}" for path in CLEARED)


def test_a_hostile_episode_leaves_nothing_after_a_reset_in_place(as_root: LocalBackend) -> None:
    assert as_root.describe()["reset"] == "in place"
    fresh = as_root.exec(LOOK).stdout
    namespace = as_root.describe()["pid_namespace"]
    for episode in range(2):
        done = as_root.exec(HOSTILE)
        assert done.exit_code == 0, done.stderr
        assert as_root.call_python(GUEST_PID) > 1, "the guest runs"
        dirty = as_root.exec(LOOK).stdout
        for trace in ("left", "fifo.left", "sleep 0.02", "Ts ", "<defunct>", "0x", "/tmp/ro"):
            assert trace in dirty, f"the hostile episode should have left {trace!r}"
        as_root.reset()
        assert as_root.describe()["pid_namespace"] == namespace, "reset in place"
        assert as_root.exec(LOOK).stdout == fresh, f"episode {episode} left traces"
        members = _members(f"pid:[{namespace}]")
        guest = as_root._channel.host_pid() if as_root._channel else None
        assert len(members) == 2 and guest in members, f"only pid 1 and a new guest: {members}"


@pytest.mark.parametrize("leave", ["time_wait", "dir_mode", "xattr"])
def test_a_sandbox_that_cannot_be_cleaned_in_place_is_replaced(
    as_root: LocalBackend, leave: str
) -> None:
    """A TCP connection in TIME_WAIT outlives its processes, and a writable directory's mode
    or extended attributes could be set back only by guessing all of them: a new holder."""
    fresh = as_root.exec(LOOK).stdout
    namespace = as_root.describe()["pid_namespace"]
    done = as_root.exec(CANNOT_CLEAN[leave])
    assert done.exit_code == 0, done
    as_root.reset()
    assert as_root.describe()["pid_namespace"] != namespace, "a new holder"
    assert as_root.exec(LOOK).stdout == fresh
    assert as_root.describe()["reset"] == "in place", "the new holder resets in place"


CANNOT_CLEAN = {
    # The client closes first, so its end of the connection waits in TIME_WAIT.
    "time_wait": (
        "python3 -c \"import re, socket; s = socket.create_server(('127.0.0.1', 0)); "
        "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.close(); "
        "a.close(); assert re.search(r'tw [1-9]', open('/proc/net/sockstat').read())\""
    ),
    "dir_mode": "chmod 0755 /home/user/work",
    "xattr": "python3 -c \"import os; os.setxattr('/dev/shm', 'user.left', b'1')\"",
}


def test_the_users_keyrings_are_emptied(as_root: LocalBackend) -> None:
    """They belong to the user namespace, which a reset in place keeps. (``/proc/keys`` lists
    the keyrings of every sandbox of the host user until the kernel collects them, after a
    new holder too, so it is not part of :data:`LOOK`.)"""
    for keyring in (-4, -5):
        assert int(as_root.exec(KEYS.format(call="add", keyring=keyring)).stdout) > 0
        assert int(as_root.exec(KEYS.format(call="find", keyring=keyring)).stdout) > 0
        as_root.reset()
        assert int(as_root.exec(KEYS.format(call="find", keyring=keyring)).stdout) == -1


# add_key (248) a key "left" to a keyring, or find it there (keyctl 250, KEYCTL_SEARCH 10).
KEYS = (
    'python3 -c "import ctypes; libc = ctypes.CDLL(None); '
    "add = lambda: libc.syscall(248, b'user', b'left', b'secret', 6, ctypes.c_int({keyring})); "
    "find = lambda: libc.syscall(250, 10, ctypes.c_int({keyring}), b'user', b'left', 0); "
    'print({call}())"'
)
