"""The guest a root driver's confined sandbox keeps across resets, attacked by its agent.

The guest (one ``python3`` in the sandbox) is started in a clean sandbox before
anything else runs there, serves every command of every episode of that holder,
and is kept by an in-place reset only when the host can show it is the same
untouched process (:mod:`crabray.backends.local._kept`). The agent's commands run as
the same user as the guest: each test is an attack of theirs on it, which must
neither reach the guest nor survive into the next episode, and whose loss of the
guest is told apart from the harness's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.backends import LocalBackend
from crabray.backends.base import PythonCall
from tests.backends.local.test_local_bwrap import _members, _require_bwrap, make_config
from tests.integrity.battery import KILL_GUEST

GUEST_PID = PythonCall(
    action="pid",
    function="pid",
    units=[("pid.py", 1, "import os\ndef pid():\n    return os.getpid()\n")],
    arguments_json="{}",
)

# ptrace(PTRACE_ATTACH) and ptrace(PTRACE_SEIZE) of the guest (pid {pid} inside): the errno.
PTRACE = (
    "perl -e 'for my $op (16, 0x4206) {{ my $r = syscall(101, $op, {pid}, 0, 0); "
    'print "$op:$r:", $!+0, "\\n"; }}\''
)

# process_vm_writev (311 on x86_64) into the guest: one byte at its first mapping.
VM_WRITE = (
    'python3 -c "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); '
    "b = ctypes.create_string_buffer(b'x'); "
    "iov = (ctypes.c_void_p * 2)(ctypes.cast(b, ctypes.c_void_p), 1); "
    "remote = (ctypes.c_void_p * 2)(0x400000, 1); "
    "r = libc.syscall(311, {pid}, iov, 1, remote, 1, 0); "
    'print(r, ctypes.get_errno())"'
)


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[LocalBackend]:
    _require_bwrap()
    if os.geteuid() != 0:
        pytest.skip("only a root driver's sandbox keeps its guest (run the tests as root)")
    backend = LocalBackend(make_config(tmp_path))
    backend.start()
    yield backend
    backend.close()


def _guest(backend: LocalBackend) -> int | None:
    """The host pid of the running guest, or None."""
    channel = backend._channel
    return channel.host_pid() if channel is not None and backend._guest.running else None


def _ppid(backend: LocalBackend) -> int:
    """The parent of a command inside the sandbox: the guest's pid there, 0 through the entry."""
    return int(backend.exec("echo $PPID").stdout)


def test_commands_run_through_one_guest_kept_across_resets(kept: LocalBackend) -> None:
    first = _guest(kept)
    assert first is not None and _ppid(kept) > 1, "a command's parent is the guest"
    for _ in range(3):
        kept.reset()
        assert _guest(kept) == first, "the same guest after a reset in place"
        assert kept.grader_distrust(ran_commands=True) is None
    namespace = kept.describe()["pid_namespace"]
    assert sorted(_members(f"pid:[{namespace}]"))[1:] == [first]


def test_a_command_inherits_nothing_of_the_guest(kept: LocalBackend) -> None:
    """Its descriptors are /dev/null and its own output pipes; the guest's own are closed
    to it: no fd, environ or mem of the guest can be opened, so its request pipe cannot be
    written nor its answers forged, and the guest is kept."""
    first = _guest(kept)
    fds = kept.exec("cd /proc/self/fd && for f in *; do echo $f $(readlink $f); done").stdout
    lines = fds.splitlines()
    assert lines[0] == "0 /dev/null" and [line.split()[0] for line in lines] == ["0", "1", "2", "3"]
    for probe in ("ls /proc/$PPID/fd", "readlink /proc/$PPID/fd/0", "cat /proc/$PPID/environ"):
        done = kept.exec(probe)
        assert done.exit_code != 0 and not done.stdout, (probe, done)
    done = kept.exec("echo forged > /proc/$PPID/fd/1; echo forged > /proc/$PPID/mem")
    assert done.exit_code != 0 and "Permission denied" in done.stderr
    kept.reset()
    assert _guest(kept) == first


def test_the_guest_cannot_be_traced_or_written(kept: LocalBackend) -> None:
    first = _guest(kept)
    pid = kept._channel.pid if kept._channel else None
    traced = kept.exec(PTRACE.format(pid=pid), timeout_sec=30)
    assert traced.stdout.split() == ["16:-1:1", "16902:-1:1"], traced  # EPERM both
    written = kept.exec(VM_WRITE.format(pid=pid), timeout_sec=30)
    assert written.stdout.split() == ["-1", "1"], written  # EPERM
    kept.reset()
    assert _guest(kept) == first, "failed attempts leave the guest as it was"


def test_a_guest_killed_by_a_command_is_not_restarted_and_grading_stays_trusted(
    kept: LocalBackend,
) -> None:
    """The agent kills the guest, then writes the answer the grader looks for: the
    grader's command runs through the entry program (no new guest, which the agent could
    have reached), so its verdict is trusted; the next episode gets a new trusted guest."""
    first = _guest(kept)
    kept.agent_begins()
    assert kept.exec(KILL_GUEST).exit_code == 0
    assert not kept._guest.running, "the guest is dropped"
    kept.exec("echo 42 > answer.txt")
    assert _ppid(kept) == 0, "commands now start through the entry"
    assert kept.exec(["grep", "-qx", "42", "answer.txt"]).exit_code == 0
    assert kept.grader_distrust(ran_commands=True) is None and not kept.grader_replaced()
    kept.reset()
    second = _guest(kept)
    assert second is not None and second != first
    assert kept.exec(["test", "-e", "answer.txt"]).exit_code == 1, "the answer is gone"
    assert kept._guest.trusted and _ppid(kept) > 1


def test_kill_minus_one_runs_again_through_the_entry(kept: LocalBackend) -> None:
    """``kill -9 -1`` kills the guest that runs it: the command runs again through the
    entry (as a guest's lost request is sent once more), where it finds nothing left to
    kill, as it would have without a guest."""
    done = kept.exec("kill -9 -1; echo survived")
    assert done.exit_code == 0 and done.stdout == "survived\n"
    assert kept.exec("echo ok").stdout == "ok\n"
    kept.reset()
    assert kept._guest.trusted and _ppid(kept) > 1


def test_a_grader_call_after_the_guest_was_killed_is_the_agents_failure(
    kept: LocalBackend,
) -> None:
    """A plain-Python grader needs a guest: one started after the agent killed the first
    is not trusted, and the episode counts as the agent's broken grading path."""
    kept.agent_begins()
    kept.exec(KILL_GUEST)
    assert kept.call_python(GUEST_PID) > 1
    assert kept.grader_distrust(ran_commands=False) is not None and kept.grader_replaced()
    kept.reset()
    assert kept.grader_distrust(ran_commands=False) is None and not kept.grader_replaced()


def test_a_guest_whose_limits_were_lowered_serves_nothing_more(kept: LocalBackend) -> None:
    """``prlimit`` on the guest (same user) would be inherited by the grader's commands:
    the guest refuses, is dropped, and the next episode gets a new one."""
    first = _guest(kept)
    limits = kept.exec("ulimit -n -u -f").stdout
    done = kept.exec("prlimit --pid $PPID --nofile=8:8 --nproc=1:1 --fsize=0:0")
    assert done.exit_code == 0, done
    assert _ppid(kept) == 0 and kept.exec("ulimit -n -u -f").stdout == limits
    assert kept.grader_distrust(ran_commands=True) is None
    kept.reset()
    second = _guest(kept)
    assert second is not None and second != first
    assert kept.exec("ulimit -n -u -f").stdout == limits


def test_a_stopped_guest_is_dropped(kept: LocalBackend) -> None:
    first = _guest(kept)
    stop = KILL_GUEST.replace("kill -9", "kill -STOP")
    assert kept.exec(stop, timeout_sec=60).exit_code == 0
    assert not kept._guest.running and _ppid(kept) == 0
    kept.reset()
    second = _guest(kept)
    assert second is not None and second != first and _ppid(kept) > 1


def test_a_process_left_behind_does_not_reach_the_next_episode(kept: LocalBackend) -> None:
    """A daemon that keeps writing the answer (and keeps forking) dies at the reset; the
    next episode's grader sees no answer, and only pid 1 and the guest are left."""
    first = _guest(kept)
    daemon = (
        "setsid sh -c 'while :; do echo 42 > /home/user/work/answer.txt; sleep 0.005 & "
        "sleep 0.01; done' >/dev/null 2>&1 < /dev/null &"
    )
    kept.exec(daemon)
    kept.reset()
    assert _guest(kept) == first
    namespace = kept.describe()["pid_namespace"]
    assert len(_members(f"pid:[{namespace}]")) == 2
    assert kept.exec("sleep 0.1; test -e answer.txt").exit_code == 1


def test_modules_planted_for_the_guest_are_never_imported(kept: LocalBackend) -> None:
    """Modules the guest uses at a reset (ctypes, resource) and others, planted in every
    directory the agent writes: the guest imports only from the read-only system."""
    first = _guest(kept)
    plant = (
        "for d in . $HOME /tmp; do for m in ctypes resource subprocess json os signal; do "
        'echo \'open("/tmp/imported", "w").write("1"); raise SystemExit(3)\' > $d/$m.py; '
        "done; done"
    )
    assert kept.exec(plant).exit_code == 0
    kept.reset()
    assert _guest(kept) == first
    assert kept.exec(["test", "-e", "/tmp/imported"]).exit_code == 1


def test_a_guest_that_ran_python_is_not_kept(kept: LocalBackend) -> None:
    """A plain-Python action runs inside the guest process: it is then no longer known to
    be the process started, and the reset replaces it."""
    first = _guest(kept)
    assert kept.call_python(GUEST_PID) > 1
    kept.reset()
    second = _guest(kept)
    assert second is not None and second != first and kept._guest.trusted


def test_a_flood_of_output_is_cut_and_the_guest_serves_on(kept: LocalBackend) -> None:
    first = _guest(kept)
    done = kept.exec("head -c 30000000 /dev/zero | tr '\\0' x; head -c 30000000 /dev/zero >&2")
    assert done.exit_code == 0 and 0 < len(done.stdout) < 30_000_000
    assert kept.exec("echo ok").stdout == "ok\n"
    kept.reset()
    assert _guest(kept) == first
