"""The VM backend (kind ``vm``): a QEMU virtual machine reached over SSH, reset by snapshot.

This package's ``__init__`` is its whole public API; its ``_``-prefixed modules
are the implementation: the backend (``_backend``), its settings
(``_settings``), QEMU and its QMP socket (``_qemu``) and the boot cache
(``_cache``). The ``IMAGE_*`` names are the files an ``image_dir`` holds.
Importing it needs ``paramiko`` (the SSH backend drives the guest).
"""

from __future__ import annotations

from crabray.backends.vm._backend import VmBackend, parse_vm_settings
from crabray.backends.vm._settings import (
    IMAGE_HOST_KEY,
    IMAGE_INITRD,
    IMAGE_KERNEL,
    IMAGE_KEY,
    VmSettings,
)

__all__ = [
    "IMAGE_HOST_KEY",
    "IMAGE_INITRD",
    "IMAGE_KERNEL",
    "IMAGE_KEY",
    "VmBackend",
    "VmSettings",
    "parse_vm_settings",
]
