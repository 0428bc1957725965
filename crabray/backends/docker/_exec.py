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
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from docker.utils.socket import frames_iter

from crabray.backends.base import ExecResult
from crabray.backends.docker._engine import ENGINE_ERRORS
from crabray.core.errors import SandboxError

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

    stdout: list[bytes] = field(default_factory=list)
    stderr: list[bytes] = field(default_factory=list)
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
        stdout=raw.stdout.decode("utf-8", errors="replace"),
        stderr=raw.stderr.decode("utf-8", errors="replace"),
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
        raise SandboxError(f"the engine could not run {argv[0]!r} in the container: {exc}") from exc

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
    stdout, stderr = b"".join(output.stdout), b"".join(output.stderr)
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


def _read_frames(sock: Any, output: _Output) -> None:
    try:
        for stream, data in frames_iter(sock, tty=False):
            (output.stderr if stream == 2 else output.stdout).append(data)
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
