"""The test VM for the VM backend's tests: built once per session by ``envs/vm/build.sh``.

The image lands in ``envs/vm/out`` (git-ignored) and is reused while its files
exist, so only the first session on a machine pays for the build (about half
a minute, mostly the kernel download from Debian's apt). VMs boot from it with
the backend's boot cache, so only the first VM of a machine boots for real;
later ones restore the booted machine in about a second.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from crabray.backends.vm import IMAGE_HOST_KEY, IMAGE_INITRD, IMAGE_KERNEL, IMAGE_KEY

REPO = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO / "envs" / "vm" / "build.sh"
IMAGE_DIR = Path(os.environ.get("CRABRAY_TEST_VM_DIR", REPO / "envs" / "vm" / "out"))
PYTHON_IMAGE_DIR = REPO / "envs" / "vm" / "out-python"
"""The test VM with python3 (``CRABRAY_VM_PYTHON=1 envs/vm/build.sh``), for the guest tests."""
INSTALL_HINT = "apt-get install qemu-system-x86 qemu-utils dropbear-bin busybox-static cpio"

_TOOLS = ("qemu-system-x86_64", "qemu-img", "busybox", "dropbearkey", "cpio")


def vm_missing() -> str | None:
    """``None`` when the test VM exists (building it if needed), else what to install or fix."""
    absent = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if not os.access("/usr/sbin/dropbear", os.X_OK):
        absent.append("/usr/sbin/dropbear")
    if absent:
        return f"missing {', '.join(absent)}: {INSTALL_HINT}"
    return _build_image(IMAGE_DIR)


def vm_python_missing() -> str | None:
    """Like :func:`vm_missing`, for the test VM with python3 (built from the host's python3)."""
    if not os.access("/usr/bin/python3", os.X_OK):
        return "the VM with python3 copies the host's /usr/bin/python3: apt-get install python3"
    return vm_missing() or _build_image(PYTHON_IMAGE_DIR, python=True)


def vm_python_settings(_tmp_path: Path) -> dict[str, Any]:
    """``backend_settings`` for a test VM with python3 (more memory: the stdlib is in RAM)."""
    return {"image_dir": str(PYTHON_IMAGE_DIR), "memory_mb": 512, "boot_timeout_sec": 600}


@functools.cache
def _build_image(directory: Path, *, python: bool = False) -> str | None:
    files = (IMAGE_KERNEL, IMAGE_INITRD, IMAGE_KEY, IMAGE_HOST_KEY)
    if all((directory / name).is_file() for name in files):
        return None
    env = {**os.environ, "CRABRAY_VM_PYTHON": "1" if python else "0"}
    result = subprocess.run(
        [str(BUILD_SCRIPT), str(directory)], capture_output=True, text=True, timeout=900, env=env
    )
    if result.returncode != 0:
        return f"{BUILD_SCRIPT} failed (exit {result.returncode}): {result.stderr.strip()[-800:]}"
    return None


def vm_settings(_tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """``backend_settings`` for a small test VM from the built image.

    The runtime directory stays the default one, shared by every test, so the
    boot cache saved by the first VM serves all the others.
    """
    return {"image_dir": str(IMAGE_DIR), "memory_mb": 192, "boot_timeout_sec": 600, **overrides}


def qemu_running(pid: int | None) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    if pid is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def vm_leftovers(described: dict[str, Any], _pids: list[int]) -> list[str]:
    """The QEMU process or VM folder a closed VM left; guest pids die with the guest."""
    found = []
    if qemu_running(described.get("qemu_pid")):
        found.append(f"QEMU process {described['qemu_pid']} still runs")
    folder = described.get("vm_dir")
    if folder and os.path.lexists(folder):
        found.append(f"VM folder {folder} still exists")
    return found
