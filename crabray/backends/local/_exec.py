"""Running a local sandbox's commands: output collection with a deadline, and process groups.

Every command of a local sandbox runs in its own process group (a new
session). :class:`ProcessGroups` remembers those groups so ``reset()`` and
``close()`` can kill whatever the commands left running (``server &``);
:func:`communicate` reads a command's output and kills its group at the
deadline.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from typing_extensions import override

from crabray.backends.base import MAX_OUTPUT_BYTES
from crabray.backends.guest import (
    GuestChannel,
    GuestLostError,
    KeptOutput,
    NoPythonError,
    collect_output,
)
from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

_READ_CHUNK = 65536


def kill_group(pgid: int) -> None:
    """SIGKILL process group ``pgid``; a group already gone is no error."""
    try:
        os.killpg(pgid, signal.SIGKILL)
        logger.debug("killed process group %d", pgid)
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        logger.warning("cannot kill process group %d: %s", pgid, exc)


class ProcessGroups:
    """The process groups a sandbox's commands started, to kill them all at once."""

    def __init__(self) -> None:
        self._groups: set[int] = set()
        self._lock = threading.Lock()

    def track(self, pgid: int) -> None:
        """Remember a new process group; forget groups that have no process left.

        Forgetting dead groups keeps the set small and narrows the window in
        which a recycled group id could belong to someone else.
        """
        with self._lock:
            for old in list(self._groups):
                try:
                    os.killpg(old, 0)
                except (ProcessLookupError, PermissionError):
                    self._groups.discard(old)
            self._groups.add(pgid)

    def kill_all(self, *, spare: int | None = None) -> None:
        """Kill every process group remembered (leftover ``cmd &`` included), but ``spare``.

        A process that left its group on purpose (``setsid``, a daemon) escapes
        this: an unconfined local sandbox has no way to contain it.
        """
        with self._lock:
            groups, self._groups = self._groups, set()
            if spare is not None and spare in groups:
                groups.discard(spare)
                self._groups.add(spare)
        for pgid in sorted(groups):
            kill_group(pgid)


def communicate(
    proc: subprocess.Popen[bytes], deadline: float | None
) -> tuple[bytes, bytes, bool, tuple[bool, bool]]:
    """Collect output until the pipes close, the command ends, or the deadline.

    Unlike ``Popen.communicate`` this returns shortly after the command
    itself exits even when a background child keeps its pipes open. At the
    deadline the command's process group (its pid: it leads a new session)
    is killed.

    Each stream keeps at most ``MAX_OUTPUT_BYTES``; the rest is read and dropped.

    Returns:
        stdout, stderr, whether the deadline killed the command, and whether
        each of stdout and stderr was cut.
    """
    if proc.stdout is None or proc.stderr is None:
        raise SandboxError("internal error: the command's output pipes are missing")
    chunks: dict[IO[bytes], KeptOutput] = {
        proc.stdout: KeptOutput(MAX_OUTPUT_BYTES),
        proc.stderr: KeptOutput(MAX_OUTPUT_BYTES),
    }
    out, err = chunks[proc.stdout], chunks[proc.stderr]
    timed_out: bool = collect_output(proc, chunks, deadline, lambda: _kill_command(proc))
    proc.wait()
    return out.data(), err.data(), timed_out, (out.cut, err.cut)


def _kill_command(proc: subprocess.Popen[bytes]) -> None:
    """At the deadline: the command's process group (its pid: it leads a new session)."""
    kill_group(proc.pid)
    proc.kill()


_STOPPED_CHECK_SEC = 1.0
"""How often a wait for the guest's answer looks whether the guest was stopped."""


class PipeChannel(GuestChannel):
    """A guest that is a child process of this one (confined or not), over its pipes.

    Args:
        proc: The guest process, with stdin, stdout and stderr pipes, leading its own session.
        entered: ``proc`` is the entry program, whose one child is the guest (confined).
    """

    def __init__(self, proc: subprocess.Popen[bytes], *, entered: bool = False) -> None:
        if proc.stdin is None or proc.stdout is None or proc.stderr is None:
            raise SandboxError("internal error: the guest's pipes are missing")
        self._proc = proc
        self._entered = entered
        self._host_pid: int | None = None if entered else proc.pid
        self._stdin, self._stdout, self._stderr = proc.stdin, proc.stdout, proc.stderr

    @property
    def launcher_pid(self) -> int:
        """The host pid of the process this one started (its process group's)."""
        return self._proc.pid

    def host_pid(self) -> int | None:
        """The guest's pid on the host: the entry program's only child, once it has one."""
        if self._host_pid is None and self._proc.poll() is None:
            try:
                path = f"/proc/{self._proc.pid}/task/{self._proc.pid}/children"
                children = Path(path).read_text().split()
            except OSError:
                return None
            if len(children) == 1:
                self._host_pid = int(children[0])
        return self._host_pid

    @override
    def send(self, data: bytes) -> None:
        try:
            self._stdin.write(data)
            self._stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise GuestLostError(f"cannot write to the guest: {exc}") from exc

    @override
    def recv(self, size: int, deadline: float | None) -> bytes:
        fd = self._stdout.fileno()
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = _STOPPED_CHECK_SEC if wait is None else min(wait, _STOPPED_CHECK_SEC)
            readable, _, _ = select.select([fd], [], [], step)
            if readable:
                return os.read(fd, size)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("no answer from the guest")
            if self._stopped():
                # A stopped guest (SIGSTOP from a process of the sandbox) would answer never.
                raise GuestLostError("the guest was stopped by a signal")

    def _stopped(self) -> bool:
        pid = self.host_pid()
        if pid is None:
            return False
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state in ("T", "t")

    @override
    def close(self) -> None:
        kill_group(self._proc.pid)
        self._proc.kill()
        for pipe in (self._stdin, self._stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        self._proc.wait()

    @override
    def diagnostics(self) -> str:
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return ""
        with contextlib.suppress(OSError, ValueError):
            return self._stderr.read(_READ_CHUNK).decode("utf-8", errors="replace")
        return ""


def launch_guest(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    groups: ProcessGroups,
    name: str,
    *,
    entered: bool = False,
) -> PipeChannel:
    """Start the guest ``argv`` (``python3 -c BOOTSTRAP``, maybe entering a sandbox) with pipes.

    Raises:
        NoPythonError: There is no ``python3`` to start (unconfined: on the host's PATH).
        SandboxError: The host could not spawn it.
    """
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise NoPythonError(
            f"the local sandbox of '{name}' has no python3 on PATH ({exc})"
        ) from exc
    except OSError as exc:
        raise SandboxError(f"local sandbox of '{name}' could not start its guest: {exc}") from exc
    groups.track(proc.pid)
    return PipeChannel(proc, entered=entered)
