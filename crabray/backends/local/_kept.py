"""A confined sandbox's guest kept across in-place resets: proving it is the one started.

A root driver's confined sandbox resets in place (:mod:`crabray.backends.local._inplace`),
and its guest (one ``python3`` inside, :mod:`crabray.backends.guest`) may serve
every episode of that holder instead of one entry program per command. The
guest is started in a clean sandbox, before any agent runs, and seals itself
(non-dumpable); what the agent's processes, running as the same user, can
still do to it is signal it (kill or stop it: the guest is then lost or
found stopped, and dropped), lower its resource limits (``prlimit``: the
guest refuses to serve, see ``same_limits`` in the guest program) and
nothing else: no ptrace, no ``/proc/PID/mem``, ``fd`` or ``environ``.

So a reset keeps the guest only when, from the host, after the guest's own
clean-up (:meth:`crabray.backends.guest.Guest.reset_inside`), :func:`changed`
finds the same process (host pid and start time), still not dumpable (its
``/proc/PID/mem`` belongs to root, not to the sandbox user), traced by no one,
with the resource limits it started with, and :func:`others_left` finds no
other process in the sandbox's pid namespace. Otherwise the guest is killed
and the usual reset runs, then a new guest is started.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Stamp:
    """What the host saw of a guest process right after it started, before any agent ran."""

    host_pid: int
    ns_pid: int
    start_time: str
    """Field 22 of ``/proc/PID/stat``: with the pid, one process for the machine's uptime."""
    limits: str
    """``/proc/PID/limits`` as read then."""


def take(host_pid: int, ns_pid: int) -> Stamp:
    """The :class:`Stamp` of guest ``host_pid`` (``ns_pid`` inside), which must be sealed.

    Raises:
        OSError: The process is gone, or it is not the sealed guest ``ns_pid``.
    """
    stamp = Stamp(host_pid, ns_pid, _start_time(host_pid), _limits(host_pid))
    why = changed(stamp)
    if why is not None:
        raise OSError(f"the guest just started is not as expected: {why}")
    return stamp


def changed(stamp: Stamp) -> str | None:
    """Why the guest process may not be the untouched one of ``stamp``, or None."""
    pid = stamp.host_pid
    try:
        if _start_time(pid) != stamp.start_time:
            return f"pid {pid} is another process now"
        status = Path(f"/proc/{pid}/status").read_text()
        owner = os.stat(f"/proc/{pid}/mem").st_uid
        limits = _limits(pid)
    except OSError as exc:
        return f"the guest process is gone ({exc.strerror or exc})"
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    ns_pids = fields.get("NSpid", "").split()
    if not ns_pids or ns_pids[-1] != str(stamp.ns_pid):
        return f"pid {pid} is not the sandbox's pid {stamp.ns_pid}"
    if owner != 0 or fields.get("Uid", "").split()[:1] == ["0"]:
        return "the guest process is dumpable (its /proc/PID/mem is not root's)"
    if fields.get("TracerPid", "").strip() != "0":
        return "the guest process is traced"
    if fields.get("State", "").split()[:1] in (["T"], ["t"], ["Z"], ["X"]):
        return "the guest process is stopped or dead"
    if limits != stamp.limits:
        return "the guest's resource limits changed"
    return None


def others_left(root_fd: int, ns_pid: int) -> list[str]:
    """Processes of the sandbox other than its pid 1 and the guest (``ns_pid``), read from
    the sandbox's own ``/proc`` through its root."""
    proc = os.open("proc", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
    try:
        names = os.listdir(proc)
    finally:
        os.close(proc)
    return [name for name in names if name.isdigit() and name not in ("1", str(ns_pid))]


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def _limits(pid: int) -> str:
    return Path(f"/proc/{pid}/limits").read_text()
