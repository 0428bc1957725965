"""``VmBackend``: a QEMU virtual machine, its commands and files reached over SSH.

The guest runs with QEMU's user-mode network; its port 22 is forwarded to a
free port on the host's loopback, and an :class:`~crabray.backends.ssh.SshBackend`
pointed at that port does every ``exec``/``put_file``/``get_file`` (so the
sandbox directory layout, timeouts and kill rules are the SSH backend's).

Lifecycle::

    start   boot (or restore the boot cache) -> SSH answers -> the SSH sandbox
            directory is made -> link dropped -> savevm 'crabray-clean'
    reset   loadvm 'crabray-clean' (RAM, devices and disk overlay back to that
            moment, fresh sandbox directory included) -> reconnect
            (reset_mode 'restart': a new QEMU from the boot cache, then the
            sandbox directory is made again at the same path)
    close   QMP quit (killed if it lingers) -> the VM's folder is removed

Each VM has a folder under the runtime directory holding its QMP socket,
serial log, qcow2 overlay (the snapshot store) and an owner record, so
``cleanup_orphans`` can kill the QEMU of a dead owner and nothing else.
Boot, snapshot and revert times are logged and reported by ``describe()``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from typing_extensions import override

from crabray.backends.base import Backend, ExecResult, PythonCall
from crabray.backends.ownership import is_abandoned, write_owner
from crabray.backends.settings import parse_settings
from crabray.backends.ssh import SshBackend, SshSettings
from crabray.backends.vm._cache import cache_file, restore_cache, save_cache
from crabray.backends.vm._qemu import (
    Qmp,
    QmpError,
    free_loopback_port,
    kill_recorded_qemu,
    kvm_usable,
    log_tail,
    start_watchdog,
    stop_process,
    wait_for_ssh,
)
from crabray.backends.vm._settings import VmSettings
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import CrabrayError, SandboxError, SandboxHostError
from crabray.core.retry import RetryPolicy

logger = logging.getLogger(__name__)

SNAPSHOT = "crabray-clean"
"""Name of the internal snapshot taken after the first boot."""

VM_PREFIX = "vm-"
"""Name prefix of the VM folders under the runtime directory; orphan cleanup looks only at these."""

_STATE_DISK_SIZE = "256M"
"""Size of the empty qcow2 that stores snapshots of a kernel+initramfs VM (it grows as needed)."""

_RESTORE_TIMEOUT_SEC = 120.0
"""How long a VM restored from the boot cache may take to answer SSH before a fresh boot."""


def runtime_root(settings: VmSettings) -> Path:
    """Where VM folders and the boot cache live."""
    if settings.runtime_dir is not None:
        return settings.runtime_dir.expanduser()
    return Path(tempfile.gettempdir()) / f"crabray-vm-{os.getuid()}"


class VmBackend(Backend):
    """A sandbox inside a QEMU virtual machine; reset reverts the whole machine.

    Settings: see :class:`~crabray.backends.vm._settings.VmSettings`
    (``image_dir`` or ``kernel``/``initrd`` or ``disk``, ``memory_mb``,
    ``kvm``, ``reset_mode`` ... in ``config.backend_settings``).

    Args:
        config: The environment this sandbox serves.

    Raises:
        ConfigError: ``backend_settings`` do not validate.
    """

    kind = "vm"
    default_memory_mb = VmSettings.model_fields["memory_mb"].default
    """A guest's memory when its settings set none (``VmSettings.memory_mb``)."""
    settings_model = VmSettings
    settings: VmSettings

    def __init__(self, config: EnvironmentConfig) -> None:
        super().__init__(config)
        self._dir: Path | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._qmp: Qmp | None = None
        self._ssh: SshBackend | None = None
        self._accel = ""
        self._times: dict[str, Any] = {"resets": 0}

    # -- lifecycle ------------------------------------------------------------

    @override
    def _start(self) -> None:
        check_files(self.settings, self.config.name)
        root = runtime_root(self.settings)
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._dir = Path(
                tempfile.mkdtemp(prefix=f"{VM_PREFIX}{uuid.uuid4().hex[:8]}-", dir=root)
            )
            write_owner(self._dir)
        except OSError as exc:
            raise SandboxError(f"cannot make the VM folder under {root}: {exc}") from exc
        self._port = free_loopback_port()
        self._accel = self._choose_accel()
        try:
            self._launch()
            self._ssh = SshBackend(self.config, settings=self._ssh_settings())
            self._ssh.start()
            if self.settings.reset_mode == "snapshot":
                self._save_clean_state(self._ssh)
        except BaseException:
            self._teardown()
            raise

    @override
    def _reset(self) -> None:
        ssh = self._started("reset", self._ssh)
        started = time.monotonic()
        try:
            if self.settings.reset_mode == "snapshot":
                # the snapshot holds the fresh sandbox directory: reconnecting is all
                self._require_qmp().hmp(f"loadvm {SNAPSHOT}")
                ssh.reconnect()
                ssh.renew_guest()
            else:
                # the boot cache predates the sandbox directory: make it again
                self._stop_qemu()
                self._launch()
                ssh.reconnect()
                ssh.reset()
        except CrabrayError as exc:
            raise SandboxError(
                f"cannot revert the VM of '{self.config.name}': {exc}; do not reuse it"
            ) from exc
        took = round(time.monotonic() - started, 3)
        self._times["last_reset_sec"] = took
        self._times["resets"] += 1
        logger.info(
            "VM '%s' reverted (%s) in %.1f s", self.config.name, self.settings.reset_mode, took
        )

    @override
    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run ``command`` in the guest, as :meth:`SshBackend.exec` does on its machine.

        Raises:
            ValueError: ``command`` is an empty list or holds non-strings.
            SandboxError: Not started, closed, or the guest's SSH link failed.
        """
        return self._started("exec", self._ssh).exec(
            command, timeout_sec=timeout_sec, cwd=cwd, env=env
        )

    @override
    def call_python(self, call: PythonCall) -> Any:
        """Run a plain-Python action in the VM, through the guest on its SSH link.

        A revert (snapshot or reboot) ends the guest with the connection; the
        next call starts a new one.
        """
        return self._started(f"run action '{call.action}'", self._ssh).call_python(call)

    @override
    def check_python(self) -> str:
        return self._started("start its guest", self._ssh).check_python()

    @override
    def agent_begins(self) -> None:
        self._started("trust its guest", self._ssh).agent_begins()

    @override
    def put_file(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the guest's sandbox directory (over SFTP).

        Raises:
            SandboxFileError: The path is outside the sandbox, a directory, or not writable.
            SandboxError: Not started, closed, or the guest's SSH link failed.
        """
        self._started(f"write '{path}'", self._ssh).put_file(path, data)

    @override
    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read ``path`` from the guest's sandbox directory (over SFTP).

        Raises:
            SandboxFileError: The path is outside the sandbox, missing, or a directory.
            SandboxError: Not started, closed, or the guest's SSH link failed.
        """
        return self._started(f"read '{path}'", self._ssh).get_file(path, max_bytes=max_bytes)

    @override
    def _close(self) -> None:
        self._teardown()

    @override
    def describe(self) -> dict[str, Any]:
        inner = self._ssh.describe() if self._ssh is not None else {}
        return {
            **super().describe(),
            "accel": self._accel or None,
            "port": self._port,
            "qemu_pid": self._proc.pid if self._proc is not None else None,
            "vm_dir": str(self._dir) if self._dir else None,
            "reset_mode": self.settings.reset_mode,
            "root": inner.get("root"),
            "workdir": inner.get("workdir"),
            **self._times,
        }

    @classmethod
    @override
    def preflight(cls, settings: dict[str, Any], env_name: str) -> None:
        """Check that the VM's image files exist and QEMU is installed (boots nothing).

        Raises:
            ConfigError: The settings do not validate.
            SandboxHostError: A file or QEMU is missing here, with how to get it.
        """
        check_files(parse_vm_settings(settings), env_name)

    @classmethod
    def cleanup_orphans(cls, settings: dict[str, Any]) -> list[str]:
        """Kill the QEMU of every VM folder whose owner process is gone, and remove the folder."""
        root = runtime_root(parse_vm_settings(settings))
        removed = []
        for folder in root.glob(f"{VM_PREFIX}*"):
            if not folder.is_dir() or not is_abandoned(folder):
                continue
            killed = kill_recorded_qemu(folder / "qemu.pid", folder)
            shutil.rmtree(folder, ignore_errors=True)
            logger.info("removed abandoned VM %s (QEMU killed: %s)", folder, killed)
            removed.append(f"VM {folder}")
        return removed

    def _save_clean_state(self, ssh: SshBackend) -> None:
        """``savevm`` the booted guest with its fresh sandbox directory, no SSH session open.

        An open session in the snapshot would come back after every ``loadvm``
        as a half-dead connection; so the link is dropped first (the SSH
        backend reconnects on its next use).
        """
        ssh.disconnect()
        time.sleep(0.2)  # let the guest's session process see the close and exit
        started = time.monotonic()
        self._require_qmp().hmp(f"savevm {SNAPSHOT}")
        self._times["snapshot_sec"] = round(time.monotonic() - started, 3)
        logger.info(
            "VM '%s' saved its clean state in %.1f s", self.config.name, self._times["snapshot_sec"]
        )

    # -- QEMU -------------------------------------------------------------------

    def _launch(self) -> None:
        """Start QEMU in the clean state: from the boot cache when there is one, else a boot."""
        cache = (
            cache_file(self.settings, runtime_root(self.settings), self._accel)
            if self.settings.boot_cache
            else None
        )
        if cache is not None and cache.is_file():
            started = time.monotonic()
            try:
                self._spawn(incoming=True)
                qmp = self._require_qmp()
                restore_cache(qmp, cache, _RESTORE_TIMEOUT_SEC)
                self._wait_ssh(_RESTORE_TIMEOUT_SEC)
            except CrabrayError as exc:
                logger.warning(
                    "VM '%s': the boot cache %s failed (%s); booting", self.config.name, cache, exc
                )
                cache.unlink(missing_ok=True)
                self._stop_qemu()
            else:
                self._record_boot("restore", started)
                return
        started = time.monotonic()
        self._spawn(incoming=False)
        self._wait_ssh(self.settings.boot_timeout_sec)
        self._record_boot("boot", started)
        if cache is not None:
            save_cache(self._require_qmp(), cache, self.config.name)

    def _spawn(self, incoming: bool) -> None:
        folder, port = self._require_dir(), self._port
        if self.settings.disk is not None:
            disk = folder / "overlay.qcow2"
            disk.unlink(missing_ok=True)
            base = self.settings.disk.expanduser().resolve()
            _qemu_img("create", "-q", "-f", "qcow2", "-b", str(base), "-F", "qcow2", str(disk))
            drive = f"file={disk},format=qcow2,if=virtio"
        else:
            disk = folder / "state.qcow2"
            if not disk.exists():
                _qemu_img("create", "-q", "-f", "qcow2", str(disk), _STATE_DISK_SIZE)
            drive = f"file={disk},format=qcow2,if=none,id=vmstate"
        args = [
            self.settings.qemu_binary,
            *self._accel.split(),
            "-machine", "pc",
            "-m", str(self.settings.memory_mb),
            "-smp", str(self.settings.cpus),
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-serial", f"file:{folder / 'serial.log'}",
            "-qmp", f"unix:{folder / 'qmp.sock'},server=on,wait=off",
            "-pidfile", str(folder / "qemu.pid"),
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22",
            "-device", f"{self.settings.nic},netdev=n0,romfile=",
            "-device", "virtio-rng-pci",
            "-drive", drive,
        ]  # fmt: skip
        kernel, initrd = self.settings.kernel_file, self.settings.initrd_file
        if kernel is not None and initrd is not None:
            args += [
                "-kernel",
                str(kernel),
                "-initrd",
                str(initrd),
                "-append",
                self.settings.kernel_args,
            ]
        if incoming:
            args += ["-incoming", "defer"]
        args += self.settings.extra_args
        logger.debug("VM '%s': %s", self.config.name, " ".join(args))
        log = open(folder / "qemu.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self._proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        except OSError as exc:
            raise SandboxError(
                f"cannot run {self.settings.qemu_binary} for '{self.config.name}': {exc}; "
                "apt-get install qemu-system-x86"
            ) from exc
        finally:
            log.close()
        self._watchdog = start_watchdog(os.getpid(), self._proc.pid)
        try:
            self._qmp = Qmp(folder / "qmp.sock")
        except QmpError as exc:
            raise SandboxError(f"{exc}; QEMU said:\n{log_tail(folder / 'qemu.log')}") from exc

    def _wait_ssh(self, timeout_sec: float) -> None:
        if self._proc is None or self._port is None:
            raise SandboxError("internal error: no QEMU to wait for")
        wait_for_ssh(
            self._port,
            self._proc,
            timeout_sec,
            self._require_dir() / "serial.log",
            f"VM '{self.config.name}'",
        )

    def _record_boot(self, how: str, started: float) -> None:
        took = round(time.monotonic() - started, 3)
        self._times.update(start_how=how, boot_sec=took)
        logger.info("VM '%s' is up (%s, %s) in %.1f s", self.config.name, how, self._accel, took)

    def _choose_accel(self) -> str:
        mode = self.settings.kvm
        if mode == "on" or (mode == "auto" and kvm_usable()):
            return "-enable-kvm -cpu host"
        return "-accel tcg"

    def _ssh_settings(self) -> SshSettings:
        folder, port = self._require_dir(), self._port or 0
        host_key = self.settings.host_key_file
        known_hosts = folder / "known_hosts"
        if host_key is not None:
            fields = host_key.expanduser().read_text().split()
            known_hosts.write_text(f"[127.0.0.1]:{port} {fields[0]} {fields[1]}\n")
        return SshSettings(
            host="127.0.0.1",
            port=port,
            user=self.settings.user,
            key_path=self.settings.key_file,
            known_hosts=known_hosts,
            accept_unknown_host_keys=host_key is None,
            connect_timeout_sec=30,
            remote_root=self.settings.remote_root,
            retry=RetryPolicy(max_attempts=20, backoff_initial_sec=0.25, backoff_max_sec=2),
        )

    def _stop_qemu(self) -> None:
        """Quit QEMU (QMP ``quit``, then kill), forgetting the QMP connection."""
        qmp, self._qmp = self._qmp, None
        proc, self._proc = self._proc, None
        if qmp is not None:
            with contextlib.suppress(QmpError):
                qmp.execute("quit", timeout_sec=5)
            qmp.close()
        if proc is not None:
            stop_process(proc)
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            with contextlib.suppress(ProcessLookupError):
                watchdog.kill()
            watchdog.wait()

    def _teardown(self) -> None:
        """Stop everything this VM started; nothing here may keep QEMU alive by raising."""
        ssh, self._ssh = self._ssh, None
        try:
            if ssh is not None:
                ssh.close()
        except Exception as exc:  # the VM dies next anyway; its sandbox directory with it
            logger.warning("VM '%s': closing its SSH sandbox failed: %s", self.config.name, exc)
        finally:
            self._stop_qemu()
            folder = self._dir
            if folder is not None:
                kill_recorded_qemu(folder / "qemu.pid", folder)
                shutil.rmtree(folder, ignore_errors=True)
                logger.debug("closed VM %s", folder)

    def _require_dir(self) -> Path:
        if self._dir is None:
            raise SandboxError(f"the VM of '{self.config.name}' is not started")
        return self._dir

    def _require_qmp(self) -> Qmp:
        if self._qmp is None:
            raise SandboxError(f"the VM of '{self.config.name}' has no QEMU running")
        return self._qmp


def _qemu_img(*args: str) -> None:
    try:
        subprocess.run(["qemu-img", *args], check=True, capture_output=True, timeout=60)
    except FileNotFoundError as exc:
        raise SandboxError("qemu-img is not installed; apt-get install qemu-utils") from exc
    except subprocess.CalledProcessError as exc:
        raise SandboxError(
            f"qemu-img {' '.join(args)} failed: {exc.stderr.decode(errors='replace')}"
        ) from exc


def check_files(settings: VmSettings, name: str) -> None:
    """Check that the files a VM of ``settings`` boots from exist and QEMU is installed.

    Raises:
        SandboxHostError: A file or QEMU is missing on this host (no VM of it can start).
    """
    wanted = {
        "kernel": settings.kernel_file,
        "initrd": settings.initrd_file,
        "disk": settings.disk,
        "key_path": settings.key_file,
        "host_key_path": settings.host_key_path,
    }
    for field, path in wanted.items():
        if path is not None and not path.expanduser().is_file():
            hint = (
                " (build the test VM with envs/vm/build.sh)"
                if settings.image_dir is not None
                else ""
            )
            raise SandboxHostError(f"VM '{name}': {field} {path} is not a file{hint}")
    if shutil.which(settings.qemu_binary) is None:
        raise SandboxHostError(
            f"'{settings.qemu_binary}' is not installed; apt-get install qemu-system-x86"
        )


def parse_vm_settings(settings: dict[str, Any]) -> VmSettings:
    """Validate ``backend_settings`` so a typo fails before any VM boots.

    Raises:
        ConfigError: A setting is unknown, missing or has the wrong type; names the field.
    """
    return parse_settings(VmSettings, settings, VmBackend.kind)
