"""QEMU plumbing for the VM backend: the command line, QMP, and waiting for SSH.

Kept apart from ``_backend.py`` so the backend reads as a lifecycle (boot, snapshot,
revert, close) while the details of talking to QEMU live here: a small
synchronous QMP client over the VM's unix socket, how the accelerator is
chosen, and how to tell that the guest's SSH server answers (a TCP connect to
the forwarded port is not enough: QEMU's user-mode network accepts it even
while the guest is still booting, so the SSH banner is what counts).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from crabray.core.errors import SandboxError, SandboxTimeoutError

logger = logging.getLogger(__name__)

_QMP_TIMEOUT_SEC = 120.0
"""Limit for one QMP command; savevm/loadvm of a few hundred MB under TCG stays well below."""


class QmpError(SandboxError):
    """QEMU answered a QMP command with an error, or the QMP socket failed."""


class Qmp:
    """A synchronous QMP connection: one command at a time, events skipped.

    Args:
        path: The unix socket QEMU listens on (``-qmp unix:PATH,server=on,wait=off``).
        timeout_sec: How long to keep trying to connect while QEMU starts.

    Raises:
        QmpError: The socket did not accept a connection in time.
    """

    def __init__(self, path: Path, timeout_sec: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_sec
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(path))
                break
            except OSError as exc:
                sock.close()
                if time.monotonic() >= deadline:
                    raise QmpError(f"QEMU's QMP socket {path} did not answer: {exc}") from exc
                time.sleep(0.05)
        sock.settimeout(_QMP_TIMEOUT_SEC)
        self._sock = sock
        self._reader = sock.makefile("rb")
        self._read()  # the greeting
        self.execute("qmp_capabilities")

    def execute(self, command: str, timeout_sec: float | None = None, **arguments: Any) -> Any:
        """Run a QMP command and return its ``return`` value.

        Raises:
            QmpError: QEMU reported an error, or the socket closed or timed out.
        """
        message: dict[str, Any] = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        self._sock.settimeout(timeout_sec or _QMP_TIMEOUT_SEC)
        try:
            self._sock.sendall(json.dumps(message).encode() + b"\n")
            while True:
                reply = self._read()
                if "event" in reply:
                    continue
                if "error" in reply:
                    error = reply["error"]
                    raise QmpError(f"QMP {command} failed: {error.get('desc', error)}")
                return reply.get("return")
        except (OSError, ValueError) as exc:
            raise QmpError(f"QMP {command} failed: {exc or type(exc).__name__}") from exc

    def hmp(self, command_line: str, timeout_sec: float | None = None) -> str:
        """Run a human-monitor command (``savevm``/``loadvm`` have no QMP form in QEMU 7).

        HMP reports failures as text, not as QMP errors: any output is an error here.

        Raises:
            QmpError: The command printed an error, or QMP failed.
        """
        output = self.execute(
            "human-monitor-command", timeout_sec=timeout_sec, **{"command-line": command_line}
        )
        text = str(output or "").strip()
        if text:
            raise QmpError(f"QEMU monitor command '{command_line}' failed: {text}")
        return text

    def close(self) -> None:
        """Close the connection (QEMU keeps running)."""
        with contextlib.suppress(OSError):
            self._reader.close()
            self._sock.close()

    def _read(self) -> dict[str, Any]:
        line = self._reader.readline()
        if not line:
            raise OSError("QEMU closed the QMP socket")
        reply: dict[str, Any] = json.loads(line)
        return reply


def kvm_usable() -> bool:
    """Whether ``/dev/kvm`` can run an ordinary guest here.

    The device must open read-write and the CPU must offer hardware
    virtualization (``vmx``/``svm``): a nested host without it (paravirtual
    KVM, e.g. ``kvm_pvm``) exposes ``/dev/kvm`` but cannot boot a stock kernel.
    """
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    words = set(flags.split())
    return "vmx" in words or "svm" in words


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ssh_banner_ready(port: int, timeout_sec: float = 2.0) -> bool:
    """Whether the guest's SSH server greets on the forwarded loopback ``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_sec) as sock:
            sock.settimeout(timeout_sec)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def wait_for_ssh(
    port: int, proc: subprocess.Popen[bytes], timeout_sec: float, serial_log: Path, what: str
) -> None:
    """Block until the guest's SSH server answers, QEMU dies, or ``timeout_sec`` passes.

    Raises:
        SandboxError: QEMU exited (its log tail in the message).
        SandboxTimeoutError: No SSH banner in time (the serial console's tail in the message).
    """
    deadline = time.monotonic() + timeout_sec
    while True:
        if proc.poll() is not None:
            raise SandboxError(
                f"QEMU of {what} exited with status {proc.returncode} before SSH came up; "
                f"serial console:\n{log_tail(serial_log)}"
            )
        if ssh_banner_ready(port):
            return
        if time.monotonic() >= deadline:
            raise SandboxTimeoutError(
                f"{what}: no SSH server on 127.0.0.1:{port} within {timeout_sec:.0f} s "
                f"(boot_timeout_sec); serial console:\n{log_tail(serial_log)}"
            )
        time.sleep(0.25)


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file, printable, or a note that there is none."""
    try:
        data = path.read_bytes()[-16384:]
    except OSError:
        return f"(no log at {path})"
    text = data.decode("utf-8", errors="replace")
    text = "".join(ch for ch in text if ch.isprintable() or ch in "\n\t")
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def stop_process(proc: subprocess.Popen[bytes], grace_sec: float = 5.0) -> None:
    """Wait up to ``grace_sec`` for ``proc`` to exit, then kill its process group."""
    try:
        proc.wait(timeout=grace_sec)
        return
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


_WATCHDOG = (
    'while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done; '
    'kill -9 "$2" 2>/dev/null; exit 0'
)
"""Polls the owner (``$1``) and QEMU (``$2``) once a second; kills QEMU when the owner is gone."""


def start_watchdog(owner_pid: int, qemu_pid: int) -> subprocess.Popen[bytes]:
    """A tiny ``sh`` loop that kills QEMU within a second of its owner's death.

    QEMU runs in its own session (a Ctrl-C aimed at the owner must not hit the
    guest mid-snapshot), so nothing else would stop it when the owner is
    killed or crashes before ``close()``; ``cleanup_orphans`` would only find it
    at the next sweep. The loop also ends by itself when QEMU exits.
    """
    return subprocess.Popen(
        ["/bin/sh", "-c", _WATCHDOG, "crabray-vm-watchdog", str(owner_pid), str(qemu_pid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def kill_recorded_qemu(pid_file: Path, directory: Path) -> bool:
    """Kill the QEMU whose pid ``pid_file`` holds, if it still runs from ``directory``.

    The pid counts only when that process's command line names ``directory``
    (its QMP socket lives there), so a recycled pid is never killed.
    """
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except (OSError, ValueError):
        return False
    if str(directory).encode() not in cmdline:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
        return True
    return False
