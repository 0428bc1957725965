"""Resetting a confined sandbox in place: the same holder, nothing left of the episode before.

A new holder costs a ``bwrap`` start, a stage program and mounts on every
reset. Reusing the running one is as clean only if nothing the sandbox user
could change survives, so a reset in place is a check as much as a wipe, and
any doubt means a new holder:

1. :data:`RESET_PROGRAM` runs inside, as the sandbox user, through the usual
   entry: ``kill(-1, SIGKILL)`` until no process but itself and pid 1 is left
   (the kernel sends a signal to every process of the pid namespace at once,
   processes forking meanwhile included, and never to pid 1 from inside;
   pid 1 ignores ``SIGCHLD``, so no zombie stays), then it removes every System V
   IPC object of the sandbox's IPC namespace, empties the sandbox user's keyrings
   (they belong to its user namespace), and refuses (exit 3) when, with a
   network namespace of its own, any socket is left in it (a TCP connection
   in ``TIME_WAIT`` outlives its process).
2. From the host, through the sandbox's root (:attr:`Holder.root_fd
   <crabray.backends.local._bwrap.Holder.root_fd>`), every directory the
   sandbox user can write (:data:`CLEARED`) loses what a new sandbox does not
   have (POSIX message queues are files of ``/dev/mqueue``), and what it
   has must look as it did when the holder started (:func:`record`): type,
   mode, owner, device, symlink target and extended attributes. First of
   all, the host's ``ROOT/work``, ``home`` and ``tmp`` must still be the
   directories the holder shows.

Only for a root driver: the sandbox user is then another host user than the
driver's, so the wipe runs with every permission while nothing of the sandbox
runs any more. Left as it was: the pid counter (the next command's pid is
not 2), and times of the directories.
"""

from __future__ import annotations

import contextlib
import os
import platform
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crabray.backends.confinement import HOME_DIR, TMP_DIR, WORK_DIR
from crabray.backends.local._enter import entry_env
from crabray.backends.wipe import remove_entry

CLEARED = ("tmp", "home/user", "home/user/work", "dev", "dev/shm", "dev/mqueue", "dev/pts")
"""Directories (from the sandbox's ``/``) the sandbox user can write: all of them, as ``find /
-writable`` shows inside (``/dev/pts`` holds only the terminals of live processes, but its
mode is the sandbox user's to change)."""

BOUND = {"home/user/work": WORK_DIR, "home/user": HOME_DIR, "tmp": TMP_DIR}
"""Sandbox directories of :data:`CLEARED` that are the host's ``ROOT/NAME``, by name."""

RESET_TIMEOUT_SEC = 10.0
"""How long the program may take; the processes it kills must be gone within 5 s."""

KEYCTL = {"x86_64": 250, "aarch64": 219, "arm64": 219, "riscv64": 219}
"""The ``keyctl`` system call's number on each machine that
:data:`crabray.backends.local._enter.SYSCALLS` knows."""

# Arguments: OWN_NETWORK (1 or 0), KEYCTL (its system call number). Runs as the sandbox user
# inside the sandbox.
RESET_PROGRAM = r"""
my ($own_net, $KEYCTL) = @ARGV;
$KEYCTL += 0;
sub fail { print STDERR "$_[0]\n"; exit 3; }  # not clean: a new holder
my $deadline = time() + 5;
for (;;) {
    kill('KILL', -1);
    opendir(my $proc, '/proc') or fail("cannot list /proc: $!");
    my @left = grep { /^[0-9]+$/ && $_ != 1 && $_ != $$ } readdir($proc);
    last if !@left;
    time() < $deadline or fail("processes @left outlived SIGKILL");
    select(undef, undef, undef, 0.001);
}
for my $kind ('shm', 'msg', 'sem') {
    open(my $objects, '<', "/proc/sysvipc/$kind") or fail("cannot read /proc/sysvipc/$kind: $!");
    my $header = <$objects>;
    while (my $line = <$objects>) {
        my (undef, $id) = split(' ', $line);
        my $removed = $kind eq 'shm' ? shmctl($id, 0, 0)
            : $kind eq 'msg' ? msgctl($id, 0, 0) : semctl($id, 0, 0, 0);
        $removed or fail("cannot remove System V $kind $id: $!");
    }
}
# KEYCTL_CLEAR (7) of the user keyring (-4) and the user session keyring (-5): they belong to
# the user namespace, which stays.
for my $keyring (-4, -5) {
    syscall($KEYCTL, 7, $keyring) == 0 or fail("cannot clear keyring $keyring: $!");
}
exit 0 if !$own_net;
# Sockets still in this network namespace ("inuse": an orphaned connection closing; "tw": in
# TIME_WAIT), counted per namespace without walking the host's whole connection table.
for my $table ('sockstat', 'sockstat6') {
    open(my $counts, '<', "/proc/net/$table") or fail("cannot read /proc/net/$table: $!");
    while (my $line = <$counts>) {
        next if $line =~ /^(sockets|FRAG)/;
        $line =~ /\b(inuse|tw) [1-9]/ and fail("sockets outlived their processes: $line");
    }
}
for my $table ('unix', 'packet') {
    open(my $sockets, '<', "/proc/net/$table") or fail("cannot read /proc/net/$table: $!");
    my @lines = <$sockets>;
    @lines <= 1 or fail("sockets outlived their processes (/proc/net/$table)");
}
exit 0;
"""

Signature = tuple[int, int, int, int, str, tuple[str, ...]]
"""What :func:`record` keeps of one path: mode, uid, gid, device, symlink target, xattr names."""


@dataclass(frozen=True)
class Fresh:
    """How the writable places of a new sandbox look: :data:`CLEARED` and their entries."""

    signatures: dict[str, Signature]


def record(root_fd: int) -> Fresh:
    """What a sandbox whose holder just started has in :data:`CLEARED` (before any command).

    Raises:
        OSError: A directory of :data:`CLEARED` cannot be read.
    """
    signatures: dict[str, Signature] = {}
    for directory in CLEARED:
        with _opened(root_fd, directory) as fd:
            signatures[directory] = _signature(fd, None)
            for entry in os.scandir(fd):
                signatures[f"{directory}/{entry.name}"] = _signature(fd, entry.name)
    return Fresh(signatures)


def reset_in_place(
    argv: list[str] | None, root_fd: int, fresh: Fresh, host_root: Path
) -> str | None:
    """Make a running sandbox as clean as a new one; None when done, else why it cannot be.

    Args:
        argv: The entry's command line for the program (:meth:`Holder.command
            <crabray.backends.local._bwrap.Holder.command>` of :func:`reset_command`), or
            None when the sandbox's kept guest already did its work (the guest's ``reset``).
        root_fd: The sandbox's ``/``.
        fresh: What the sandbox looked like when its holder started.
        host_root: The sandbox directory on the host, whose directories the holder shows.

    Raises:
        OSError: The host failed to remove a file (the caller must not reuse the sandbox).
    """
    moved = _moved(root_fd, host_root)
    if moved is not None:
        return moved
    if argv is not None:
        killed = _run_program(argv)
        if killed is not None:
            return killed
    for directory in CLEARED:
        with _opened(root_fd, directory) as fd:
            changed = _clear(fd, directory, fresh)
        if changed is not None:
            return changed
    return None


def _run_program(argv: list[str]) -> str | None:
    """Run :data:`RESET_PROGRAM` through the entry; why it failed, or None."""
    done = subprocess.run(
        argv,
        capture_output=True,
        timeout=RESET_TIMEOUT_SEC,
        check=False,
        env=entry_env({"PATH": "/usr/bin:/bin"}),
        cwd="/",
        start_new_session=True,
    )
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
        return f"the reset program in the sandbox: {why}"
    return None


def _moved(root_fd: int, host_root: Path) -> str | None:
    """Why the host's sandbox directories are no longer the ones the holder shows, or None
    (something on the host moved or replaced them: the sandbox must not be reused as it is)."""
    for inside, name in BOUND.items():
        try:
            host = os.lstat(host_root / name)
        except OSError as exc:
            return f"{host_root / name}: {exc.strerror}"
        with _opened(root_fd, inside) as fd:
            seen = os.fstat(fd)
        if (host.st_dev, host.st_ino) != (seen.st_dev, seen.st_ino):
            return f"{host_root / name} is no longer the directory the sandbox shows at /{inside}"
    return None


def reset_command(*, own_network: bool) -> list[str]:
    """The command, run inside the sandbox, that kills its processes and IPC objects (the
    entry evaluates it: no second ``perl``)."""
    keyctl = str(KEYCTL[platform.machine()])
    return ["crabray:perl", RESET_PROGRAM, "1" if own_network else "0", keyctl]


def _clear(fd: int, directory: str, fresh: Fresh) -> str | None:
    """Remove from ``directory`` what a new sandbox does not have; why not clean, or None."""
    if _signature(fd, None) != fresh.signatures.get(directory):
        return f"/{directory} changed (mode, owner or extended attributes)"
    for entry in os.scandir(fd):
        path = f"{directory}/{entry.name}"
        kept = fresh.signatures.get(path)
        if kept is not None:
            if _signature(fd, entry.name) != kept:
                return f"/{path} changed"
        else:
            remove_entry(fd, entry.name)
    return None


def _signature(fd: int, name: str | None) -> Signature:
    """The :data:`Signature` of entry ``name`` of directory ``fd`` (of ``fd`` itself if None)."""
    seen = os.stat(fd) if name is None else os.stat(name, dir_fd=fd, follow_symlinks=False)
    target = os.readlink(name, dir_fd=fd) if name and stat.S_ISLNK(seen.st_mode) else ""
    attributes = tuple(sorted(os.listxattr(fd))) if name is None else ()
    return seen.st_mode, seen.st_uid, seen.st_gid, seen.st_rdev, target, attributes


@contextlib.contextmanager
def _opened(root_fd: int, path: str) -> Iterator[int]:
    """A descriptor of sandbox directory ``path``, opened one component at a time, no symlink."""
    fd = os.dup(root_fd)
    try:
        for part in path.split("/"):
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)
