"""The CPU of every process a measurement starts, counted by a cgroup made for it.

``resource.getrusage(RUSAGE_CHILDREN)`` counts only the processes a parent
waited for. A ``crabray run`` misses most of its own CPU that way: Ray's
daemons and actor workers, and the sandboxes' processes under them, are not
reaped by the driver (measured: 4 CPU-s by rusage against 13 by a cgroup for
the same 300-task run). A cgroup counts every process started inside it,
however it ends. Making one needs root (cgroup v1 ``cpuacct`` or v2); the
bench scripts fall back to rusage without it and say so in their tables.

A sibling module of the bench scripts, imported by them (``scripts/`` is the
first entry of ``sys.path`` when one of them runs).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTROLLERS = (
    (Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"),
    (Path("/sys/fs/cgroup/unified"), "cpu.stat"),
    (Path("/sys/fs/cgroup"), "cpu.stat"),
)
"""Where a cgroup that counts CPU can be made, and the file that holds its usage."""

LINGER_SEC = 15.0
"""How long processes may outlive the command they came from before they are killed."""


class CpuGroup:
    """A new cgroup for one measurement: what runs inside it counts, whatever its parent.

    Use :meth:`make`, run the command through :meth:`wrap`, then
    :meth:`finish` it: it waits for any process left inside, and returns the
    CPU of all of them once the cgroup is removed.
    """

    def __init__(self, usage: Path) -> None:
        self.usage = usage
        """The file that holds the cgroup's CPU usage (a child may read it too)."""
        self.lingered = 0
        """Processes still inside when :meth:`finish` gave up waiting (and killed them)."""

    @classmethod
    def make(cls) -> CpuGroup | None:
        """A new empty cgroup, or None where none can be made (not root, no controller)."""
        for parent, name in CONTROLLERS:
            if not (parent / name).exists() or not os.access(parent, os.W_OK):
                continue
            try:
                group = Path(tempfile.mkdtemp(prefix="crabray-bench-", dir=parent))
            except OSError:
                continue
            return cls(group / name)
        return None

    @classmethod
    def possible(cls) -> bool:
        """Whether a cgroup can be made here: the tables say what their CPU counts."""
        group = cls.make()
        if group is None:
            return False
        group.finish()
        return True

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` run so that it joins the cgroup before it starts (a shell that execs it)."""
        procs = self.usage.parent / "cgroup.procs"
        return ["/bin/sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "bench", *command]

    def seconds(self) -> float:
        """CPU seconds (user and system) of every process that has run in the cgroup so far."""
        text = self.usage.read_text()
        if self.usage.name == "cpu.stat":
            return int(text.split("usage_usec")[1].split()[0]) / 1e6
        return int(text) / 1e9

    def finish(self) -> float:
        """The CPU seconds of every process that ran inside, once none is left; removes the cgroup.

        Processes still inside ``LINGER_SEC`` after the command ended are
        killed and counted in :attr:`lingered` (a ``crabray run`` should leave
        none: its Ray instance stops with it).
        """
        deadline = time.monotonic() + LINGER_SEC
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = self.pids()
        self.lingered = len(left)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while self.pids():
            time.sleep(0.05)
        spent = self.seconds()
        self.usage.parent.rmdir()
        return spent

    def pids(self) -> list[int]:
        """The processes inside now."""
        return [int(line) for line in (self.usage.parent / "cgroup.procs").read_text().split()]


def run_in(
    group: CpuGroup | None, command: list[str], timeout: float | None = None, **options: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in ``group`` if there is one; its output captured, as ``subprocess.run``.

    The output goes to files, not pipes: a process the command leaves behind
    (a Ray daemon) would hold a pipe open, and reading it to its end would wait
    for that process instead of the command. After ``timeout`` seconds the
    command is killed and its result says so (return code -9); what it left
    inside the group is then killed by :meth:`CpuGroup.finish`.
    """
    argv = group.wrap(command) if group is not None else command
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, text=True, **options)
        try:
            returncode = process.wait(timeout)
            late = ""
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = process.wait()
            late = f"\nkilled: still running after {timeout:.0f} s"
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, returncode, out.read(), err.read() + late)


TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Seen:
    """A process of the cgroup as last sampled."""

    ppid: int
    name: str
    """Its command line as it last showed it (Ray's workers rename themselves ``ray::...``)."""
    own: float
    """CPU seconds it used itself."""
    reaped: float
    """CPU seconds of its children that it waited for (the kernel adds them on reaping)."""
    tick: int
    """The sampling round it was last seen in."""


class Sampler:
    """Where a cgroup's CPU goes, process by process: ``/proc`` of each, sampled while it runs.

    Every ``interval`` each process inside is read again, and its last figures
    are kept. A process too short-lived to be sampled (a sandbox's command, a
    few milliseconds) still counts: its CPU lands in its parent's ``reaped``
    figure when the parent waits for it. A sampled child's own figures are
    taken out of its parent's, so nothing is counted twice; what a child
    used after its last sample stays with its parent, and what no sampled
    process reaped is what :meth:`shares` leaves to the cgroup's total.
    """

    def __init__(self, group: CpuGroup, interval: float = 0.1) -> None:
        self.group = group
        self.interval = interval
        self.seen: dict[int, Seen] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(self.interval):
            ticks += 1
            for pid in self.group.pids():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    seen = _read(pid, ticks)
                    if not seen.name and pid in self.seen:
                        seen.name = self.seen[pid].name  # a zombie shows no command line
                    self.seen[pid] = seen

    def shares(self, own: Callable[[str], str], reaped: Callable[[str], str]) -> dict[str, float]:
        """CPU seconds by kind of process.

        ``own(name)`` names a process's kind from its command line, or ``""`` for
        "as its parent's children"; ``reaped(name)`` names the kind of a process's
        children (those never sampled, and those ``own`` leaves to it).
        """
        shares: dict[str, float] = {}
        for pid, seen in self.seen.items():
            kind = own(seen.name)
            if not kind:
                parent = self.seen.get(seen.ppid)
                kind = reaped(parent.name) if parent is not None else "other"
            shares[kind] = shares.get(kind, 0.0) + seen.own
            # Children gone before the parent's last sample: in its figures by then, if reaped.
            children = sum(
                child.own + child.reaped
                for child in self.seen.values()
                if child.ppid == pid and child.tick < seen.tick
            )
            kind = reaped(seen.name)
            shares[kind] = shares.get(kind, 0.0) + max(0.0, seen.reaped - children)
        return shares


def _read(pid: int, tick: int) -> Seen:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    name = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    utime, stime, cutime, cstime = (int(value) / TICKS for value in fields[11:15])
    return Seen(int(fields[1]), name.strip(), utime + stime, cutime + cstime, tick)
