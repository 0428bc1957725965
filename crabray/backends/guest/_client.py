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
    Frozen,
    PythonCall,
    output_text,
)
from crabray.backends.guest import _program
from crabray.core.errors import ActionError, ConfigError, SandboxBrokenError, SandboxError

logger = logging.getLogger(__name__)

START_TIMEOUT_SEC = 60.0
"""How long a new guest may take to answer its first ping (an emulated VM is slow)."""

CALL_TIMEOUT_SEC = 600.0
"""How long one Python call may run before its guest is killed (and the call fails)."""

_REPLY_GRACE_SEC = 30.0
"""How long past a command's own timeout the guest may take to report it."""

MAX_CALL_VALUE_CHARS = 16 * 1024 * 1024
"""The longest JSON of a value a plain-Python action may return (16 Mi characters).

The guest refuses a longer one (an error of the call: the action's, or the
evaluator's), so the worker never holds more of what a sandbox returns."""

_FRAME_SLACK = 1024 * 1024
"""Room in a reply's frame for what surrounds its payload."""

_MAX_EXEC_REPLY = 2 * 6 * MAX_OUTPUT_BYTES + _FRAME_SLACK
"""Most bytes of an exec reply: two streams of ``MAX_OUTPUT_BYTES`` characters, each at
most 6 bytes of JSON (``\\u0000``)."""

_MAX_CALL_REPLY = 2 * MAX_CALL_VALUE_CHARS + 6 * 10_000 + _FRAME_SLACK
"""Most bytes of a call reply: the value's JSON as a JSON string (quotes escaped) and the
last 10,000 characters of its output."""

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


class UntrustedGuestError(SandboxError):
    """The guest may not answer this request: it is unsealed, or started after commands ran.

    The backend then uses its own channel (the engine's exec, the archive API).
    """


class GuestChannel(ABC):
    """One started guest process, as its backend reaches it."""

    pid: int | None = None
    """The guest's pid inside the sandbox, once its hello said it."""

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
        alive: Whether the sandbox itself is still there (its holder, container or
            connection), asked when the guest died twice: if so, what ran inside it
            killed the guest (``SandboxBrokenError``: the agent's failure); if not, or
            without it, the sandbox was lost around it (``SandboxError``: infrastructure).
        broken_inside: Why the sandbox itself was ended by what ran inside it, or None;
            asked first when the guest did not start or died twice (a container whose
            main process the agent killed: ``SandboxBrokenError``, the agent's failure).
    """

    def __init__(
        self,
        launch: Callable[[], GuestChannel],
        where: str,
        alive: Callable[[], bool] | None = None,
        broken_inside: Callable[[], str | None] | None = None,
    ) -> None:
        self._launch = launch
        self._where = where
        self._alive = alive
        self._broken_inside = broken_inside
        self._channel: GuestChannel | None = None
        self._lock = threading.RLock()
        """Reentrant: a backend's launcher may close the guest (an SSH reconnect does)."""
        self.python: str | None = None
        """The guest's Python version once started."""
        self.starts = 0
        """How many guest processes this sandbox has started (a restart adds one)."""
        self.sealed = False
        """Whether the running guest's hello said it sealed itself (see ``_program.seal``)."""
        self._exposed = False
        """Set once a command or call ran: other processes may be in the sandbox since."""
        self._trusted = False
        """Whether the running guest is sealed and was started before anything ran."""
        self.untrusted_starts = 0
        """Guests started since the sandbox was last clean that were not trusted (the agent
        killed the first; a guest that could not seal itself): a grade that used the guest
        since may come from a process the agent reached."""
        self.ran_code = False
        """Whether the running guest ran a plain-Python call: code of an action, inside the
        guest process itself, so the process is no longer known to be the one started."""

    @property
    def trusted(self) -> bool:
        """Whether a guest is up that no process of the sandbox can have reached.

        That is a guest that sealed itself and was started before the first
        command or call ran in the sandbox: one started later (the agent killed
        the first) could have been reached by an agent process between its
        start and its seal.
        """
        return self._channel is not None and self._trusted

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
        trusted_only: bool = False,
    ) -> ExecResult:
        """Run ``argv`` through the guest (see ``Backend.exec`` for the contract).

        With ``trusted_only``, only through a :attr:`trusted` guest (one is started
        first if none ran yet); either way the sandbox counts as used from now on.

        Raises:
            NoPythonError: The sandbox has no ``python3`` (callers fall back to their own exec).
            UntrustedGuestError: ``trusted_only`` and the guest is not trusted.
            SandboxError: The guest died twice, or never reported.
        """
        started = time.monotonic()
        request = _exec_request(argv, cwd, env, timeout_sec, clear_env=clear_env, marker=marker)
        reply = self._request(
            request,
            _reply_wait(timeout_sec),
            exposes=True,
            trusted_only=trusted_only,
            max_reply=_MAX_EXEC_REPLY,
        )
        if not reply.get("ok"):
            raise SandboxError(f"the guest of the {self._where} could not run {argv[0]!r}: {reply}")
        return _exec_result(reply, started)

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
            "max_value": MAX_CALL_VALUE_CHARS,
        }
        with self._lock:
            try:
                reply = self._request(
                    request, CALL_TIMEOUT_SEC, exposes=True, max_reply=_MAX_CALL_REPLY
                )
            finally:
                self.ran_code = self._channel is not None
        if reply.get("ok"):
            return _program.from_json(reply["value"])
        error = reply["error"]
        raise GuestCallError(
            f"action '{call.action}' raised {error['type']} inside the {self._where}: "
            f"{error['message']}\n{error['traceback'].rstrip()}",
            error_type=error["type"],
            guest_traceback=error["traceback"],
        )

    def try_exec(
        self, argv: list[str], *, cwd: str | None, env: dict[str, str], timeout_sec: float | None
    ) -> ExecResult | None:
        """Run ``argv`` through the running guest if it is :attr:`trusted` and idle; else None.

        Never starts, restarts or waits for a guest: None means the caller runs the
        command its own way (a guest busy with another command, none running, one not
        trusted, or one lost during this request, which is dropped and not started
        again). The environment is exactly ``env``, and the guest refuses (None) when its
        resource limits were changed from outside. The sandbox counts as used.

        Raises:
            SandboxError: The guest answered with an error it should not give.
        """
        if not self._lock.acquire(blocking=False):
            return None
        try:
            channel = self._channel
            if channel is None or not self._trusted:
                return None
            self._exposed = True
            request = _exec_request(argv, cwd, env, timeout_sec, clear_env=True, same_limits=True)
            started = time.monotonic()
            reply = self._exchange_or_drop(
                channel, _program.encode(request), _reply_wait(timeout_sec), _MAX_EXEC_REPLY
            )
        finally:
            self._lock.release()
        return None if reply is None else _exec_result(reply, started)

    def reset_inside(self, keyctl: int) -> str | None:
        """Have a trusted, idle guest that ran no Python call clean the sandbox around it.

        See the program's ``_reset``: every other process of the sandbox killed, its IPC
        objects and keyrings emptied, no socket left. The caller checks from outside that
        the guest is still the process it started before it keeps it (:meth:`keep`).

        Returns:
            None when done, else why not (the guest is then dropped or was never used).
        """
        if not self._lock.acquire(blocking=False):
            return "the guest is busy"
        try:
            channel = self._channel
            if channel is None or not self._trusted or self.ran_code:
                return "no guest that only ran commands is up"
            frame = _program.encode({"op": "reset", "keyctl": keyctl, "same_limits": True})
            reply = self._exchange_or_drop(channel, frame, START_TIMEOUT_SEC)
            if reply is None:
                return "the guest was lost"
            if not reply.get("clean"):
                return str(reply.get("why"))
            return None
        finally:
            self._lock.release()

    def begin(self) -> None:
        """Start the guest if none runs, and have it note the processes running now as the
        harness's: what :meth:`freeze` leaves alone (a screen, the task's services).

        Raises:
            NoPythonError: The sandbox has no ``python3``.
            SandboxError: The guest could not be started.
        """
        self._request({"op": "begin"}, START_TIMEOUT_SEC)

    def freeze(self) -> Frozen:
        """Stop every process of the agent's in the sandbox (see the program's ``_freeze``).

        Returns:
            How many processes were stopped and, when some still run (another
            user's, one stuck in the kernel) or the sandbox has no ``python3`` to
            stop them with, why a grade taken now is not verified.

        Raises:
            SandboxError: The guest died twice.
        """
        try:
            reply = self._request({"op": "freeze"}, START_TIMEOUT_SEC)
        except NoPythonError:
            return Frozen(
                unverified="the sandbox has no python3 to stop the agent's processes with"
            )
        if not reply.get("ok"):
            raise SandboxError(f"the guest of the {self._where} could not freeze: {reply}")
        live = [str(process) for process in reply["live"]]
        unverified = None
        if live:
            unverified = (
                "processes of the agent's kept running while it was graded (they could not "
                f"be stopped): {', '.join(live)}"
            )
        return Frozen(frozen=int(reply["frozen"]), unverified=unverified)

    def thaw(self) -> None:
        """Continue what the last :meth:`freeze` stopped; nothing when no guest runs.

        Raises:
            SandboxError: The guest died during the request.
        """
        with self._lock:
            if self._channel is None:
                return
            self._request({"op": "thaw"}, START_TIMEOUT_SEC)

    def keep(self) -> None:
        """The running guest outlived a reset that left nothing else in the sandbox.

        It stays trusted, as a guest started in the clean sandbox would be.
        """
        with self._lock:
            self._exposed = False
            self.untrusted_starts = 0

    def _exchange_or_drop(
        self, channel: GuestChannel, frame: bytes, wait: float | None, max_reply: int = _FRAME_SLACK
    ) -> dict[str, Any] | None:
        """One exchange with the guest (the lock held); None, the guest dropped, if it failed.

        A lost guest, an oversized frame or a refusal (``GuestTampered``) all mean the
        process may no longer be the one started: it is killed and not asked again.
        """
        try:
            reply = self._exchange(channel, frame, wait, max_reply)
        except (GuestLostError, _program.FrameTooLarge) as exc:
            logger.debug("guest of the %s dropped: %s", self._where, exc)
            self._drop()
            return None
        if not reply.get("ok"):
            logger.debug("guest of the %s refused: %s", self._where, reply.get("error"))
            self._drop()
            return None
        return reply

    def read_file(self, path: str, max_bytes: int, *, trusted_only: bool = False) -> bytes | str:
        """The bytes of the regular file at absolute ``path``, read by the guest's user.

        With ``trusted_only``, only a :attr:`trusted` guest reads it.

        Returns:
            The bytes, or the name of the errno that kept the guest from reading them
            (``ENOENT``, ``EISDIR``, ``EACCES``, ``ELOOP`` for a symlink, ``ENOTREG``,
            ``EFBIG`` past ``max_bytes``, ``ECHANGED``; see the program's ``_read``): the
            backend decides which of them are its answer and which it reads another way;
            ``EBUSY`` when the guest is serving another request (a long command): a
            read never waits behind one.

        Raises:
            NoPythonError: The sandbox has no ``python3``.
            UntrustedGuestError: ``trusted_only`` and the guest is not trusted.
            SandboxError: The guest died twice, or did not answer within ``CALL_TIMEOUT_SEC``.
        """
        if not self._lock.acquire(blocking=False):
            return "EBUSY"
        try:
            request = {"op": "read", "path": path, "max_bytes": max_bytes}
            most = 4 * (max_bytes // 3 + 1) + _FRAME_SLACK  # base64
            reply = self._request(
                request, CALL_TIMEOUT_SEC, trusted_only=trusted_only, max_reply=most
            )
        finally:
            self._lock.release()
        if not reply.get("ok"):
            raise SandboxError(f"the guest of the {self._where} could not read {path!r}: {reply}")
        if "data" in reply:
            return base64.b64decode(reply["data"])
        return str(reply["errno"])

    def stat(self, paths: list[str]) -> list[tuple[int, ...] | None]:
        """Each path's ``(inode, mode, size, mtime_ns, ctime_ns)`` as the trusted guest sees
        it (a symlink is its own), or None where there is nothing.

        Raises:
            NoPythonError: The sandbox has no ``python3``.
            UntrustedGuestError: The guest running now is not the trusted one.
            SandboxError: The guest died twice, or did not answer within ``CALL_TIMEOUT_SEC``.
        """
        with self._lock:
            reply = self._request(
                {"op": "stat", "paths": paths},
                CALL_TIMEOUT_SEC,
                trusted_only=True,
                max_reply=_FRAME_SLACK + 128 * len(paths),
            )
        if not reply.get("ok"):
            raise SandboxError(f"the guest of the {self._where} could not stat files: {reply}")
        return [None if item is None else tuple(item) for item in reply["stats"]]

    def close(self) -> None:
        """Kill the guest (reset and close call this); the next request starts a new one."""
        with self._lock:
            self._drop()

    def renew(self) -> None:
        """Kill the guest after every other process of the sandbox ended (a reset).

        The next guest starts in a sandbox where nothing ran yet, so it may be
        trusted again.
        """
        with self._lock:
            self._drop()
            self._exposed = False
            self.untrusted_starts = 0

    def vouch(self) -> None:
        """Everything that ran in the sandbox so far was the harness's own (reset, task setup).

        The episode says so just before the agent's first action: the running
        guest (if it sealed itself) or the next one started is trusted, and only
        what runs from now on exposes the sandbox.
        """
        with self._lock:
            self._exposed = False
            self.untrusted_starts = 0
            self._trusted = self._channel is not None and self.sealed

    def _request(
        self,
        message: dict[str, Any],
        wait: float | None,
        *,
        exposes: bool = False,
        trusted_only: bool = False,
        max_reply: int = _FRAME_SLACK,
    ) -> dict[str, Any]:
        """Send one request, starting (or once restarting) the guest; its reply.

        Args:
            message: The request.
            wait: Seconds to wait for the reply, or None.
            exposes: The request runs something in the sandbox: a guest started
                after it is not trusted.
            trusted_only: Refuse (``UntrustedGuestError``) unless the guest is trusted;
                no guest is started to find out once the sandbox was used.
            max_reply: The most bytes its reply's frame may hold: an honest guest stays
                within (it cuts output, refuses large values), so a larger one is a
                broken guest (``SandboxBrokenError``), never read into the worker.
        """
        frame = _program.encode(message)
        with self._lock:
            for attempt in (1, 2):
                if trusted_only and self._channel is None and self._exposed:
                    raise UntrustedGuestError(f"the guest of the {self._where} was lost")
                channel = self._channel or self._start()
                self._exposed = self._exposed or exposes
                if trusted_only and not self._trusted:
                    raise UntrustedGuestError(
                        f"the guest of the {self._where} is not trusted "
                        f"({'started after commands ran' if self.sealed else 'unsealed'})"
                    )
                try:
                    return self._exchange(channel, frame, wait, max_reply)
                except _program.FrameTooLarge as exc:
                    self._drop()
                    raise SandboxBrokenError(
                        f"the guest process of the {self._where} answered with {exc}: it is "
                        "not the guest crabray started (something inside the sandbox broke it)"
                    ) from exc
                except GuestLostError as exc:
                    self._drop()
                    if attempt == 2:
                        raise self._lost_twice(exc) from exc
                    logger.warning("guest of the %s lost (%s); starting it again", self._where, exc)
        raise AssertionError("unreachable")

    def _lost_twice(self, exc: GuestLostError) -> SandboxError:
        """The error of a guest that died twice in a row, naming where it arose."""
        if (broken := self._why_broken()) is not None:
            return SandboxBrokenError(
                f"the guest process of the {self._where} died twice in a row: {exc}; {broken}"
            )
        if self._alive is not None and self._sandbox_alive(self._alive):
            return SandboxBrokenError(
                f"the guest process of the {self._where} died twice in a row while the sandbox "
                f"itself lived: something inside the sandbox killed it (a command such as "
                f"`kill -9 -1`, or the sandbox's memory or process limit): {exc}"
            )
        return SandboxError(f"the guest process of the {self._where} died twice in a row: {exc}")

    def _why_broken(self) -> str | None:
        """``broken_inside()``; a probe that fails says nothing (the usual rule applies)."""
        if self._broken_inside is None:
            return None
        try:
            return self._broken_inside()
        except Exception as exc:
            logger.warning("cannot tell whether the %s was broken inside: %s", self._where, exc)
            return None

    def _sandbox_alive(self, alive: Callable[[], bool]) -> bool:
        """``alive()``; a probe that fails counts as a sandbox lost around the guest."""
        try:
            return alive()
        except Exception as exc:
            logger.warning("cannot tell whether the %s is alive: %s", self._where, exc)
            return False

    def _exchange(
        self,
        channel: GuestChannel,
        frame: bytes,
        wait: float | None,
        max_reply: int = _FRAME_SLACK,
    ) -> dict[str, Any]:
        deadline = None if wait is None else time.monotonic() + wait
        channel.send(frame)

        def read(size: int) -> bytes:
            try:
                return channel.recv(size, deadline)
            except TimeoutError as exc:
                raise GuestLostError(f"no answer within {wait:g} s; killed it") from exc

        reply = _program.read_frame(read, max_reply)
        if reply is None:
            raise GuestLostError("its channel closed")
        return reply

    def _start(self) -> GuestChannel:
        channel = self._launch()
        self.starts += 1
        try:
            channel.send(f"{len(PROGRAM)}\n".encode() + PROGRAM)
            reply = self._exchange(channel, _program.encode({"op": "ping"}), START_TIMEOUT_SEC)
        except (GuestLostError, _program.FrameTooLarge) as exc:
            # A launcher's own words (``python3: not found``) read as a frame's length.
            said = channel.diagnostics().strip()
            channel.close()
            if any(hint in said for hint in _NO_PYTHON_HINTS) or "python3" in said:
                raise NoPythonError(
                    f"the {self._where} has no python3 ({said[-300:]}): its image lacks the "
                    "Python 3 interpreter that plain-Python actions run in; install python3 "
                    "in the image, or give those actions the parameter 'env' or local=True"
                ) from exc
            failure = f"the guest process of the {self._where} did not start: {exc}; {said[-500:]}"
            if (broken := self._why_broken()) is not None:
                raise SandboxBrokenError(f"{failure}; {broken}") from exc
            raise SandboxError(failure) from exc
        self.python = str(reply.get("python"))
        self.ran_code = False
        self.sealed = reply.get("sealed") is True
        self._trusted = self.sealed and not self._exposed
        if not self._trusted:
            self.untrusted_starts += 1
        pid = reply.get("pid")
        channel.pid = pid if isinstance(pid, int) else None
        self._channel = channel
        logger.debug(
            "guest of the %s started: Python %s, %s",
            self._where,
            self.python,
            "trusted" if self._trusted else "sealed" if self.sealed else "unsealed",
        )
        return channel

    def _drop(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()


def _exec_request(
    argv: list[str],
    cwd: str | None,
    env: dict[str, str],
    timeout_sec: float | None,
    *,
    clear_env: bool,
    marker: tuple[str, str] | None = None,
    same_limits: bool = False,
) -> dict[str, Any]:
    """The guest program's ``exec`` request (see its module docstring)."""
    request: dict[str, Any] = {
        "op": "exec",
        "argv": argv,
        "cwd": cwd,
        "env": env,
        "clear_env": clear_env,
        "timeout_sec": timeout_sec,
        "marker": list(marker) if marker else None,
        "max_bytes": MAX_OUTPUT_BYTES,
    }
    if same_limits:
        request["same_limits"] = True
    return request


def _reply_wait(timeout_sec: float | None) -> float | None:
    """How long to wait for an exec's reply: its timeout and a grace, or for ever."""
    return None if timeout_sec is None else timeout_sec + _REPLY_GRACE_SEC


def _exec_result(reply: dict[str, Any], started: float) -> ExecResult:
    """The ``ExecResult`` of an ``exec`` reply, timed from ``started``."""
    cut_out, cut_err = reply["cut"] or (False, False)
    return ExecResult(
        exit_code=reply["exit_code"],
        stdout=output_text(reply["stdout"].encode(), cut_out),
        stderr=output_text(reply["stderr"].encode(), cut_err),
        timed_out=reply["timed_out"],
        duration_sec=time.monotonic() - started,
    )
