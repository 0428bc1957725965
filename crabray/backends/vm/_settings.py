"""Settings of the VM backend (``backend_settings`` of an environment with ``backend: vm``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from crabray.backends.settings import BackendSettings

IMAGE_KERNEL, IMAGE_INITRD, IMAGE_KEY, IMAGE_HOST_KEY = (
    "vmlinuz",
    "initramfs.cpio.gz",
    "id_ed25519",
    "host_key.pub",
)
"""File names ``envs/vm/build.sh`` writes into its output folder (``image_dir``)."""


class VmSettings(BackendSettings):
    """What to boot, how, and how to reach it.

    The machine is either a kernel plus initramfs (``kernel``/``initrd``, or
    ``image_dir`` holding what ``envs/vm/build.sh`` built) or a qcow2 ``disk``
    that is never written (each VM writes to its own overlay).
    """

    image_dir: Path | None = Field(
        default=None,
        description="Output folder of envs/vm/build.sh: supplies kernel, initrd, key_path and "
        "host_key_path unless they are given.",
    )
    kernel: Path | None = Field(default=None, description="Kernel image booted with -kernel.")
    initrd: Path | None = Field(default=None, description="Initramfs booted with -initrd.")
    kernel_args: str = Field(
        default="console=ttyS0 quiet panic=-1 edd=off mitigations=off init_on_free=1",
        description="Kernel command line (with kernel/initrd only).",
    )
    disk: Path | None = Field(
        default=None,
        description="qcow2 base image; read-only, each VM writes to a fresh overlay over it.",
    )
    memory_mb: int = Field(default=256, ge=64, description="Guest memory.")
    cpus: int = Field(default=1, ge=1, description="Guest CPUs.")
    nic: Literal["virtio-net-pci", "e1000"] = Field(
        default="virtio-net-pci", description="Emulated network card the guest's driver knows."
    )
    user: str = Field(default="root", min_length=1, description="SSH user in the guest.")
    key_path: Path | None = Field(default=None, description="Private key that logs in as `user`.")
    host_key_path: Path | None = Field(
        default=None,
        description="The guest's public SSH host key ('TYPE BASE64'); checked on every "
        "connection. Without it the guest's key is accepted unseen (and logged).",
    )
    remote_root: str = Field(
        default="/tmp",
        min_length=1,
        description="Guest directory where the sandbox directory is made.",
    )
    boot_timeout_sec: float = Field(
        default=600.0, gt=0, description="How long a boot may take until SSH answers."
    )
    kvm: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="'auto': KVM when /dev/kvm can run a guest here, else software "
        "emulation (TCG).",
    )
    reset_mode: Literal["snapshot", "restart"] = Field(
        default="snapshot",
        description="'snapshot': QMP loadvm of the state saved right after the first boot; "
        "'restart': a new QEMU process (from the boot cache, or a fresh boot on a fresh overlay).",
    )
    boot_cache: bool = Field(
        default=True,
        description="Kernel+initramfs VMs only: save the booted machine once (QEMU migration to "
        "a file) and start later VMs from it instead of booting again.",
    )
    runtime_dir: Path | None = Field(
        default=None,
        description="Where VM folders (QMP socket, serial log, overlay, owner record) and the "
        "boot cache live; <temp dir>/crabray-vm-<uid> if unset.",
    )
    qemu_binary: str = Field(default="qemu-system-x86_64", min_length=1)
    extra_args: list[str] = Field(default_factory=list, description="Appended to QEMU's arguments.")

    @model_validator(mode="after")
    def _one_machine(self) -> VmSettings:
        has_kernel = self.kernel is not None or self.image_dir is not None
        if self.disk is not None and (self.kernel is not None or self.initrd is not None):
            raise ValueError("give either disk or kernel+initrd (or image_dir), not both")
        if self.disk is None and not has_kernel:
            raise ValueError("give disk, kernel+initrd, or image_dir")
        if self.disk is None and self.image_dir is None and self.initrd is None:
            raise ValueError("kernel needs initrd (the test VM runs from its initramfs)")
        return self

    @property
    def kernel_file(self) -> Path | None:
        """The kernel to boot, from ``kernel`` or ``image_dir``; None for a disk VM."""
        if self.disk is not None:
            return None
        return self.kernel or _in(self.image_dir, IMAGE_KERNEL)

    @property
    def initrd_file(self) -> Path | None:
        """The initramfs to boot, from ``initrd`` or ``image_dir``; None for a disk VM."""
        if self.disk is not None:
            return None
        return self.initrd or _in(self.image_dir, IMAGE_INITRD)

    @property
    def key_file(self) -> Path | None:
        """The login key, from ``key_path`` or ``image_dir``."""
        return self.key_path or _in(self.image_dir, IMAGE_KEY)

    @property
    def host_key_file(self) -> Path | None:
        """The guest's public host key, from ``host_key_path`` or ``image_dir``."""
        return self.host_key_path or _in(self.image_dir, IMAGE_HOST_KEY)


def _in(directory: Path | None, name: str) -> Path | None:
    return None if directory is None else directory.expanduser() / name
