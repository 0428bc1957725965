"""The VM backend's boot cache: a booted machine saved once, restored by later VMs.

A kernel+initramfs guest boots for real once per machine (tens of seconds
under software emulation); the running machine is then saved with a QEMU
migration to a file, and every later VM with the same kernel, initramfs and
QEMU command line starts from that file in about a second instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shlex
import shutil
import time
import uuid
from pathlib import Path

from crabray.backends.vm._qemu import Qmp, QmpError
from crabray.backends.vm._settings import VmSettings

logger = logging.getLogger(__name__)

_CACHE_KEEP = 4
"""Boot-cache files kept (newest first); older ones belong to images since rebuilt."""


def _prune_cache(folder: Path, keep: Path) -> None:
    """Remove all but the newest ``_CACHE_KEEP`` boot-cache files (``keep`` always stays)."""
    try:
        files = sorted(folder.glob("*.state"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in files[_CACHE_KEEP:]:
        if old != keep:
            old.unlink(missing_ok=True)


def cache_file(settings: VmSettings, root: Path, accel: str) -> Path | None:
    """The boot-cache file of this machine under ``root``, or None when it cannot have one.

    The key covers what the saved state depends on: QEMU's binary, the kernel
    and initramfs (path, size, mtime), the command line and the accelerator.
    A disk VM has none: its state would not match a fresh overlay.
    """
    if settings.disk is not None:
        return None
    qemu = shutil.which(settings.qemu_binary) or settings.qemu_binary
    digest = hashlib.sha256()
    for part in (qemu, settings.kernel_file, settings.initrd_file):
        path = Path(str(part))
        stat = path.stat() if path.exists() else None
        size, mtime = (stat.st_size, stat.st_mtime_ns) if stat else (0, 0)
        digest.update(f"{path.resolve()}:{size}:{mtime}\n".encode())
    s = settings
    digest.update(repr((s.kernel_args, s.memory_mb, s.cpus, s.nic, accel, s.extra_args)).encode())
    return root / "boot-cache" / f"{digest.hexdigest()[:24]}.state"


def restore_cache(qmp: Qmp, cache: Path, timeout_sec: float) -> None:
    """Load ``cache`` into a QEMU started with ``-incoming defer`` and wait until it runs.

    Raises:
        QmpError: The migration failed, or the guest did not run within ``timeout_sec``.
    """
    qmp.execute("migrate-incoming", uri=f"exec:cat {shlex.quote(str(cache))}")
    _wait_running(qmp, timeout_sec)


def save_cache(qmp: Qmp, cache: Path, name: str) -> None:
    """Save the just-booted machine to ``cache`` (QEMU migration to a file), then resume."""
    started = time.monotonic()
    tmp = cache.with_name(f".{cache.name}.{uuid.uuid4().hex[:8]}")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        qmp.execute("migrate", uri=f"exec:cat > {shlex.quote(str(tmp))}")
        while True:
            status = (qmp.execute("query-migrate") or {}).get("status")
            if status in ("completed", "failed", "cancelled"):
                break
            time.sleep(0.1)
        if status != "completed":
            raise QmpError(f"migration to {tmp} ended as '{status}'")
        os.replace(tmp, cache)
        _prune_cache(cache.parent, keep=cache)
        logger.info(
            "VM '%s': saved the boot cache %s in %.1f s",
            name,
            cache,
            time.monotonic() - started,
        )
    except (OSError, QmpError) as exc:
        logger.warning("VM '%s': could not save the boot cache %s: %s", name, cache, exc)
        tmp.unlink(missing_ok=True)
    finally:
        with contextlib.suppress(QmpError):
            if (qmp.execute("query-status") or {}).get("status") != "running":
                qmp.execute("cont")


def _wait_running(qmp: Qmp, timeout_sec: float) -> None:
    """Wait until an incoming migration has loaded and the guest runs again.

    Probing SSH earlier would stall: the user-mode network accepts the
    connection but the paused guest cannot answer it.

    Raises:
        QmpError: The migration failed, or the guest did not run within ``timeout_sec``.
    """
    deadline = time.monotonic() + timeout_sec
    while True:
        status = (qmp.execute("query-status") or {}).get("status")
        if status == "running":
            return
        if status not in ("inmigrate", "prelaunch", "paused") or time.monotonic() >= deadline:
            raise QmpError(f"the restored VM is '{status}', not running")
        time.sleep(0.05)
