"""Bounds on a local sandbox as a whole: its memory, its processes, its disk.

Under a root driver each sandbox directory gets

- a cgroup of its own (cgroup v2: ``/sys/fs/cgroup/crabray/<sandbox>`` with
  ``memory.max``, ``memory.swap.max`` and ``pids.max``; a v1 hierarchy: the same
  name under the ``memory`` and ``pids`` controllers, ``memory.limit_in_bytes`` and
  ``pids.max``), which every process of the sandbox joins as it starts
  (:func:`join_prefix`: the holder, each command, the guest), so all of them
  together stay within ``max_memory_mb`` and ``max_pids``; past the memory the
  kernel's OOM killer kills a process of that cgroup, never the worker;
- a size-limited ``tmpfs`` mounted on the sandbox directory (``disk_mb``), so
  ``work``, ``home`` and ``tmp`` together hold at most that much and a full disk is
  the sandbox's own ``ENOSPC``, never the host's. Its pages are charged to the
  cgroup of the process that writes them, so what the sandbox writes also counts
  against its memory.

Without root (or where the kernel refuses: a container without the cgroup
files or ``CAP_SYS_ADMIN``) there is no cgroup and no mount; a WARNING says so
once per process, and ``memory_mb`` (``RLIMIT_AS`` of each process) is then the
only bound that applies. Removing a sandbox (:func:`release`) kills what is
left in its cgroup, unmounts its disk and removes the cgroup.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

CGROUP_FS = Path("/sys/fs/cgroup")
"""Where the cgroup file systems are mounted."""

GROUP = "crabray"
"""The cgroup (in each hierarchy) under which every sandbox's cgroup is made."""

_KILL_PASSES = 100

_warned: set[str] = set()
_warn_lock = threading.Lock()


@dataclass(frozen=True)
class Controllers:
    """Where a sandbox's cgroup goes: the parent directory of each controller it uses.

    Attributes:
        memory: Parent directory for the memory controller.
        pids: Parent directory for the pids controller (the same as ``memory`` on v2).
        v2: Whether this is the unified hierarchy (``memory.max``) or v1.
    """

    memory: Path
    pids: Path
    v2: bool

    def dirs(self, name: str) -> list[Path]:
        """The cgroup directories of sandbox ``name`` (one on v2, two on v1)."""
        if self.v2:
            return [self.memory / name]
        return [self.memory / name, self.pids / name]


def _warn_once(key: str, message: str, *args: object) -> None:
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message, *args)


@functools.cache
def controllers() -> Controllers | None:
    """The cgroup parents this host lets a root driver use; None without root or cgroups.

    v2 when ``/sys/fs/cgroup`` is the unified hierarchy and the memory and pids
    controllers can be enabled for ``crabray/``'s children; else v1 when both
    controllers have a writable hierarchy of their own.
    """
    if os.geteuid() != 0:
        _warn_once(
            "root",
            "local sandboxes get no cgroup (memory, processes) and no disk of their own: the "
            "driver is not root; only backend_settings.memory_mb (each process's address "
            "space) bounds them",
        )
        return None
    found = _find()
    if found is None:
        return None
    why = _probe(found)
    if why is not None:
        _warn_once("probe", "local sandboxes get no cgroup: a process cannot join one: %s", why)
        return None
    return found


def _find() -> Controllers | None:
    if (CGROUP_FS / "cgroup.controllers").is_file():
        return _v2()
    memory, pids = CGROUP_FS / "memory", CGROUP_FS / "pids"
    if (memory / "memory.limit_in_bytes").is_file() and (pids / "cgroup.procs").is_file():
        try:
            for parent in (memory / GROUP, pids / GROUP):
                parent.mkdir(exist_ok=True)
        except OSError as exc:
            _warn_once("v1", "local sandboxes get no cgroup: cannot make %s: %s", GROUP, exc)
            return None
        return Controllers(memory / GROUP, pids / GROUP, v2=False)
    _warn_once("none", "local sandboxes get no cgroup: no memory and pids controllers here")
    return None


def _probe(found: Controllers) -> str | None:
    """Why a process cannot join a cgroup made here (a container's cgroup namespace may
    refuse), or None: checked once, so that no sandbox's every command fails on it."""
    name = f"probe-{os.getpid()}"
    try:
        make_cgroup(found, name, None, None)
        done = subprocess.run(
            [*join_prefix(found, name), "true"], capture_output=True, text=True, check=False
        )
        return None if done.returncode == 0 else done.stderr.strip() or f"exit {done.returncode}"
    except OSError as exc:
        return str(exc)
    finally:
        with contextlib.suppress(OSError):
            remove_cgroup(found, name)


def _v2() -> Controllers | None:
    parent = CGROUP_FS / GROUP
    try:
        available = (CGROUP_FS / "cgroup.controllers").read_text().split()
        if not {"memory", "pids"} <= set(available):
            raise OSError(f"controllers {available} lack memory or pids")
        (CGROUP_FS / "cgroup.subtree_control").write_text("+memory +pids")
        parent.mkdir(exist_ok=True)
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError as exc:
        _warn_once("v2", "local sandboxes get no cgroup: cannot delegate %s: %s", parent, exc)
        return None
    return Controllers(parent, parent, v2=True)


def make_cgroup(found: Controllers, name: str, memory_mb: int | None, pids: int | None) -> None:
    """Make sandbox ``name``'s cgroup with its limits (None: that limit is not set).

    Raises:
        OSError: The cgroup or a limit could not be written.
    """
    for directory in found.dirs(name):
        directory.mkdir(exist_ok=True)
    memory_dir, pids_dir = found.dirs(name)[0], found.dirs(name)[-1]
    if memory_mb is not None:
        limit = str(memory_mb * 2**20)
        if found.v2:
            (memory_dir / "memory.max").write_text(limit)
            swap = memory_dir / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
        else:
            (memory_dir / "memory.limit_in_bytes").write_text(limit)
            swap = memory_dir / "memory.memsw.limit_in_bytes"
            if swap.exists():
                with contextlib.suppress(OSError):  # only with swap accounting on
                    swap.write_text(limit)
    if pids is not None:
        (pids_dir / "pids.max").write_text(str(pids))


def join_prefix(found: Controllers, name: str) -> list[str]:
    """A command prefix that moves the process into sandbox ``name``'s cgroup, then execs.

    What it starts inherits the cgroup, and nothing inside the sandbox may move
    itself out (the cgroup files belong to the host's root).
    """
    script = " && ".join(
        f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))}" for d in found.dirs(name)
    )
    return ["/bin/sh", "-c", f'{script} && exec "$@"', "crabray-cgroup"]


def cgroup_memory_events(found: Controllers, name: str) -> int:
    """How many times the sandbox hit its memory limit (OOM kills under v2, fails under v1)."""
    memory_dir = found.dirs(name)[0]
    try:
        if found.v2:
            for line in (memory_dir / "memory.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
            return 0
        return int((memory_dir / "memory.failcnt").read_text())
    except (OSError, ValueError):
        return 0


def remove_cgroup(found: Controllers, name: str) -> None:
    """Kill every process left in sandbox ``name``'s cgroup, then remove it (if it exists).

    Raises:
        OSError: A process outlived ``SIGKILL`` or the cgroup could not be removed.
    """
    for directory in found.dirs(name):
        if not directory.is_dir():
            continue
        for _ in range(_KILL_PASSES):
            try:
                pids = (directory / "cgroup.procs").read_text().split()
            except FileNotFoundError:
                break
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.01)
        with contextlib.suppress(FileNotFoundError):
            directory.rmdir()


def mount_disk(directory: Path, disk_mb: int) -> bool:
    """Mount a tmpfs of ``disk_mb`` MiB on ``directory`` (root only); whether it was mounted.

    The mount keeps the directory's mode and owner.
    """
    if os.geteuid() != 0:
        return False
    info = directory.stat()
    options = f"size={disk_mb}m,mode={info.st_mode & 0o7777:o},uid={info.st_uid},gid={info.st_gid}"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"{options},nosuid,nodev", "crabray-sandbox", directory],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        _warn_once(
            "mount",
            "local sandboxes get no disk of their own (disk_mb): mount failed: %s",
            done.stderr.strip(),
        )
        return False
    return True


def unmount_disk(directory: Path) -> None:
    """Detach the tmpfs on ``directory`` if one is mounted there (its files go with it).

    Raises:
        OSError: ``umount`` failed on a mounted directory.
    """
    if not os.path.ismount(directory):
        return
    done = subprocess.run(
        ["umount", "--lazy", directory], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise OSError(f"cannot unmount the sandbox disk {directory}: {done.stderr.strip()}")


def release(directory: Path) -> None:
    """Free what :func:`make_cgroup` and :func:`mount_disk` made for sandbox ``directory``.

    Raises:
        OSError: A process outlived ``SIGKILL``, or the disk could not be unmounted.
    """
    found = controllers() if os.geteuid() == 0 else None
    if found is not None:
        remove_cgroup(found, directory.name)
    unmount_disk(directory)
