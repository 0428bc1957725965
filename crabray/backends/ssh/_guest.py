"""The guest of an SSH sandbox: ``python3`` on one session channel, started by ``exec_script``.

It carries the sandbox's markers like every command, so ``reset()`` and
``close()`` (which kill by the sandbox marker) kill it with the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import paramiko
from typing_extensions import override

from crabray.backends.guest import GuestChannel, GuestLostError

_LINK_ERRORS = (EOFError, OSError, paramiko.SSHException)


class ChannelGuest(GuestChannel):
    """A guest on an SSH session channel; its stdout starts with the wrapper's pid line.

    Args:
        channel: The channel ``exec_script`` started the guest on.
        kill: Kills the guest by pid and marker (for a guest that stopped answering).
    """

    def __init__(self, channel: paramiko.Channel, kill: Callable[[int | None], None]) -> None:
        self._channel = channel
        self._kill = kill
        self._pid: int | None = None
        self._head = bytearray()
        self._hung = False

    @override
    def send(self, data: bytes) -> None:
        try:
            self._channel.sendall(data)
        except _LINK_ERRORS as exc:
            raise GuestLostError(f"cannot write to the guest's channel: {exc}") from exc

    @override
    def recv(self, size: int, deadline: float | None) -> bytes:
        while self._pid is None:  # the wrapper prints its pid first
            data = self._read(4096, deadline)
            if not data:
                return b""
            self._head += data
            if b"\n" in self._head:
                line, _, rest = bytes(self._head).partition(b"\n")
                self._pid = int(line) if line.strip().isdigit() else -1
                self._head = bytearray(rest)
        if self._head:
            chunk = bytes(self._head[:size])
            del self._head[:size]
            return chunk
        return self._read(size, deadline)

    def _read(self, size: int, deadline: float | None) -> bytes:
        wait = None if deadline is None else max(0.001, deadline - time.monotonic())
        self._channel.settimeout(wait)
        try:
            return self._channel.recv(size)
        except TimeoutError as exc:
            self._hung = True
            raise TimeoutError("no answer from the guest") from exc
        except _LINK_ERRORS:
            return b""

    @override
    def close(self) -> None:
        """Close the channel (an idle guest reads end of input and exits); kill a hung one."""
        self._channel.close()
        if self._hung:
            self._kill(self._pid if self._pid and self._pid > 0 else None)

    @override
    def diagnostics(self) -> str:
        said = bytearray(self._head)
        try:
            self._channel.status_event.wait(5)
            while self._channel.recv_stderr_ready():
                said += self._channel.recv_stderr(4096)
        except _LINK_ERRORS:
            pass
        return said.decode("utf-8", errors="replace")
