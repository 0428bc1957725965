"""What the SSH backend runs on the remote machine, and how it reads a command's channel.

The shell scripts here are the whole remote footprint of a sandbox: make
it, wipe it, kill what it started, list sandboxes for orphan cleanup. They
need only a POSIX shell, ``env``, ``mktemp``, ``grep -z``, ``ls`` and ``/proc``,
so the same code serves a Debian server and a busybox guest VM.
"""

from __future__ import annotations

import posixpath
import re
import select
import shlex
import time
from collections.abc import Callable

import paramiko

from crabray.backends.base import MAX_OUTPUT_BYTES
from crabray.backends.confinement import HOME_DIR, TMP_DIR, WORK_DIR
from crabray.backends.guest import KeptOutput
from crabray.backends.ownership import OWNER_FILE, owner_record, record_is_abandoned
from crabray.core.errors import SandboxError, SandboxTimeoutError

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
  for f in $(grep -l -z -x -F -e "$1" /proc/[0-9]*/environ 2>/dev/null); do
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

``grep -z -x``: an environ is NUL-separated ``NAME=value`` records, and the
marker must be one whole record; busybox's grep (which reads a line only up
to a NUL without ``-z``) and GNU grep both take these options.

Markers, not process-group ids: a group id can be recycled by a stranger's
process, and a ``setsid`` daemon leaves the group but keeps its environment.
A process that scrubbed its environment and left the sandbox directory
escapes, as it would escape any cleanup short of a container or a VM.
"""


POSIX_SHELLS = frozenset(
    {"sh", "ash", "bash", "dash", "ksh", "ksh93", "lksh", "mksh", "posh", "yash", "zsh"}
)
"""Login shells (by file name) that run ``exec_script``'s body directly, without ``/bin/sh``."""

_SPECIAL_VARS = frozenset(
    {"IFS", "ENV", "BASH_ENV", "CDPATH", "OPTIND", "OPTARG", "PPID", "LINENO", "PS1", "PS2",
     "PS4", "SHELLOPTS", "BASHOPTS", "UID", "EUID", "GROUPS", "RANDOM", "SECONDS", "FPATH"}
)  # fmt: skip
"""Names a shell treats specially: ``env`` sets them, ``export`` could not be trusted to."""

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def make_script(remote_root: str, name: str) -> str:
    """Create a fresh sandbox under ``remote_root``; prints its resolved path, then ``$SHELL``.

    ``$SHELL`` is the login shell that runs every command sent over SSH (sshd
    and dropbear both set it), which decides the shape of ``exec_script``.
    """
    parent = shlex.quote(remote_root)
    return (
        f"mkdir -p {parent} && d=$(mktemp -d {parent}/{SANDBOX_PREFIX}{name}-XXXXXXXX) && "
        f'cd "$d" && {_layout()} && pwd -P && printf "%s\\n" "${{SHELL:-}}"'
    )


def posix_login_shell(shell: str) -> bool:
    """Whether the login shell ``shell`` (a path) runs POSIX ``sh`` syntax."""
    return posixpath.basename(shell.strip()) in POSIX_SHELLS


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


def release_fifo_script(path: str) -> str:
    """Open the FIFO at ``path`` (if it is one) read-write once and close it again.

    An SFTP server blocked in opening that FIFO for reading gets its open,
    then end-of-file, and exits instead of waiting for a writer forever.
    Opening read-write never blocks; it creates or changes nothing.
    """
    quoted = shlex.quote(path)
    return f"if [ -p {quoted} ]; then exec 3<>{quoted}; fi; exit 0"


def list_script(remote_root: str) -> str:
    """List ``<sandbox>\\t<owner record>`` for every sandbox under ``remote_root``."""
    return (
        f"for d in {shlex.quote(remote_root)}/{SANDBOX_PREFIX}*; do "
        f'[ -f "$d/{OWNER_FILE}" ] && printf "%s\\t%s\\n" "$d" "$(cat "$d/{OWNER_FILE}")"; '
        "done; true"
    )


def exec_script(
    root: str,
    command: str | list[str],
    cwd: str | None,
    env: dict[str, str],
    marker: str,
    *,
    shell: str,
    login_shell: str | None,
) -> str:
    """The remote wrapper of one command: print its pid, enter ``cwd``, run with its env.

    The pid comes first on stdout (``drive`` strips it), so a timeout can kill
    the command's process group at once. sshd makes every exec channel its own
    session, so that pid is also the group id.

    Each process started on the remote costs time (tens of milliseconds in an
    emulated VM), so the wrapper starts as few as it can: the body runs in the
    login shell itself when that is a POSIX shell (else under ``/bin/sh``),
    the environment is ``export``ed rather than set by ``env`` (unless a name
    is one a shell treats specially), a list is ``exec``ed, and a string is
    ``eval``ed when the login shell is ``shell`` (what a plain ``ssh host CMD``
    does), else run by ``exec shell -c``. An ``eval``ing shell is the one
    process without the markers in its ``/proc`` environ (exports reach only
    its children); it leads the session, so a timeout kills it by its group,
    and ``reset()`` by its working directory.

    Args:
        root: The sandbox root.
        command: A string for ``shell -c``, or an argv.
        cwd: Where to run, relative to ``work`` or absolute.
        env: Extra environment.
        marker: This command's ``CRABRAY_EXEC`` value.
        shell: The shell of string commands.
        login_shell: The remote login shell when it is a POSIX shell, else ``None``.

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
    pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in assignments.items())
    argv = [shell, "-c", command] if isinstance(command, str) else command
    missing = shlex.quote(f"cannot run in {run_dir}: no such directory")
    enter = f"cd {shlex.quote(run_dir)} 2>/dev/null || {{ echo {missing} >&2; exit 126; }}"
    lines = ["echo $$", enter]
    if not all(_PLAIN_NAME.fullmatch(k) and k not in _SPECIAL_VARS for k in assignments):
        lines.append(f"exec env -- {pairs} {shlex.join(argv)}")
    elif isinstance(command, str) and login_shell is not None and login_shell == shell:
        lines += [f"export {pairs}", f"eval {shlex.quote(command)}"]
    else:
        lines += [f"export {pairs}", f"exec {shlex.join(argv)}"]
    body = "\n".join(lines)
    return body if login_shell is not None else f"exec /bin/sh -c {shlex.quote(body)}"


def drive(
    channel: paramiko.Channel,
    deadline: float | None,
    on_timeout: Callable[[int | None], None],
) -> tuple[bytes, bytes, bool, tuple[bool, bool]]:
    """Collect an ``exec_script`` command's output until it ends, or kill it at the deadline.

    Returns shortly after the command exits even when a background child
    keeps the channel open, like the local backend's ``_communicate``.

    Args:
        channel: The channel the wrapper runs on.
        deadline: ``time.monotonic()`` value to give up at; ``None`` waits forever.
        on_timeout: Kills the command; gets the wrapper's pid when it was seen.

    Each stream keeps at most ``MAX_OUTPUT_BYTES``; the rest is read and dropped.

    Returns:
        stdout (without the pid line), stderr, whether the deadline killed it, and
        whether each of stdout and stderr was cut.
    """
    head = bytearray()
    out, err = KeptOutput(MAX_OUTPUT_BYTES), KeptOutput(MAX_OUTPUT_BYTES)
    pid: int | None = None
    timed_out = False
    stop_at: float | None = None
    channel.shutdown_write()
    try:
        while True:
            while channel.recv_ready():
                data = channel.recv(_READ_CHUNK)
                if pid is None:
                    head += data
                else:
                    out.add(data)
            while channel.recv_stderr_ready():
                err.add(channel.recv_stderr(_READ_CHUNK))
            if pid is None and b"\n" in head:
                line, _, rest = bytes(head).partition(b"\n")
                pid = int(line) if line.strip().isdigit() else -1
                out.add(rest)
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
    if pid is None:
        out.add(bytes(head))
    return out.data(), err.data(), timed_out, (out.cut, err.cut)


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

    Liveness is decided here, on the controlling host, by ``ownership.record_is_abandoned``
    (one definition for every backend); a record of another host is never abandoned.
    """
    abandoned = []
    for line in listing.splitlines():
        root, _, record = line.partition("\t")
        if record_is_abandoned(record):
            abandoned.append(root)
    return abandoned


def _layout() -> str:
    """Shell that fills the current directory with the clean sandbox layout."""
    record = shlex.quote(owner_record())
    return f"mkdir {WORK_DIR} {HOME_DIR} {TMP_DIR} && printf %s {record} > {OWNER_FILE}"
