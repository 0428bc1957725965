"""Running a local sandbox's commands: output collection with a deadline, and process groups.

Every command of a local sandbox runs in its own process group (a new
session). :class:`ProcessGroups` remembers those groups so ``reset()`` and
``close()`` can kill whatever the commands left running (``server &``);
:func:`communicate` reads a command's output and kills its group at the
deadline.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from typing import IO

from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

_DRAIN_SEC = 0.25
"""How long to keep reading output after the command ended (or was killed).

A background child that inherited stdout (``server &``) keeps the pipe open
forever; waiting for EOF would hang ``exec`` until the child dies.
"""

_POLL_SEC = 0.05
"""How often to look whether the command has exited while its pipes stay open."""

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

    def kill_all(self) -> None:
        """Kill every process group remembered (leftover ``cmd &`` included).

        A process that left its group on purpose (``setsid``, a daemon) escapes
        this: an unconfined local sandbox has no way to contain it.
        """
        with self._lock:
            groups, self._groups = self._groups, set()
        for pgid in sorted(groups):
            kill_group(pgid)


def communicate(proc: subprocess.Popen[bytes], deadline: float | None) -> tuple[bytes, bytes, bool]:
    """Collect output until the pipes close, the command ends, or the deadline.

    Unlike ``Popen.communicate`` this returns shortly after the command
    itself exits even when a background child keeps its pipes open. At the
    deadline the command's process group (its pid: it leads a new session)
    is killed.

    Returns:
        stdout, stderr, and whether the deadline killed the command.
    """
    if proc.stdout is None or proc.stderr is None:
        raise SandboxError("internal error: the command's output pipes are missing")
    chunks: dict[IO[bytes], list[bytes]] = {proc.stdout: [], proc.stderr: []}
    timed_out = False
    stop_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for stream, received in chunks.items():
            selector.register(stream, selectors.EVENT_READ, received)
        while selector.get_map():
            now = time.monotonic()
            if stop_at is None and proc.poll() is not None:
                stop_at = now + _DRAIN_SEC
            if stop_at is None and deadline is not None and now >= deadline:
                timed_out = True
                kill_group(proc.pid)
                proc.kill()
                stop_at = now + _DRAIN_SEC
            if stop_at is not None and now >= stop_at:
                break
            wake = [now + _POLL_SEC]
            wake += [t for t in (deadline, stop_at) if t is not None]
            for key, _ in selector.select(max(0.0, min(wake) - now)):
                data = os.read(key.fd, _READ_CHUNK)
                if data:
                    key.data.append(data)
                else:
                    selector.unregister(key.fileobj)
    proc.stdout.close()
    proc.stderr.close()
    proc.wait()
    return b"".join(chunks[proc.stdout]), b"".join(chunks[proc.stderr]), timed_out
