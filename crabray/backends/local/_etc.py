"""The ``/etc`` a confined local sandbox sees: made for it, not the host's.

A sandbox gets a fresh ``/etc`` in bubblewrap's root file system with two
kinds of entries:

- files written for the sandbox (:func:`generated_files`): ``passwd`` and
  ``group`` naming only ``root``, the sandbox user (``user``, home
  ``/home/user``) and ``nobody``; ``hosts`` and ``hostname`` for the
  sandbox's own host name; ``nsswitch.conf`` reading those files;
- host entries programs need to run, read-only (:data:`HOST_ENTRIES`): the
  dynamic linker's cache, ``alternatives``, CA certificates (never
  ``/etc/ssl/private``), time zone, DNS resolver settings, fonts and the
  configuration of shells, Python, X and Chromium.

Nothing else of the host's ``/etc`` exists inside: no SSH host keys, no
``shadow``, no package manager credentials (``pip.conf``, ``npmrc``), no
``sudoers``, no ``machine-id``.

Both kinds are gathered once per process into a directory on the host
(:func:`etc_view`: a copy of the host entries and the generated files), which
every sandbox gets as one read-only bind at ``/etc``. Binding the forty-odd
host entries one by one cost bubblewrap about 7 ms of CPU per sandbox (each
read-only bind re-reads the mount table), a third of a sandbox's start. The
copy is made again when a host entry changes (its modification time, size or
inode), so a sandbox started after an edit of ``/etc/resolv.conf`` sees it;
an edit deep inside a host directory (``/etc/fonts/conf.d/x``) that leaves
the entry itself unchanged is seen by the next process only.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path

from crabray.backends.ownership import write_owner
from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

SANDBOX_HOSTNAME = "crabray"
"""The host name inside every confined sandbox (its own UTS namespace)."""

HOST_ENTRIES: tuple[str, ...] = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "chromium",
    "chromium.d",
    "debian_version",
    "fonts",
    "gai.conf",
    "gtk-2.0",
    "gtk-3.0",
    "host.conf",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "lsb-release",
    "magic",
    "magic.mime",
    "mime.types",
    "os-release",
    "perl",
    "pki/ca-trust",
    "pki/tls/certs",
    "profile",
    "protocols",
    "python3",
    "resolv.conf",
    "services",
    "shells",
    "ssl/certs",
    "ssl/openssl.cnf",
    "terminfo",
    "timezone",
    "vim",
    "X11",
    "xdg",
)
"""Entries of the host's ``/etc`` bound read-only into a sandbox, when they exist.

Besides these, versioned Python directories (``/etc/python3.N``) are bound too.
"""


def host_entries() -> list[str]:
    """The absolute host paths under ``/etc`` to bind into a sandbox: those that exist here."""
    names = list(HOST_ENTRIES)
    with contextlib.suppress(OSError):
        names += sorted(n for n in os.listdir("/etc") if n.startswith("python3."))
    return [f"/etc/{name}" for name in names if os.path.exists(f"/etc/{name}")]


def generated_files(uid: int, gid: int, *, host_hosts: bool) -> dict[str, bytes]:
    """The files written for a sandbox whose user has ``uid``/``gid`` inside: name -> content.

    Args:
        uid: The sandbox user's uid inside the sandbox.
        gid: Its gid inside the sandbox.
        host_hosts: Leave ``hosts`` out (the sandbox shares the host's network and
            gets the host's ``/etc/hosts`` instead).
    """
    passwd = [
        "root:x:0:0:root:/root:/usr/sbin/nologin",
        f"user:x:{uid}:{gid}:sandbox user:/home/user:/bin/sh",
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
    ]
    group = ["root:x:0:", f"user:x:{gid}:", "nogroup:x:65534:"]
    if uid in (0, 65534):
        passwd = [passwd[1]]
    if gid in (0, 65534):
        group = [group[1]]
    files = {
        "passwd": "\n".join(passwd) + "\n",
        "group": "\n".join(group) + "\n",
        "hostname": f"{SANDBOX_HOSTNAME}\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
    }
    if not host_hosts:
        files["hosts"] = (
            f"127.0.0.1\tlocalhost {SANDBOX_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        )
    return {name: text.encode() for name, text in files.items()}


_VIEW_PREFIX = "crabray-etc-"
"""Views are ``TMP/crabray-etc-XXXX/etc``: the orphan cleanup of local sandboxes (which
globs ``crabray-*`` and reads ``owner.json``) removes those of a process that died."""

_views: dict[tuple[int, int, bool], tuple[tuple[tuple[str, int, int, int], ...], Path]] = {}
_made: list[Path] = []
_views_lock = threading.Lock()


def etc_view(uid: int, gid: int, *, host_hosts: bool) -> Path:
    """The directory to bind read-only at a sandbox's ``/etc`` (made once, then reused).

    Args:
        uid: The sandbox user's uid inside the sandbox.
        gid: Its gid inside the sandbox.
        host_hosts: The sandbox shares the host's network: the host's ``/etc/hosts``.

    Raises:
        SandboxError: The view could not be written (the temporary directory is full
            or not writable).
    """
    key = (uid, gid, host_hosts)
    entries = host_entries() + (["/etc/hosts"] if host_hosts else [])
    stamp = tuple(_stamp(entry) for entry in entries)
    with _views_lock:
        known = _views.get(key)
        if known is not None and known[0] == stamp:
            return known[1]
        try:
            view = _make_view(entries, generated_files(uid, gid, host_hosts=host_hosts))
        except OSError as exc:
            raise SandboxError(
                f"cannot prepare the /etc of confined sandboxes under {tempfile.gettempdir()}: "
                f"{exc}"
            ) from exc
        # An older view stays until the process exits: running sandboxes still see it.
        _views[key] = (stamp, view)
        return view


def _stamp(entry: str) -> tuple[str, int, int, int]:
    try:
        info = os.stat(entry)
    except OSError:
        return entry, -1, -1, -1
    return entry, info.st_mtime_ns, info.st_size, info.st_ino


def _make_view(entries: list[str], generated: dict[str, bytes]) -> Path:
    """Copy ``entries`` (top-level symlinks followed, inner ones kept) and write ``generated``."""
    top = Path(tempfile.mkdtemp(prefix=_VIEW_PREFIX))
    if not _made:
        atexit.register(_remove_views)
    _made.append(top)
    # Readable by the unprivileged user bwrap runs as when the driver is root.
    os.chmod(top, 0o755)
    write_owner(top)
    view = top / "etc"
    view.mkdir(mode=0o755)
    for entry in entries:
        target = view / entry.removeprefix("/etc/")
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if os.path.isdir(entry):
            shutil.copytree(entry, target, symlinks=True, ignore_dangling_symlinks=True)
        elif os.path.exists(entry):
            shutil.copy2(entry, target)
    for name, data in generated.items():
        (view / name).write_bytes(data)
        (view / name).chmod(0o644)
    logger.debug("made the /etc of confined sandboxes at %s", view)
    return view


def _remove_views() -> None:
    for top in _made:
        try:
            shutil.rmtree(top)
        except OSError as exc:
            logger.warning("could not remove %s (the orphan cleanup will): %s", top, exc)
