"""How a local sandbox is confined: choosing bubblewrap or none, and saying so.

The ``isolation`` setting (see :class:`~crabray.backends.local._settings.LocalSettings`)
becomes ``bwrap`` or ``none`` here; a confined sandbox gets its holder
(:class:`crabray.backends.local._bwrap.Holder`, which owns the namespaces) from
:func:`start_holder`. Running unconfined happens only when a suite asks for it
(``isolation: none``), never as a fallback: ``auto`` without a working
bubblewrap is an error saying how to install it or how to opt out. The first
unconfined sandbox of a process logs a WARNING saying what it means.
"""

from __future__ import annotations

import getpass
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import Literal

from crabray.backends.display import DisplayHook
from crabray.backends.local import _bwrap as bwrap
from crabray.backends.local._settings import Isolation
from crabray.core.errors import SandboxHostError

logger = logging.getLogger(__name__)

_unconfined_warned = False
_warn_lock = threading.Lock()


def choose_isolation(wanted: Isolation, name: str) -> Literal["bwrap", "none"]:
    """Resolve the ``isolation`` setting of sandbox ``name``; ``auto`` probes bubblewrap.

    The probe runs once per process (:func:`crabray.backends.local._bwrap.probe`).

    Raises:
        SandboxHostError: ``isolation: bwrap`` but a tool it needs is missing, or ``auto``
            and bubblewrap does not work here (the message says how to fix it or opt out):
            no sandbox of this host can start, so the run stops.
    """
    if wanted == "bwrap":
        found = bwrap.tools()
        if isinstance(found, str):
            raise SandboxHostError(
                f"local sandbox of '{name}' asks for isolation 'bwrap' "
                f"(backend_settings.isolation), but {found}"
            )
        return "bwrap"
    if wanted == "auto":
        usable, why = bwrap.probe()
        if usable:
            return "bwrap"
        raise SandboxHostError(
            f"local sandbox of '{name}' cannot be confined: bubblewrap is not usable on this "
            f"host ({why}). Install it with `{bwrap.INSTALL_HINT}` (unprivileged user "
            "namespaces must be allowed), or set backend_settings.isolation to 'none' to run "
            f"its commands UNCONFINED, with full access to this host as user '{host_user()}' "
            "(only for agents you trust)"
        )
    warn_unconfined(
        "backend_settings.isolation is 'none'; set it to 'auto' or 'bwrap' "
        f"(needs `{bwrap.INSTALL_HINT}`) to confine them"
    )
    return "none"


def start_holder(
    sandbox: Path, name: str, network: bool, display: DisplayHook, bound: list[str]
) -> bwrap.Holder:
    """Start the bubblewrap holder of a confined sandbox; its X socket is bound in when it has one.

    ``bound`` (from :func:`memory_prefix`) bounds the holder and its process 1 too.

    Raises:
        SandboxError: bwrap failed to set the namespaces up.
    """
    screen = display.display
    holder = bwrap.Holder(
        sandbox,
        label=name,
        network=network,
        extra_binds=(screen.socket_path,) if screen is not None else (),
        bound=tuple(bound),
    )
    holder.start()
    return holder


def warn_unconfined(why: str) -> None:
    """Say once per process, as a WARNING, that local sandboxes run unconfined."""
    global _unconfined_warned
    with _warn_lock:
        if _unconfined_warned:
            return
        _unconfined_warned = True
    logger.warning(
        "local sandboxes run UNCONFINED: their commands have full access to this host as "
        "user '%s' (files, network, processes). %s.",
        host_user(),
        why,
    )


def host_user() -> str:
    """The host user's name (or uid), for messages about unconfined sandboxes."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def memory_prefix(memory_mb: int | None, name: str) -> list[str]:
    """The command prefix that bounds a process's address space to ``memory_mb`` MiB.

    Every process of the sandbox is started through it (commands and the guest,
    confined or not; confined ones enter the namespaces from the host rather
    than descend from the holder, so the bound goes on each entry), and what a
    process starts inherits it. Empty when ``memory_mb`` is unset.

    Raises:
        SandboxHostError: ``memory_mb`` is set and util-linux's ``prlimit`` is not on PATH.
    """
    if memory_mb is None:
        return []
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise SandboxHostError(
            f"local sandbox of '{name}': backend_settings.memory_mb needs util-linux's "
            "'prlimit' on PATH (apt-get install util-linux), or drop the setting"
        )
    limit = memory_mb * 2**20
    return [prlimit, f"--as={limit}:{limit}", "--"]
