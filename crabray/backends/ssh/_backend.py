"""``SshBackend``: a fresh directory on a remote machine, reached over SSH (paramiko).

Each sandbox is a new directory under ``remote_root`` on the machine, laid
out like the local backend's (``work`` where commands start, ``HOME`` and
``TMPDIR`` beside it, ``owner.json`` naming the controlling process). Commands
run through an exec channel; files move over SFTP, confined to the sandbox
directory. Every command carries two environment markers
(``CRABRAY_SANDBOX``, ``CRABRAY_EXEC``), so a timeout, ``reset()`` and
``close()`` can find and kill everything a command started, daemons and
``setsid`` escapes included, without trusting process-group ids.

Composing it (the VM backend does this for its forwarded port)::

    from crabray.backends.ssh import SshBackend, SshSettings
from crabray.core.retry import RetryPolicy

    ssh = SshBackend(
        config,  # the VM's EnvironmentConfig: name used in messages and dir names
        settings=SshSettings(
            host="127.0.0.1", port=forwarded_port, user="root", key_path=vm_key,
            known_hosts=vm_dir / "known_hosts",   # or accept_unknown_host_keys=True
            remote_root="/tmp",
            retry=RetryPolicy(max_attempts=60, backoff_initial_sec=0.25, backoff_max_sec=1),
        ),
    )
    ssh.start()           # waits (bounded) for sshd while the guest boots
    ...                   # after a snapshot revert the TCP link is stale:
    ssh.reconnect()

The settings come from ``config.backend_settings`` when ``settings`` is not
given. The remote needs a POSIX shell, ``env``, ``mktemp``, ``grep -z``, ``ls``
and ``/proc`` (busybox has them all) and an SFTP subsystem.
"""

from __future__ import annotations

import contextlib
import io
import logging
import posixpath
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import paramiko
from typing_extensions import override

from crabray.backends.base import (
    MAX_FILE_BYTES,
    Backend,
    ExecResult,
    PythonCall,
    check_file_size,
    output_text,
)
from crabray.backends.confinement import WORK_DIR, check_real, confine_lexically
from crabray.backends.guest import (
    GUEST_ARGV,
    Guest,
    GuestChannel,
    NoPythonError,
    UntrustedGuestError,
)
from crabray.backends.settings import parse_settings
from crabray.backends.ssh._connection import SshSettings, connect, load_key
from crabray.backends.ssh._guest import ChannelGuest
from crabray.backends.ssh._remote import (
    EXEC_VAR,
    abandoned_sandboxes,
    drive,
    exec_script,
    kill_exec_script,
    list_script,
    make_script,
    posix_login_shell,
    release_fifo_script,
    run,
    run_on,
    wipe_script,
)
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import CrabrayError, SandboxError, SandboxFileError, SandboxTimeoutError

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


_PREFLIGHT_ATTEMPTS = 2
"""Tries the preflight gives a host to answer: a host down stops the run at once."""


class SshBackend(Backend):
    """A sandbox that is a directory on a remote machine; as isolated as that machine's user.

    Settings: see :class:`~crabray.backends.ssh.SshSettings`
    (``host``, ``user``, ``key_path`` ... in ``config.backend_settings``), or
    pass a ready ``settings`` model when composing this backend in another.

    Args:
        config: The environment this sandbox serves.
        settings: Settings to use instead of ``config.backend_settings``.

    Raises:
        ConfigError: ``backend_settings`` do not validate.
    """

    kind = "ssh"
    uses_node_memory = False
    """The sandbox lives on another machine: its actor takes none of its node's memory."""
    settings_model = SshSettings
    settings: SshSettings

    def __init__(self, config: EnvironmentConfig, settings: SshSettings | None = None) -> None:
        super().__init__(config, settings)
        self._key: paramiko.PKey | None = None
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._root: str | None = None
        self._login_shell: str | None = None
        """The remote login shell when it is a POSIX shell (commands skip a ``/bin/sh``)."""
        self._guest = Guest(
            self._launch_guest,
            f"{config.backend} sandbox of '{config.name}'",
            alive=self._link_alive,
        )
        self._no_python = False
        """Set once the machine showed it has no python3: commands take the plain path."""
        self._lock = threading.RLock()
        """Guards swapping the connection and the (single) SFTP session."""

    @property
    def root(self) -> str:
        """The remote sandbox root (no symlinks): nothing outside it is reachable by path."""
        return self._started("root", self._root)

    @property
    def workdir(self) -> str:
        """The remote working directory; commands start here."""
        return posixpath.join(self._started("workdir", self._root), WORK_DIR)

    @override
    def _start(self) -> None:
        self._key = load_key(self.settings)
        self.reconnect()
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", self.config.name)[:40]
        made = self._admin(
            make_script(self.settings.remote_root, name),
            f"create the sandbox under {self.settings.remote_root}",
        )
        root, _, shell = made.strip().partition("\n")
        self._root = root.strip()
        self._login_shell = shell.strip() if posix_login_shell(shell) else None
        logger.info(
            "ssh sandbox of '%s' at %s:%s", self.config.name, self.settings.address, self._root
        )

    def reconnect(self) -> None:
        """Drop the current connection (if any) and open a new one, with the retry policy.

        Called on its own when a dropped link is noticed; public so a caller that
        knows the link is stale (a VM reverted to a snapshot) can say so.

        Raises:
            ConfigError: Authentication or host-key check failed (never retried).
            SandboxError: The machine stayed unreachable through every retry.
        """
        with self._lock:
            self.disconnect()
            self._client = connect(self.settings, self._key, f"sandbox '{self.config.name}'")

    def disconnect(self) -> None:
        """Close the connection (and its SFTP session); the next operation reconnects.

        For a caller that must have no session open at some moment, as the VM
        backend before it snapshots the guest (a session caught in the snapshot
        would come back half dead after every revert). The sandbox stays.
        """
        self._guest.close()
        with self._lock:
            self._drop_sftp()
            client, self._client = self._client, None
        _close_quietly(client)

    def renew_guest(self) -> None:
        """Drop the guest after the machine's processes all ended (a VM revert).

        The next guest may then be trusted with commands again (see ``Guest.trusted``).
        """
        self._guest.renew()

    @override
    def _reset(self) -> None:
        root = self._started("reset", self._root)
        self._guest.renew()
        self._admin(wipe_script(root, recreate=True), "reset the sandbox; do not reuse it")
        if self.settings.reset_command:
            result = self.exec(
                self.settings.reset_command, timeout_sec=self.settings.reset_timeout_sec
            )
            if not result.ok:
                raise SandboxError(
                    f"reset_command of the ssh sandbox '{self.config.name}' failed "
                    f"(exit {result.exit_code}, timed out: {result.timed_out}): "
                    f"{result.stderr.strip()[-500:]}; do not reuse it"
                )
        logger.debug("reset ssh sandbox %s", root)

    @override
    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` on the remote machine in the sandbox's ``work`` directory (or ``cwd``).

        ``cwd`` is relative to ``work`` or an absolute remote path. The
        environment is the remote login's, then ``HOME`` and ``TMPDIR`` inside
        the sandbox, then ``env``, then the two ``CRABRAY_*`` markers. A missing
        program is exit 127, a missing ``cwd`` exit 126, as with the local backend.

        Raises:
            ValueError: ``command`` is an empty list or holds non-strings; an ``env`` name is bad.
            SandboxError: Not started, closed, or the connection failed (after reconnecting).
        """
        root = self._started("exec", self._root)
        marker = uuid.uuid4().hex
        if not self._no_python:
            try:
                return self._exec_in_guest(root, command, timeout_sec, cwd, env or {}, marker)
            except NoPythonError:
                self._no_python = True
                logger.debug(
                    "%s has no python3: commands use plain channels", self.settings.address
                )
            except UntrustedGuestError as exc:
                logger.debug("%s: this command uses a plain channel", exc)
        script = exec_script(
            root,
            self._command(command),
            cwd,
            env or {},
            marker,
            shell=self.settings.shell,
            login_shell=self._login_shell,
        )
        logger.debug(
            "exec on %s (timeout %s s): %.200r", self.settings.address, timeout_sec, command
        )
        started = time.monotonic()
        channel = self._run_script(script, "exec", "run a command")

        def kill(pid: int | None) -> None:
            self._admin(kill_exec_script(pid, marker), "kill a timed-out command")

        deadline = None if timeout_sec is None else started + timeout_sec
        out, err, timed_out, cut = drive(channel, deadline, kill)
        if not timed_out and not self._link_alive():
            raise SandboxError(
                f"the connection to {self.settings.address} dropped while running "
                f"{command!r:.80}; it may have run in part"
            )
        exit_code = -1 if timed_out else channel.recv_exit_status()
        duration = time.monotonic() - started
        logger.debug("exec %.60r ended: exit %s after %.2f s", command, exit_code, duration)
        return ExecResult(
            exit_code=exit_code,
            stdout=output_text(out, cut[0]),
            stderr=output_text(err, cut[1]),
            timed_out=timed_out,
            duration_sec=duration,
        )

    @override
    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` atomically (temp file + rename) under the sandbox directory.

        Raises:
            SandboxFileError: The path is outside the sandbox (``..``, absolute
                elsewhere, a symlink pointing out), is a directory, or cannot be written.
            SandboxError: The connection failed (after reconnecting).
        """
        target = self._resolve(path, "write")

        def write(sftp: paramiko.SFTPClient) -> None:
            self._check_real(sftp, target, path, "write")
            mode = 0o644
            try:
                attrs = sftp.stat(target)
            except FileNotFoundError:
                self._make_parents(sftp, posixpath.dirname(target))
            else:
                if stat.S_ISDIR(attrs.st_mode or 0):
                    raise SandboxFileError(f"cannot write '{path}': {target} is a directory")
                mode = stat.S_IMODE(attrs.st_mode or mode)
            tmp = posixpath.join(
                posixpath.dirname(target), f".{posixpath.basename(target)}.{uuid.uuid4().hex[:8]}"
            )
            try:
                sftp.putfo(io.BytesIO(data), tmp, file_size=len(data), confirm=False)
                sftp.chmod(tmp, mode)
                sftp.posix_rename(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                    sftp.remove(tmp)
                raise

        self._sftp_call(write, "write", path)
        logger.debug("put %d bytes to %s", len(data), target)

    @override
    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read a regular file under the sandbox directory, if it holds at most ``max_bytes``.

        Anything else (a FIFO, a device, a socket the agent planted) is refused
        before it is opened: the SFTP server opens files blocking, so a FIFO
        would hold it, and with it this connection, until something writes.

        Raises:
            FileTooLargeError: The opened file is larger than ``max_bytes``.
            SandboxFileError: The path is outside the sandbox, missing, not a
                regular file, cannot be read, or its read stalled longer than
                ``file_stall_sec``.
            SandboxError: The connection failed (after reconnecting).
        """
        target = self._resolve(path, "read")

        def read(sftp: paramiko.SFTPClient) -> bytes:
            self._check_real(sftp, target, path, "read")
            try:
                attrs = sftp.stat(target)
            except FileNotFoundError:
                raise SandboxFileError(
                    f"cannot read '{path}': no such file in the sandbox {self._root}"
                ) from None
            mode = attrs.st_mode or 0
            if stat.S_ISDIR(mode):
                raise SandboxFileError(f"cannot read '{path}': {target} is a directory, not a file")
            if not stat.S_ISREG(mode):
                raise SandboxFileError(
                    f"cannot read '{path}': {target} is not a regular file "
                    f"(mode {stat.filemode(mode)}); only regular files are read"
                )
            check_file_size(path, attrs.st_size or 0, max_bytes)
            limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
            return self._read_bounded(sftp, target, path, limit)

        data = self._sftp_call(read, "read", path)
        logger.debug("got %d bytes from %s", len(data), target)
        return data

    @override
    def _close(self) -> None:
        root, self._root = self._root, None
        try:
            if root is not None:
                self._admin(wipe_script(root, recreate=False), "remove the sandbox")
                logger.debug("closed ssh sandbox %s:%s", self.settings.address, root)
        except CrabrayError as exc:
            logger.warning(
                "could not remove ssh sandbox %s on %s: %s", root, self.settings.address, exc
            )
        finally:
            self.disconnect()

    @override
    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "host": self.settings.host,
            "port": self.settings.port,
            "user": self.settings.user,
            "root": self._root,
            "workdir": posixpath.join(self._root, WORK_DIR) if self._root else None,
        }

    @classmethod
    @override
    def preflight(cls, settings: dict[str, Any], env_name: str) -> None:
        """Check that the host answers and accepts the login (at most two tries).

        Raises:
            ConfigError: The settings do not validate, the login or the host key is refused.
            SandboxError: The host does not answer.
        """
        parsed = parse_ssh_settings(settings)
        retry = parsed.retry.model_copy(
            update={"max_attempts": min(parsed.retry.max_attempts, _PREFLIGHT_ATTEMPTS)}
        )
        parsed = parsed.model_copy(update={"retry": retry})
        connect(parsed, load_key(parsed), f"sandbox '{env_name}' (preflight)").close()

    @classmethod
    def cleanup_orphans(cls, settings: dict[str, Any]) -> list[str]:
        """Remove sandboxes under ``remote_root`` made from this host by a process now dead.

        Liveness is decided here, on the controlling host (the owner record
        names this host's process), never on the remote machine; sandboxes of
        other controllers are left alone.
        """
        parsed = parse_ssh_settings(settings)
        client = connect(parsed, load_key(parsed), "orphan cleanup")
        try:
            abandoned = abandoned_sandboxes(run(client, list_script(parsed.remote_root)))
            for root in abandoned:
                run(client, wipe_script(root, recreate=False))
                logger.info("removed abandoned ssh sandbox %s:%s", parsed.address, root)
        finally:
            client.close()
        return [f"ssh sandbox {parsed.address}:{root}" for root in abandoned]

    @override
    def call_python(self, call: PythonCall) -> Any:
        """Run a plain-Python action in the sandbox's guest, in its ``work`` directory."""
        return self._guest.call(call, cwd=self.workdir)

    @override
    def check_python(self) -> str:
        self._require_started("start its guest")
        return self._guest.check()

    @override
    def agent_begins(self) -> None:
        """Trust the guest running now (grading stays untrusted: the remote login's dotfiles
        run with every command, and its Python may be the login user's to change)."""
        self._guest.vouch()

    # -- helpers -----------------------------------------------------------

    def _exec_in_guest(
        self,
        root: str,
        command: str | list[str],
        timeout_sec: float | None,
        cwd: str | None,
        env: dict[str, str],
        marker: str,
    ) -> ExecResult:
        """``exec`` through the guest: the same environment and markers, no new channel."""
        command = self._command(command)
        argv = [self.settings.shell, "-c", command] if isinstance(command, str) else command
        workdir = posixpath.join(root, WORK_DIR)
        run_dir = workdir if cwd is None else posixpath.join(workdir, cwd)
        return self._guest.exec(
            argv,
            cwd=run_dir,
            env=env,
            timeout_sec=timeout_sec,
            marker=(EXEC_VAR, marker),
            trusted_only=True,
        )

    def _launch_guest(self) -> GuestChannel:
        root = self._started("start its guest", self._root)
        marker = uuid.uuid4().hex
        script = exec_script(
            root,
            list(GUEST_ARGV),
            None,
            {},
            marker,
            shell=self.settings.shell,
            login_shell=self._login_shell,
        )
        channel = self._run_script(script, "start the guest", "start the guest")

        def kill(pid: int | None) -> None:
            self._admin(kill_exec_script(pid, marker), "kill a guest that stopped answering")

        return ChannelGuest(channel, kill)

    @staticmethod
    def _command(command: str | list[str]) -> str | list[str]:
        if isinstance(command, str):
            return command
        if not command or not all(isinstance(arg, str) for arg in command):
            raise ValueError(f"a command list must be a non-empty list of strings, got {command!r}")
        return list(command)

    def _admin(self, script: str, what: str) -> str:
        """Run one of the backend's own scripts; a failure is a ``SandboxError`` naming ``what``."""
        channel = self._open_channel(what)
        try:
            code, out, err = run_on(channel, script)
        except SandboxTimeoutError as exc:
            raise SandboxTimeoutError(f"cannot {what} on {self.settings.address}: {exc}") from exc
        if code != 0:
            raise SandboxError(
                f"cannot {what} on {self.settings.address} (exit {code}): "
                f"{err.decode('utf-8', errors='replace').strip()[-500:]}"
            )
        return out.decode("utf-8", errors="replace")

    def _link_alive(self) -> bool:
        client = self._client
        transport = client.get_transport() if client is not None else None
        return transport is not None and transport.is_active()

    def _open_channel(self, operation: str) -> paramiko.Channel:
        """A new session channel, reconnecting once if the link turns out to be dead."""
        for attempt in (1, 2):
            with self._lock:
                try:
                    return self._live_transport().open_session(
                        timeout=self.settings.connect_timeout_sec
                    )
                except (EOFError, OSError, paramiko.SSHException) as exc:
                    if attempt == 1 and self._dropped(exc):
                        continue
                    raise SandboxError(
                        f"cannot {operation} on {self.settings.address}: "
                        f"no session channel ({exc or type(exc).__name__})"
                    ) from exc
        raise AssertionError("unreachable")

    def _run_script(self, script: str, operation: str, what: str) -> paramiko.Channel:
        """A new channel running ``script``; ``operation``, ``what`` name it in errors.

        Raises:
            SandboxError: No channel could be opened, or the server refused the command.
        """
        channel = self._open_channel(operation)
        try:
            channel.exec_command(script)
        except (EOFError, OSError, paramiko.SSHException) as exc:
            channel.close()
            raise SandboxError(
                f"cannot {what} on {self.settings.address}: {exc or type(exc).__name__}"
            ) from exc
        return channel

    def _sftp_call(
        self, operation: Callable[[paramiko.SFTPClient], _T], verb: str, path: str
    ) -> _T:
        """Run ``operation`` on the SFTP session, reconnecting once after a dropped link.

        An ``OSError`` on a live link is the request's fault (missing, denied):
        a ``SandboxFileError``; anything else is the connection's: a ``SandboxError``.
        """
        for attempt in (1, 2):
            with self._lock:
                try:
                    if self._sftp is None:
                        self._sftp = paramiko.SFTPClient.from_transport(self._live_transport())
                    if self._sftp is None:
                        raise paramiko.SSHException("the server refused the sftp subsystem")
                    return operation(self._sftp)
                except (EOFError, OSError, paramiko.SSHException) as exc:
                    if attempt == 1 and self._dropped(exc):
                        continue
                    if isinstance(exc, OSError) and self._link_alive() and self._sftp is not None:
                        raise SandboxFileError(
                            f"cannot {verb} '{path}' in the sandbox {self._root}: "
                            f"{exc.strerror or exc or type(exc).__name__}"
                        ) from exc
                    hint = " (is the sftp subsystem enabled?)" if self._sftp is None else ""
                    raise SandboxError(
                        f"cannot {verb} '{path}' on {self.settings.address}{hint}: "
                        f"{exc or type(exc).__name__}"
                    ) from exc
        raise AssertionError("unreachable")

    def _read_bounded(self, sftp: paramiko.SFTPClient, target: str, path: str, limit: int) -> bytes:
        """Read ``target`` whole if at most ``limit`` bytes, waiting at most ``file_stall_sec``
        for any one reply (the size checked is the opened file's).

        The type check before it can be raced (the agent swaps a FIFO in after
        the stat): then the server blocks in its open, this wait times out, and
        the session, whose server is stuck, is dropped so the next call opens a
        fresh one. Call with ``self._lock`` held (``_sftp_call`` does).

        Raises:
            SandboxFileError: A reply took longer than ``file_stall_sec``.
        """
        channel = sftp.get_channel()
        if channel is None:
            raise paramiko.SSHException("the SFTP session has no channel")
        channel.settimeout(self.settings.file_stall_sec)
        try:
            handle = sftp.open(target, "rb")
            try:
                size = handle.stat().st_size or 0
                check_file_size(path, size, limit)
                handle.prefetch(size)
                data = handle.read(limit + 1)
                check_file_size(path, len(data), limit)
            except TimeoutError:
                raise  # closing would wait on the stuck server again: the session is dropped
            except BaseException:
                _close_quietly(handle)
                raise
            handle.close()
            return data
        except TimeoutError as exc:
            self._drop_sftp()
            self._release_fifo(target)
            raise SandboxFileError(
                f"cannot read '{path}': no reply for {self.settings.file_stall_sec:g} s "
                f"(is {target} still a regular file?); gave up so the sandbox cannot hang "
                "the driver"
            ) from exc
        finally:
            channel.settimeout(None)

    def _release_fifo(self, target: str) -> None:
        """Let the SFTP server stuck opening a FIFO at ``target`` finish, so it does not linger."""
        try:
            self._admin(release_fifo_script(target), f"release the SFTP server stuck on {target}")
        except CrabrayError as exc:
            logger.warning("an SFTP server may stay blocked on %s: %s", target, exc)

    def _drop_sftp(self) -> None:
        """Forget the SFTP session (closing, or its server stuck); the next file call opens anew."""
        sftp, self._sftp = self._sftp, None
        _close_quietly(sftp)

    def _live_transport(self) -> paramiko.Transport:
        """The connection's transport, reconnecting first if the link is known to be dead."""
        if not self._link_alive():
            if self._client is not None:
                logger.warning("connection to %s dropped; reconnecting", self.settings.address)
            self.reconnect()
        transport = self._client.get_transport() if self._client is not None else None
        if transport is None:
            raise paramiko.SSHException("no transport after connecting")
        return transport

    def _dropped(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the link died; if so, forget it so the next try reconnects.

        paramiko may raise before its reader thread has marked the transport
        dead, so a transport-level error counts as a drop on its own.
        """
        transport_level = isinstance(exc, EOFError | ConnectionError | paramiko.SSHException)
        if not transport_level and self._link_alive():
            return False
        logger.warning(
            "connection to %s dropped (%s); reconnecting",
            self.settings.address,
            exc or type(exc).__name__,
        )
        self.disconnect()
        return True

    def _resolve(self, path: str, operation: str) -> str:
        """The remote path of sandbox path ``path``, refusing anything lexically outside.

        Raises:
            SandboxFileError: ``..`` or an absolute path leads out of the sandbox.
        """
        root = self._started(f"{operation} '{path}'", self._root)
        candidate = path if path.startswith("/") else posixpath.join(root, WORK_DIR, path)
        return confine_lexically(root, candidate, path, operation)

    def _check_real(
        self, sftp: paramiko.SFTPClient, target: str, path: str, operation: str
    ) -> None:
        """Refuse a path whose deepest existing part resolves (via symlinks) outside the sandbox."""
        root = self._started(operation, self._root)
        probe = target
        while True:
            try:
                real = sftp.normalize(probe)
                break
            except FileNotFoundError:
                if probe in (root, "/"):
                    return
                probe = posixpath.dirname(probe)
        check_real(root, real, path, operation)

    @staticmethod
    def _make_parents(sftp: paramiko.SFTPClient, directory: str) -> None:
        missing: list[str] = []
        while True:
            try:
                sftp.stat(directory)
                break
            except FileNotFoundError:
                missing.append(directory)
                directory = posixpath.dirname(directory)
        for part in reversed(missing):
            sftp.mkdir(part)


def _close_quietly(
    thing: paramiko.SFTPClient | paramiko.SFTPFile | paramiko.SSHClient | None,
) -> None:
    """Close ``thing`` on a link that may be dead: its error would only repeat the first one."""
    if thing is not None:
        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            thing.close()


def parse_ssh_settings(settings: dict[str, Any]) -> SshSettings:
    """Validate ``backend_settings`` so a typo fails before any connection is tried.

    Raises:
        ConfigError: A setting is missing, unknown or has the wrong type; names the field.
    """
    return parse_settings(SshSettings, settings, SshBackend.kind)
