"""The SSH backend (kind ``ssh``): a fresh directory on a remote machine, over paramiko.

:class:`SshBackend` is also the piece the VM backend composes for its guest:
build it with explicit :class:`SshSettings` and use its public ``reconnect()``
and ``disconnect()`` around snapshots. This package's ``__init__`` is its whole
public API; its ``_``-prefixed modules are the implementation: the backend
(``_backend``), settings and connecting (``_connection``) and the shell scripts
run on the remote machine (``_remote``). Importing it needs ``paramiko``.
"""

from __future__ import annotations

from crabray.backends.ssh._backend import SshBackend, parse_ssh_settings
from crabray.backends.ssh._connection import SshSettings

__all__ = [
    "SshBackend",
    "SshSettings",
    "parse_ssh_settings",
]
