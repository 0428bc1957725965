"""The ``/etc`` a confined local sandbox sees: made for it, not the host's.

A sandbox's ``/etc`` holds two kinds of entries:

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

Both kinds are gathered into a directory on the host (:func:`etc_view`: a
copy of the host entries and the generated files, in the temporary directory,
shared by this user's processes on this machine), which every sandbox gets as
one read-only bind at ``/etc``. Binding the forty-odd host entries one by one
cost bubblewrap about 7 ms of CPU per sandbox (each read-only bind re-reads
the mount table), a third of a sandbox's start. A new copy is made when a host
entry changes (its modification time, size or inode; looked at every
``_RECHECK_SEC``), so a sandbox started after an edit of ``/etc/resolv.conf``
sees it; an edit deep inside a host directory (``/etc/fonts/conf.d/x``) that
leaves the entry itself unchanged is not seen. Old copies stay (a running
sandbox may use one): about 2 MB each time the host's entries change.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

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
_RECHECK_SEC = 2.0
"""How long a process trusts its view before looking at the host entries' stamps again."""

Stamp = tuple[tuple[str, int, int, int], ...]

_views: dict[tuple[int, int, bool], tuple[Stamp, Path, float]] = {}
_views_lock = threading.Lock()


def etc_view(uid: int, gid: int, *, host_hosts: bool) -> Path:
    """The directory to bind read-only at a sandbox's ``/etc``: made once per machine, reused.

    Its name holds a hash of its content's sources (the host entries' stamps and the
    generated files) and the owner's uid, so every process of this user on this
    machine shares it and a change on the host leads to a new one. A directory of
    that name that this user does not own, or that others can write, is never used.

    Args:
        uid: The sandbox user's uid inside the sandbox.
        gid: Its gid inside the sandbox.
        host_hosts: The sandbox shares the host's network: the host's ``/etc/hosts``.

    Raises:
        SandboxError: The view could not be written (the temporary directory is full
            or not writable), or its name is taken by someone else's directory.
    """
    key = (uid, gid, host_hosts)
    now = time.monotonic()
    with _views_lock:
        known = _views.get(key)
        if known is not None and now - known[2] < _RECHECK_SEC:
            return known[1]
        entries = host_entries() + (["/etc/hosts"] if host_hosts else [])
        stamp = tuple(_stamp(entry) for entry in entries)
        if known is not None and known[0] == stamp:
            _views[key] = (stamp, known[1], now)
            return known[1]
        generated = generated_files(uid, gid, host_hosts=host_hosts)
        try:
            view = _shared_view(entries, stamp, generated)
        except OSError as exc:
            raise SandboxError(
                f"cannot prepare the /etc of confined sandboxes under {tempfile.gettempdir()}: "
                f"{exc}"
            ) from exc
        _views[key] = (stamp, view, now)
        return view


def _stamp(entry: str) -> tuple[str, int, int, int]:
    try:
        info = os.stat(entry)
    except OSError:
        return entry, -1, -1, -1
    return entry, info.st_mtime_ns, info.st_size, info.st_ino


def _shared_view(entries: list[str], stamp: Stamp, generated: dict[str, bytes]) -> Path:
    """The view for these sources: the existing one, or one made here and renamed into place.

    A view is never changed once in place and never removed (a sandbox of another
    process may be using it); a host change makes a new one beside it.

    Raises:
        SandboxError: The view's name is taken by a directory this user cannot trust.
    """
    digest = hashlib.sha256(repr((stamp, sorted(generated.items()))).encode()).hexdigest()
    final = Path(tempfile.gettempdir()) / f"{_VIEW_PREFIX}{os.geteuid()}-{digest[:24]}"
    if not os.path.lexists(final):
        building = Path(tempfile.mkdtemp(prefix=f"{_VIEW_PREFIX}new-"))
        try:
            _fill(building, entries, generated)
            os.chmod(building, 0o755)  # readable by bwrap running as nobody under a root driver
            os.rename(building, final)
        except OSError:
            shutil.rmtree(building)  # another process put its view in place first, or a failure
            if not os.path.lexists(final):
                raise
        else:
            logger.debug("made the /etc of confined sandboxes at %s", final)
    info = os.lstat(final)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxError(
            f"{final} is not a directory of this user that only it can write; remove it, "
            "so that confined sandboxes can get their /etc"
        )
    return final


def _fill(view: Path, entries: list[str], generated: dict[str, bytes]) -> None:
    """Copy ``entries`` into ``view`` (top-level symlinks followed, inner ones kept, modes
    kept) and write the ``generated`` files.

    What this process cannot read is left out: under a driver that is not root, the
    sandbox user is the driver's user, who could not read it through a bind either.
    """
    for entry in entries:
        target = view / entry.removeprefix("/etc/")
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if os.path.isdir(entry) and os.access(entry, os.R_OK | os.X_OK):
            shutil.copytree(
                entry,
                target,
                symlinks=True,
                ignore=_unreadable,
                copy_function=shutil.copy,
            )
        elif os.path.isfile(entry) and os.access(entry, os.R_OK):
            shutil.copy(entry, target)
    for name, data in generated.items():
        (view / name).write_bytes(data)
        (view / name).chmod(0o644)


def _unreadable(directory: str, names: list[str]) -> set[str]:
    """``copytree``'s filter: entries this process cannot read, and special files (a FIFO)."""
    left_out = set()
    for name in names:
        path = os.path.join(directory, name)
        if os.path.islink(path):
            continue
        if os.path.isdir(path):
            readable = os.access(path, os.R_OK | os.X_OK)
        else:
            readable = os.path.isfile(path) and os.access(path, os.R_OK)
        if not readable:
            left_out.add(name)
    return left_out
