"""What the SSH backend runs on the remote machine, and how it reads a command's channel.

The shell scripts here are the whole remote footprint of a sandbox: make
it, wipe it, kill what it started, list sandboxes for orphan cleanup. They
need only a POSIX shell, ``env``, ``mktemp``, ``grep``, ``ls`` and ``/proc``,
so the same code serves a Debian server and a busybox guest VM.
"""

from __future__ import annotations

import json
import posixpath
import select
import shlex
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import paramiko

from crabray.backends.ownership import OWNER_FILE, is_abandoned, write_owner
from crabray.core.errors import SandboxError, SandboxTimeoutError

WORK_DIR, HOME_DIR, TMP_DIR = "work", "home", "tmp"
"""The sandbox layout, as in the local backend."""

SANDBOX_PREFIX = "crabray-ssh-"
"""Name prefix of the sandbox directories under ``remote_root``; orphan cleanup sees only these."""

SANDBOX_VAR, EXEC_VAR = "CRABRAY_SANDBOX", "CRABRAY_EXEC"
"""Environment markers every command carries: the sandbox root, and one id per ``exec``."""

ADMIN_TIMEOUT_SEC = 120.0
"""Limit for the backend's own scripts (make, wipe, kill), so a hung link cannot hang a run."""

_DRAIN_SEC = 0.25
"""How long to keep reading after the command ended: a background child may hold its pipes."""

_POLL_SEC = 0.05
_READ_CHUNK = 65536

_KILL_FUNCTION = r"""
crabray_kill() {  # $1: environment marker; $2: directory whose residents die too ('' for none)
  for f in $(grep -l -F -e "$1" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    [ "$p" = "$$" ] || kill -9 "$p" 2>/dev/null
  done
  [ -n "$2" ] || return 0
  ls -l /proc/[0-9]*/cwd 2>/dev/null | while IFS= read -r line; do
    case "$line" in
      *" -> $2"|*" -> $2/"*) p=${line%%/cwd -> *}; kill -9 "${p##*/proc/}" 2>/dev/null ;;
    esac
  done
  return 0
}
"""
"""Kills by marker (one ``grep`` over every environ) and by working directory (one ``ls``).

Markers, not process-group ids: a group id can be recycled by a stranger's
process, and a ``setsid`` daemon leaves the group but keeps its environment.
A process that scrubbed its environment and left the sandbox directory
escapes, as it would escape any cleanup short of a container or a VM.
"""


def make_script(remote_root: str, name: str) -> str:
    """Create a fresh sandbox under ``remote_root``; prints its resolved path."""
    parent = shlex.quote(remote_root)
    return (
        f"mkdir -p {parent} && d=$(mktemp -d {parent}/{SANDBOX_PREFIX}{name}-XXXXXXXX) && "
        f'cd "$d" && {_layout()} && pwd -P'
    )


def wipe_script(root: str, *, recreate: bool) -> str:
    """Kill everything the sandbox started, remove it, and make it afresh when ``recreate``."""
    script = (
        _KILL_FUNCTION
        + f"R={shlex.quote(root)}\n"
        + f'crabray_kill "{SANDBOX_VAR}=$R" "$R"\n'
        + 'chmod -R u+rwX "$R" 2>/dev/null; rm -rf "$R"'
    )
    if recreate:
        script += f' && mkdir -m 700 "$R" && cd "$R" && {_layout()}'
    return script


def kill_exec_script(pid: int | None, marker: str) -> str:
    """Kill one timed-out command: its process group by id, then whatever carries its marker."""
    group = f"kill -9 -{pid} {pid} 2>/dev/null; " if pid is not None else ""
    return _KILL_FUNCTION + group + f'crabray_kill "{EXEC_VAR}={marker}" ""'


def list_script(remote_root: str) -> str:
    """List ``<sandbox>\\t<owner record>`` for every sandbox under ``remote_root``."""
    return (
        f"for d in {shlex.quote(remote_root)}/{SANDBOX_PREFIX}*; do "
        f'[ -f "$d/{OWNER_FILE}" ] && printf "%s\\t%s\\n" "$d" "$(cat "$d/{OWNER_FILE}")"; '
        "done; true"
    )


def exec_script(
    root: str, argv: list[str], cwd: str | None, env: dict[str, str], marker: str
) -> str:
    """The remote wrapper of one command: print its pid, enter ``cwd``, ``exec`` with its env.

    The pid comes first on stdout (``drive`` strips it), so a timeout can kill
    the command's process group at once. sshd makes every exec channel its own
    session, so that pid is also the group id.

    Raises:
        ValueError: An ``env`` name is empty or holds ``=``.
    """
    for name in env:
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"bad environment variable name {name!r}")
    workdir = posixpath.join(root, WORK_DIR)
    run_dir = workdir if cwd is None else posixpath.join(workdir, cwd)
    assignments = {
        "HOME": posixpath.join(root, HOME_DIR),
        "TMPDIR": posixpath.join(root, TMP_DIR),
        **env,
        SANDBOX_VAR: root,
        EXEC_VAR: marker,
    }
    missing = shlex.quote(f"cannot run in {run_dir}: no such directory")
    body = "\n".join(
        [
            "echo $$",
            f"cd {shlex.quote(run_dir)} 2>/dev/null || {{ echo {missing} >&2; exit 126; }}",
            "exec env -- "
            + " ".join(shlex.quote(f"{k}={v}") for k, v in assignments.items())
            + " "
            + " ".join(shlex.quote(arg) for arg in argv),
        ]
    )
    return f"exec /bin/sh -c {shlex.quote(body)}"


def drive(
    channel: paramiko.Channel,
    deadline: float | None,
    on_timeout: Callable[[int | None], None],
) -> tuple[bytes, bytes, bool]:
    """Collect an ``exec_script`` command's output until it ends, or kill it at the deadline.

    Returns shortly after the command exits even when a background child
    keeps the channel open, like the local backend's ``_communicate``.

    Args:
        channel: The channel the wrapper runs on.
        deadline: ``time.monotonic()`` value to give up at; ``None`` waits forever.
        on_timeout: Kills the command; gets the wrapper's pid when it was seen.

    Returns:
        stdout (without the pid line), stderr, and whether the deadline killed it.
    """
    out, err = bytearray(), bytearray()
    pid: int | None = None
    timed_out = False
    stop_at: float | None = None
    channel.shutdown_write()
    try:
        while True:
            while channel.recv_ready():
                out += channel.recv(_READ_CHUNK)
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(_READ_CHUNK)
            if pid is None and b"\n" in out:
                line, _, rest = bytes(out).partition(b"\n")
                pid = int(line) if line.strip().isdigit() else -1
                out = bytearray(rest)
            now = time.monotonic()
            if stop_at is None and channel.exit_status_ready():
                stop_at = now + _DRAIN_SEC
            if stop_at is None and deadline is not None and now >= deadline:
                timed_out = True
                on_timeout(pid if pid is not None and pid > 0 else None)
                stop_at = time.monotonic() + _DRAIN_SEC
            drained = not channel.recv_ready() and not channel.recv_stderr_ready()
            if drained and (channel.closed or (channel.eof_received and stop_at is not None)):
                break
            if stop_at is not None and now >= stop_at:
                break
            wake = min(t for t in (now + _POLL_SEC, deadline, stop_at) if t is not None)
            if channel.eof_received:  # the pipe stays readable after EOF: wait on status
                channel.status_event.wait(max(0.0, wake - now))
            else:
                select.select([channel], [], [], max(0.0, wake - now))
    finally:
        channel.close()
    return bytes(out), bytes(err), timed_out


def run_on(channel: paramiko.Channel, script: str) -> tuple[int, bytes, bytes]:
    """Run ``script`` with ``/bin/sh`` on ``channel``, bounded by ``ADMIN_TIMEOUT_SEC``.

    Raises:
        SandboxTimeoutError: The script did not finish in time.
    """
    channel.settimeout(ADMIN_TIMEOUT_SEC)
    try:
        channel.exec_command(f"exec /bin/sh -c {shlex.quote(script)}")
        channel.shutdown_write()
        out = channel.makefile("rb").read()
        err = channel.makefile_stderr("rb").read()
        if not channel.status_event.wait(ADMIN_TIMEOUT_SEC):
            raise SandboxTimeoutError(f"no answer within {ADMIN_TIMEOUT_SEC:.0f} s")
        return channel.recv_exit_status(), out, err
    except TimeoutError as exc:
        raise SandboxTimeoutError(f"no answer within {ADMIN_TIMEOUT_SEC:.0f} s") from exc
    finally:
        channel.close()


def run(client: paramiko.SSHClient, script: str) -> str:
    """Run ``script`` on a bare client (no sandbox); its stdout.

    Raises:
        SandboxError: The script failed or could not run.
    """
    transport = client.get_transport()
    if transport is None:
        raise SandboxError("internal error: SSH client without a transport")
    code, out, err = run_on(transport.open_session(), script)
    if code != 0:
        raise SandboxError(
            f"remote script failed (exit {code}): {err.decode(errors='replace')[-500:]}"
        )
    return out.decode("utf-8", errors="replace")


def abandoned_sandboxes(listing: str) -> list[str]:
    """The sandboxes in a ``list_script`` output whose owner is a dead process of this host.

    Liveness is decided here, on the controlling host, by ``ownership.is_abandoned``
    (one definition for every backend); a record of another host is never abandoned.
    """
    abandoned = []
    for line in listing.splitlines():
        root, _, record = line.partition("\t")
        try:
            json.loads(record)
        except ValueError:
            continue
        with tempfile.TemporaryDirectory(prefix="crabray-owner-") as tmp:
            (Path(tmp) / OWNER_FILE).write_text(record)
            if is_abandoned(Path(tmp)):
                abandoned.append(root)
    return abandoned


def _layout() -> str:
    """Shell that fills the current directory with the clean sandbox layout."""
    record = shlex.quote(_owner_record())
    return f"mkdir {WORK_DIR} {HOME_DIR} {TMP_DIR} && printf %s {record} > {OWNER_FILE}"


def _owner_record() -> str:
    """This process's owner record, from ``ownership.write_owner``: one definition of liveness."""
    with tempfile.TemporaryDirectory(prefix="crabray-owner-") as tmp:
        write_owner(Path(tmp))
        return (Path(tmp) / OWNER_FILE).read_text()
