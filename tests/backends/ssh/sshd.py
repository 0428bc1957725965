"""A real OpenSSH server on a loopback port, for the SSH backend's tests.

``start_sshd`` runs Debian's ``/usr/sbin/sshd`` in the foreground as the
current user with a throwaway host key, a throwaway user key (the only
authorized one) and a known-hosts file listing the host key. Nothing on the
host's own SSH setup is read or changed, except that under root OpenSSH needs
its privilege-separation directory ``/run/sshd``, which is created if missing
(as Debian's service unit does).
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SSHD = "/usr/sbin/sshd"
INSTALL_HINT = "apt-get install openssh-server"


def sshd_missing() -> str | None:
    """``None`` when a real sshd can run here, else what to install."""
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh-keygen") is None:
        return f"no {SSHD} or ssh-keygen: {INSTALL_HINT}"
    return None


@dataclass
class Sshd:
    """A running test sshd and the keys that reach it."""

    port: int
    user: str
    directory: Path
    user_key: Path
    wrong_key: Path
    known_hosts: Path
    proc: subprocess.Popen[bytes]
    host: str = "127.0.0.1"
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.directory / "sshd.log"

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """``backend_settings`` that log in with the authorized key, checking the host key."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "key_path": str(self.user_key),
            "known_hosts": str(self.known_hosts),
            "connect_timeout_sec": 5,
            **overrides,
        }

    def session_pids(self) -> list[int]:
        """The per-connection sshd processes (children of the listener)."""
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                children.append(int(stat.parent.name))
        return children

    def drop_connections(self) -> int:
        """Kill every open SSH connection (not the listener), as a network failure would."""
        pids = self.session_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def stop(self) -> None:
        """Stop the listener and every connection it serves."""
        self.drop_connections()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "crabray-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_banner(
    port: int, proc: subprocess.Popen[bytes], log: Path, within_sec: float
) -> None:
    deadline = time.monotonic() + within_sec
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd did not answer on port {port}: {log.read_text()[-2000:]}")


def start_sshd(directory: Path) -> Sshd:
    """Start a throwaway sshd whose keys, config, pid file and log all live in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    host_key, user_key, wrong_key = (directory / n for n in ("host_key", "user_key", "wrong_key"))
    for key in (host_key, user_key, wrong_key):
        _keygen(key)
    authorized = directory / "authorized_keys"
    authorized.write_text((directory / "user_key.pub").read_text())
    port = _free_port()
    known_hosts = directory / "known_hosts"
    algorithm, blob = (directory / "host_key.pub").read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{port} {algorithm} {blob}\n")
    config = directory / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                f"Port {port}",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {authorized}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                f"PidFile {directory / 'sshd.pid'}",
                "StrictModes no",
                "Subsystem sftp internal-sftp",
                "MaxStartups 100",
                "MaxSessions 100",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = directory / "sshd.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    server = Sshd(
        port=port,
        user=getpass.getuser(),
        directory=directory,
        user_key=user_key,
        wrong_key=wrong_key,
        known_hosts=known_hosts,
        proc=proc,
    )
    try:
        _wait_for_banner(port, proc, log, within_sec=10)
    except BaseException:
        server.stop()
        raise
    logger.debug("test sshd listening on 127.0.0.1:%d (pid %d)", port, proc.pid)
    return server


@contextlib.contextmanager
def running_sshd(directory: Path) -> Iterator[Sshd]:
    """``start_sshd`` for a ``with`` block; the server stops at its end."""
    server = start_sshd(directory)
    try:
        yield server
    finally:
        server.stop()


_SHARED: Sshd | None = None


def shared_sshd() -> Sshd:
    """One sshd for the whole test session (the contract suite makes many sandboxes).

    Started on first use and stopped at interpreter exit; tests that drop
    connections or stop the server start their own with ``running_sshd``.
    """
    global _SHARED
    if _SHARED is None or _SHARED.proc.poll() is not None:
        directory = Path(tempfile.mkdtemp(prefix="crabray-test-sshd-"))
        _SHARED = start_sshd(directory)
        server = _SHARED

        def stop() -> None:
            server.stop()
            shutil.rmtree(directory, ignore_errors=True)

        atexit.register(stop)
    return _SHARED
