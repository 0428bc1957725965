"""The host side of a guest: start it over a backend's channel, send requests, restart it.

A backend supplies a :class:`GuestChannel` factory (a confined process, a
docker exec stream, an SSH channel); :class:`Guest` starts the guest lazily
on first use, sends :mod:`._program`'s source down the channel, and then
answers :meth:`Guest.exec` and :meth:`Guest.call` with one framed request
each. A guest that dies is started again and the request sent once more;
a second loss is a ``SandboxError``.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from importlib import resources
from typing import Any

from crabray.backends.base import (
    MAX_OUTPUT_BYTES,
    ExecResult,
    PythonCall,
    output_text,
)
from crabray.backends.guest import _program
from crabray.core.errors import ActionError, ConfigError, SandboxError

logger = logging.getLogger(__name__)

START_TIMEOUT_SEC = 60.0
"""How long a new guest may take to answer its first ping (an emulated VM is slow)."""

CALL_TIMEOUT_SEC = 600.0
"""How long one Python call may run before its guest is killed (and the call fails)."""

_REPLY_GRACE_SEC = 30.0
"""How long past a command's own timeout the guest may take to report it."""

_NO_PYTHON_HINTS = ("not found", "No such file", "no such file")

PROGRAM: bytes = resources.files(__package__).joinpath("_program.py").read_bytes()
"""The guest program's text, as sent to every sandbox."""


class NoPythonError(ConfigError):
    """The sandbox has no ``python3``, so a plain-Python action cannot run in it."""


class GuestCallError(ActionError):
    """A plain-Python action raised inside its sandbox; the message ends with the guest traceback.

    Args:
        message: What failed.
        error_type: The exception's class name in the guest.
        guest_traceback: The traceback as the guest formatted it.

    The two keyword arguments have defaults so that the error unpickles (it
    crosses from an environment actor to the episode as ``(message,)`` plus
    its attributes).
    """

    def __init__(self, message: str, *, error_type: str = "", guest_traceback: str = "") -> None:
        super().__init__(message)
        self.error_type = error_type
        self.guest_traceback = guest_traceback


class GuestLostError(SandboxError):
    """The guest's channel closed or stopped answering (the guest died or was killed)."""


class GuestChannel(ABC):
    """One started guest process, as its backend reaches it."""

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Write ``data`` to the guest's stdin.

        Raises:
            GuestLostError: The channel is closed.
        """

    @abstractmethod
    def recv(self, size: int, deadline: float | None) -> bytes:
        """Up to ``size`` bytes of the guest's stdout; ``b""`` at end of stream.

        Raises:
            TimeoutError: Nothing arrived before ``deadline`` (``time.monotonic()``).
        """

    @abstractmethod
    def close(self) -> None:
        """Kill the guest process and release the channel; harmless twice."""

    def diagnostics(self) -> str:
        """What the guest (or its launcher) wrote on stderr, for an error message."""
        return ""


class Guest:
    """The guest process of one sandbox: started on first use, restarted once if it died.

    Args:
        launch: Starts ``python3 -c BOOTSTRAP`` in the sandbox and returns its channel.
        where: The sandbox, for messages (``docker sandbox of 'web'``).
    """

    def __init__(self, launch: Callable[[], GuestChannel], where: str) -> None:
        self._launch = launch
        self._where = where
        self._channel: GuestChannel | None = None
        self._lock = threading.RLock()
        """Reentrant: a backend's launcher may close the guest (an SSH reconnect does)."""
        self.python: str | None = None
        """The guest's Python version once started."""
        self.starts = 0
        """How many guest processes this sandbox has started (a restart adds one)."""

    @property
    def running(self) -> bool:
        """Whether a guest process is up (it may still have died since its last answer)."""
        return self._channel is not None

    def check(self) -> str:
        """Start the guest if needed; the guest's Python version.

        Raises:
            NoPythonError: The sandbox has no ``python3``.
            SandboxError: The guest could not be started.
        """
        self._request({"op": "ping"}, START_TIMEOUT_SEC)
        return self.python or "?"

    def exec(
        self,
        argv: list[str],
        *,
        cwd: str | None,
        env: dict[str, str],
        timeout_sec: float | None,
        clear_env: bool = False,
        marker: tuple[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` through the guest (see ``Backend.exec`` for the contract).

        Raises:
            NoPythonError: The sandbox has no ``python3`` (callers fall back to their own exec).
            SandboxError: The guest died twice, or never reported.
        """
        started = time.monotonic()
        request = {
            "op": "exec",
            "argv": argv,
            "cwd": cwd,
            "env": env,
            "clear_env": clear_env,
            "timeout_sec": timeout_sec,
            "marker": list(marker) if marker else None,
            "max_bytes": MAX_OUTPUT_BYTES,
        }
        wait = None if timeout_sec is None else timeout_sec + _REPLY_GRACE_SEC
        reply = self._request(request, wait)
        if not reply.get("ok"):
            raise SandboxError(f"the guest of the {self._where} could not run {argv[0]!r}: {reply}")
        cut_out, cut_err = reply["cut"] or (False, False)
        return ExecResult(
            exit_code=reply["exit_code"],
            stdout=output_text(reply["stdout"].encode(), cut_out),
            stderr=output_text(reply["stderr"].encode(), cut_err),
            timed_out=reply["timed_out"],
            duration_sec=time.monotonic() - started,
        )

    def call(self, call: PythonCall, cwd: str | None) -> Any:
        """Run a plain-Python action in the guest and return its value.

        Raises:
            GuestCallError: The function raised in the guest.
            NoPythonError: The sandbox has no ``python3``.
            SandboxError: The guest died twice, or the call outlived ``CALL_TIMEOUT_SEC``.
        """
        request = {
            "op": "call",
            "units": [list(unit) for unit in call.units],
            "function": call.function,
            "arguments": call.arguments_json,
            "cwd": cwd,
        }
        reply = self._request(request, CALL_TIMEOUT_SEC)
        if reply.get("ok"):
            return _program.from_json(reply["value"])
        error = reply["error"]
        raise GuestCallError(
            f"action '{call.action}' raised {error['type']} inside the {self._where}: "
            f"{error['message']}\n{error['traceback'].rstrip()}",
            error_type=error["type"],
            guest_traceback=error["traceback"],
        )

    def read_file(self, path: str, max_bytes: int) -> bytes | str:
        """The bytes of the regular file at absolute ``path``, read by the guest's user.

        Returns:
            The bytes, or the name of the errno that kept the guest from reading them
            (``ENOENT``, ``EISDIR``, ``EACCES``, ``ELOOP`` for a symlink, ``ENOTREG``,
            ``EFBIG`` past ``max_bytes``, ``ECHANGED``; see the program's ``_read``): the
            backend decides which of them are its answer and which it reads another way;
            ``EBUSY`` when the guest is serving another request (a long command): a
            read never waits behind one.

        Raises:
            NoPythonError: The sandbox has no ``python3``.
            SandboxError: The guest died twice, or did not answer within ``CALL_TIMEOUT_SEC``.
        """
        if not self._lock.acquire(blocking=False):
            return "EBUSY"
        try:
            request = {"op": "read", "path": path, "max_bytes": max_bytes}
            reply = self._request(request, CALL_TIMEOUT_SEC)
        finally:
            self._lock.release()
        if not reply.get("ok"):
            raise SandboxError(f"the guest of the {self._where} could not read {path!r}: {reply}")
        if "data" in reply:
            return base64.b64decode(reply["data"])
        return str(reply["errno"])

    def close(self) -> None:
        """Kill the guest (reset and close call this); the next request starts a new one."""
        with self._lock:
            self._drop()

    def _request(self, message: dict[str, Any], wait: float | None) -> dict[str, Any]:
        frame = _program.encode(message)
        with self._lock:
            for attempt in (1, 2):
                channel = self._channel or self._start()
                try:
                    return self._exchange(channel, frame, wait)
                except GuestLostError as exc:
                    self._drop()
                    if attempt == 2:
                        raise SandboxError(
                            f"the guest process of the {self._where} died twice in a row: {exc}"
                        ) from exc
                    logger.warning("guest of the %s lost (%s); starting it again", self._where, exc)
        raise AssertionError("unreachable")

    def _exchange(self, channel: GuestChannel, frame: bytes, wait: float | None) -> dict[str, Any]:
        deadline = None if wait is None else time.monotonic() + wait
        channel.send(frame)

        def read(size: int) -> bytes:
            try:
                return channel.recv(size, deadline)
            except TimeoutError as exc:
                raise GuestLostError(f"no answer within {wait:g} s; killed it") from exc

        reply = _program.read_frame(read)
        if reply is None:
            raise GuestLostError("its channel closed")
        return reply

    def _start(self) -> GuestChannel:
        channel = self._launch()
        self.starts += 1
        try:
            channel.send(f"{len(PROGRAM)}\n".encode() + PROGRAM)
            reply = self._exchange(channel, _program.encode({"op": "ping"}), START_TIMEOUT_SEC)
        except GuestLostError as exc:
            said = channel.diagnostics().strip()
            channel.close()
            if any(hint in said for hint in _NO_PYTHON_HINTS) or "python3" in said:
                raise NoPythonError(
                    f"the {self._where} has no python3 ({said[-300:]}): its image lacks the "
                    "Python 3 interpreter that plain-Python actions run in; install python3 "
                    "in the image, or give those actions the parameter 'env' or local=True"
                ) from exc
            raise SandboxError(
                f"the guest process of the {self._where} did not start: {exc}; {said[-500:]}"
            ) from exc
        self.python = str(reply.get("python"))
        self._channel = channel
        logger.debug("guest of the %s started: Python %s", self._where, self.python)
        return channel

    def _drop(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
