"""Running one command in a container through the engine's exec API, with a timeout.

The engine has no "kill this exec" call, and a command may fork, background
children or start new sessions, so killing by pid or process group misses
processes. Instead every exec carries a unique marker in its environment
(``CRABRAY_EXEC_ID``), which every descendant inherits; on timeout a second
exec scans ``/proc/*/environ`` inside the container (through ``tr``: busybox
``grep`` stops reading a line at its first NUL) and ``SIGKILL``s every
process that carries the marker, repeating until none is left (so a process
forked during the sweep is caught by the next pass). This needs only ``sh``,
``grep`` and ``kill`` in the image, which busybox provides. A process that
scrubs its own environment (``env -i``) escapes the sweep; reset and close
still remove it with the container. When even the sweep cannot run (an image
without a shell), the container is restarted, which kills every process in it.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from docker.utils.socket import frames_iter
from typing_extensions import override

from crabray.backends.base import MAX_OUTPUT_BYTES, ExecResult, output_text
from crabray.backends.docker._engine import ENGINE_ERRORS
from crabray.backends.guest import GUEST_ARGV, GuestChannel, GuestLostError, KeptOutput
from crabray.core.errors import SandboxBrokenError, SandboxError

logger = logging.getLogger(__name__)

MARKER_VAR = "CRABRAY_EXEC_ID"
"""Environment variable that tags every process of one exec."""

_KILL_SCRIPT = r"""
m="$1=$2"; pass=0
while :; do
  found=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$$" ] && continue
    if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$m"; then
      kill -9 "$p" 2>/dev/null; found=1
    fi
  done
  [ -z "$found" ] && exit 0
  pass=$((pass + 1))
  [ "$pass" -ge 50 ] && exit 3
done
"""
"""Kills every process whose environment holds ``$1=$2``; exits 0 once none is left."""

_STREAM_GRACE_SEC = 5.0
"""How long the output stream may stay open after the command was killed."""

_EXIT_CODE_POLLS = 20
_EXIT_CODE_POLL_SEC = 0.025

_OCI_PREFIX = b"OCI runtime exec failed"

_STREAM_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError, *ENGINE_ERRORS)
"""What reading an exec's output stream raises when the socket or the engine fails."""


@dataclass
class _Output:
    """What the reader thread collected."""

    stdout: KeptOutput = field(default_factory=lambda: KeptOutput(MAX_OUTPUT_BYTES))
    stderr: KeptOutput = field(default_factory=lambda: KeptOutput(MAX_OUTPUT_BYTES))
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class RawExecResult:
    """An exec's outcome with its output as the bytes the command wrote (for binary output)."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration_sec: float
    cut: tuple[bool, bool] = (False, False)


def run_exec(
    api: Any,
    container_id: str,
    argv: list[str],
    *,
    workdir: str,
    environment: dict[str, str],
    timeout_sec: float | None,
    shell: str,
) -> ExecResult:
    """Run ``argv`` in the container and wait for it, killing it at ``timeout_sec``.

    Args:
        api: The docker SDK's low-level ``APIClient``.
        container_id: The running container.
        argv: The command.
        workdir: Absolute directory in the container to run in.
        environment: Extra environment of the command.
        timeout_sec: Seconds before the command and every process it started are
            killed; no limit when None.
        shell: The container's shell, which runs the kill sweep.

    Returns:
        The result, its output decoded as UTF-8; ``timed_out`` and exit code -1
        when the timeout killed it. A program or directory that does not exist
        is exit 127 or 126 with the engine's explanation on stderr, as a shell
        would report it.

    Raises:
        SandboxError: The engine could not run the command (the container is
            gone or stopped, the engine is unreachable).
    """
    raw = run_exec_raw(
        api,
        container_id,
        argv,
        workdir=workdir,
        environment=environment,
        timeout_sec=timeout_sec,
        shell=shell,
    )
    return ExecResult(
        exit_code=raw.exit_code,
        stdout=output_text(raw.stdout, raw.cut[0]),
        stderr=output_text(raw.stderr, raw.cut[1]),
        timed_out=raw.timed_out,
        duration_sec=raw.duration_sec,
    )


def run_exec_raw(
    api: Any,
    container_id: str,
    argv: list[str],
    *,
    workdir: str,
    environment: dict[str, str],
    timeout_sec: float | None,
    shell: str,
) -> RawExecResult:
    """:func:`run_exec` with the output left as bytes (e.g. an image a command printed).

    Raises:
        SandboxError: The engine could not run the command.
    """
    marker = uuid.uuid4().hex
    started = time.monotonic()
    try:
        created = api.exec_create(
            container_id,
            argv,
            stdout=True,
            stderr=True,
            workdir=workdir,
            environment={**environment, MARKER_VAR: marker},
        )
        exec_id = created["Id"]
        sock = api.exec_start(exec_id, socket=True)
    except ENGINE_ERRORS as exc:
        raise exec_failure(api, container_id, f"run {argv[0]!r}", exc) from exc

    output = _Output()
    reader = threading.Thread(
        target=_read_frames, args=(sock, output), name=f"crabray-exec-{marker[:8]}", daemon=True
    )
    reader.start()
    timed_out = not output.done.wait(timeout_sec)
    if timed_out:
        logger.debug("exec %.60r outlived %s s; killing its processes", argv, timeout_sec)
        kill_exec(api, container_id, marker, shell)
        if not output.done.wait(_STREAM_GRACE_SEC):
            _shutdown(sock)
            output.done.wait(_STREAM_GRACE_SEC)
    _close(sock)
    if output.error is not None and not timed_out:
        raise SandboxError(f"lost the output stream of {argv[0]!r}: {output.error}") from (
            output.error
        )
    stdout, stderr = output.stdout.data(), output.stderr.data()
    exit_code = -1 if timed_out else _exit_code(api, exec_id)
    if exit_code in (126, 127) and stdout.startswith(_OCI_PREFIX) and not stderr:
        # The engine reports a missing program or directory on stdout; a shell says it on stderr.
        stdout, stderr = b"", stdout.replace(b"\r\n", b"\n")
        if b"executable file not found" in stderr or b"no such file" in stderr.lower():
            exit_code = 126 if b"chdir to cwd" in stderr else 127
    return RawExecResult(
        exit_code=exit_code,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        duration_sec=time.monotonic() - started,
        cut=(output.stdout.cut, output.stderr.cut),
    )


def kill_exec(api: Any, container_id: str, marker: str, shell: str) -> None:
    """Kill every process of the exec tagged ``marker``; restart the container if that fails."""
    try:
        created = api.exec_create(
            container_id, [shell, "-c", _KILL_SCRIPT, "crabray-kill", MARKER_VAR, marker]
        )
        api.exec_start(created["Id"])
        code = _exit_code(api, created["Id"])
    except ENGINE_ERRORS as exc:
        logger.warning("kill sweep for exec %s failed: %s", marker, exc)
        code = None
    if code == 0:
        return
    logger.warning(
        "could not kill the processes of a timed-out command with %s (exit %s); "
        "restarting container %s, which kills every process in it",
        shell,
        code,
        container_id[:12],
    )
    try:
        api.restart(container_id, timeout=0)
    except ENGINE_ERRORS as exc:
        raise SandboxError(
            f"a timed-out command could not be killed and container {container_id[:12]} "
            f"could not be restarted: {exc}"
        ) from exc


def _kill_pid(api: Any, container_id: str, pid: int, shell: str) -> None:
    """SIGKILL one process of the container by its pid there (best effort, logged)."""
    try:
        created = api.exec_create(container_id, [shell, "-c", f"kill -9 {int(pid)}"])
        api.exec_start(created["Id"])
    except ENGINE_ERRORS as exc:
        logger.warning("could not kill the hung guest (pid %s): %s", pid, exc)


def _read_frames(sock: Any, output: _Output) -> None:
    try:
        # types-docker declares frames_iter without types (and its typed frames_iter_no_tty
        # with str data): the frames are (stream number, bytes).
        for stream, data in frames_iter(sock, tty=False):  # type: ignore[no-untyped-call]
            (output.stderr if stream == 2 else output.stdout).add(data)
    except _STREAM_ERRORS as exc:
        output.error = exc
    finally:
        output.done.set()


def _exit_code(api: Any, exec_id: str) -> int:
    """The exit code of a finished exec; the engine may need a moment to record it."""
    for _ in range(_EXIT_CODE_POLLS):
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return int(info["ExitCode"])
        time.sleep(_EXIT_CODE_POLL_SEC)
    raise SandboxError(f"the engine never reported an exit code for exec {exec_id[:12]}")


def _raw_socket(sock: Any) -> socket.socket | None:
    raw = getattr(sock, "_sock", sock)
    return raw if isinstance(raw, socket.socket) else None


def _shutdown(sock: Any) -> None:
    """Unblock the reader thread of a stream that a surviving process keeps open."""
    raw = _raw_socket(sock)
    try:
        if raw is not None:
            raw.shutdown(socket.SHUT_RDWR)
        sock.close()
    except OSError:
        pass


def _close(sock: Any) -> None:
    with contextlib.suppress(OSError):
        sock.close()


_FRAME_HEADER = struct.Struct(">BxxxI")
"""The engine's multiplexed stream: stream number (1 stdout, 2 stderr), 3 pad bytes, length."""

_DIAGNOSTICS_BYTES = 4096


def start_guest(api: Any, container_id: str, *, workdir: str, shell: str) -> GuestStream:
    """Start the guest (``GUEST_ARGV``) in the container on one exec stream with stdin attached.

    It starts in ``/``, never in ``workdir``, where the agent writes; each call
    changes into its own directory.

    Raises:
        SandboxError: The engine could not start the exec.
    """
    marker = uuid.uuid4().hex
    try:
        created = api.exec_create(
            container_id,
            list(GUEST_ARGV),
            stdin=True,
            stdout=True,
            stderr=True,
            workdir="/",
            environment={MARKER_VAR: marker},
        )
        sock = api.exec_start(created["Id"], socket=True)
    except ENGINE_ERRORS as exc:
        raise exec_failure(api, container_id, "start the guest", exc) from exc
    raw = _raw_socket(sock)
    if raw is None:
        _close(sock)
        raise SandboxError("the engine's exec stream is not a socket; cannot talk to the guest")
    return GuestStream(api, container_id, sock, raw, marker, shell)


class GuestStream(GuestChannel):
    """A guest on a docker exec stream: stdin written raw, stdout and stderr demultiplexed."""

    def __init__(
        self, api: Any, container_id: str, sock: Any, raw: socket.socket, marker: str, shell: str
    ) -> None:
        self._api, self._container_id, self._sock, self._raw = api, container_id, sock, raw
        self._marker, self._shell = marker, shell
        self._stdout = bytearray()
        self._said = bytearray()
        self._hung = False

    @override
    def send(self, data: bytes) -> None:
        try:
            self._raw.sendall(data)
        except OSError as exc:
            raise GuestLostError(f"cannot write to the guest's stream: {exc}") from exc

    @override
    def recv(self, size: int, deadline: float | None) -> bytes:
        while not self._stdout:
            header = self._read(_FRAME_HEADER.size, deadline)
            if header is None:
                return b""
            stream, length = _FRAME_HEADER.unpack(header)
            payload = self._read(length, deadline)
            if payload is None:
                return b""
            if stream == 1:
                self._stdout += payload
            if stream == 2 or len(self._said) < _DIAGNOSTICS_BYTES:
                self._said += payload[:_DIAGNOSTICS_BYTES]
        chunk = bytes(self._stdout[:size])
        del self._stdout[:size]
        return chunk

    def _read(self, size: int, deadline: float | None) -> bytes | None:
        parts = bytearray()
        while len(parts) < size:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._raw], [], [], wait)[0]:
                self._hung = True
                raise TimeoutError("no answer from the guest")
            try:
                data = self._raw.recv(size - len(parts))
            except OSError:
                return None
            if not data:
                return None
            parts += data
        return bytes(parts)

    @override
    def close(self) -> None:
        """Close the stream: an idle guest reads end of input and exits; a hung one is killed.

        The sweep finds what the guest started by its marker; the guest itself is
        sealed (its environment unreadable), so it is killed by its pid.
        """
        _shutdown(self._sock)
        if self._hung:
            kill_exec(self._api, self._container_id, self._marker, self._shell)
            if self.pid is not None:
                _kill_pid(self._api, self._container_id, self.pid, self._shell)

    @override
    def diagnostics(self) -> str:
        return self._said[-_DIAGNOSTICS_BYTES:].decode("utf-8", errors="replace")


def exec_failure(api: Any, container_id: str, what: str, exc: Exception) -> SandboxError:
    """The error of an exec the engine refused: whose failure it is depends on why.

    The engine is asked for the container's state (``stopped_inside``): if it
    answers that the container stopped, what ran inside it ended it: the
    agent's failure. An engine that does not answer, or a running container,
    is infrastructure.
    """
    message = f"the engine could not {what} in the container: {exc}"
    stopped = stopped_inside(api, container_id)
    if stopped is None:
        return SandboxError(message)
    return SandboxBrokenError(f"{message}; {stopped}")


STOP_SETTLE_SEC = 3.0
"""How long a container that still reads as running is given to stop, once something in it
failed: the engine records a container's end a moment after its processes died, and on a
busy machine that moment is long enough for a guest's restart to fail in between."""


def _stops_within(api: Any, container_id: str, seconds: float) -> bool:
    """Whether the container stops within ``seconds`` (the engine's wait, bounded)."""
    try:
        api.wait(container_id, timeout=seconds)
    except ENGINE_ERRORS as still_running:  # the wait timed out (or the engine is gone)
        logger.debug("container %s still runs: %s", container_id[:12], still_running)
        return False
    return True


def stopped_inside(api: Any, container_id: str) -> str | None:
    """Why the container stopped because of what ran inside it, or None if it runs (or the
    engine does not answer).

    crabray stops containers only at close, so a container that stopped mid-episode
    had its main process ended by what ran inside it (``kill -9 -1`` as root ends
    the init's child, and the init with it; its own memory limit).
    """
    try:
        state = api.inspect_container(container_id)["State"]
        if state.get("Running") and _stops_within(api, container_id, STOP_SETTLE_SEC):
            state = api.inspect_container(container_id)["State"]
    except ENGINE_ERRORS as inspect_error:
        logger.debug("cannot inspect container %s: %s", container_id[:12], inspect_error)
        return None
    if state.get("Running"):
        return None
    return (
        f"the engine answers and says the container stopped (exit code "
        f"{state.get('ExitCode')}, OOM-killed: {state.get('OOMKilled')}): what ran inside it "
        "ended its main process (something inside the sandbox killed it, or its memory limit)"
    )
