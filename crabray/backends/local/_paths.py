"""Where a local sandbox's paths live on the host: one mapping for commands and files.

A local sandbox is a directory ``ROOT`` on the host holding ``work``, ``home``
and ``tmp``. Inside the sandbox those directories have fixed names, the same in
every sandbox, so a task can spell absolute paths such as
``/home/user/Desktop/x.txt``:

=====================  ===================  ===============================
sandbox path           host path            what it is
=====================  ===================  ===============================
``/home/user/work/…``  ``ROOT/work/…``      working directory (relative paths)
``/home/user/…``       ``ROOT/home/…``      ``HOME``
``/tmp/…``             ``ROOT/tmp/…``       ``TMPDIR``
=====================  ===================  ===============================

Confined (bubblewrap) sandboxes mount exactly these, so commands and file
transfers agree on every path, and symlinks are followed as a command inside
would follow them. Anything else (``/etc/passwd``, ``/root/x``) is outside the
sandbox and refused.

Unconfined sandboxes run commands on the host, where these names do not exist:
commands see ``HOME=ROOT/home``, ``TMPDIR=ROOT/tmp`` and start in
``ROOT/work``. File transfers still accept the sandbox paths above (so a
task's setup and evaluators work in both modes) and, as before, host paths
that lie inside ``ROOT``; a host path inside ``ROOT`` wins over the ``/tmp``
mapping when ``ROOT`` itself is under ``/tmp``. Symlinks are host symlinks
there and resolve on the host; the result must still be inside ``ROOT``.
"""

from __future__ import annotations

import errno
import os
import posixpath
from pathlib import Path

from crabray.backends.confinement import (
    HOME_DIR,
    TMP_DIR,
    WORK_DIR,
    check_real,
    confine_lexically,
    lexical_reason,
    outside_error,
    symlink_reason,
    within,
)
from crabray.core.errors import SandboxFileError

SANDBOX_HOME = "/home/user"
"""``HOME`` inside a sandbox."""

SANDBOX_WORKDIR = "/home/user/work"
"""The working directory inside a sandbox: where commands start, what relative paths mean."""

SANDBOX_TMP = "/tmp"
"""``TMPDIR`` inside a sandbox."""

MOUNTS: tuple[tuple[str, str], ...] = (
    (SANDBOX_WORKDIR, WORK_DIR),
    (SANDBOX_HOME, HOME_DIR),
    (SANDBOX_TMP, TMP_DIR),
)
"""(sandbox path, directory under the root), most specific first."""

_MAPPED = f"only paths under {SANDBOX_HOME}/, {SANDBOX_TMP}/ and relative paths are in the sandbox"
"""What an absolute path outside a local sandbox is told about the paths that are inside."""

_MAX_SYMLINKS = 40
"""As many symlinks as Linux follows in one path before ``ELOOP``."""


def to_host(root: Path, sandbox_path: str) -> Path | None:
    """The host path of a normalized absolute sandbox path, or None when it is not mapped."""
    for inside, directory in MOUNTS:
        if sandbox_path == inside or sandbox_path.startswith(inside + "/"):
            return root / directory / sandbox_path[len(inside) :].lstrip("/")
    return None


def sandbox_abspath(path: str, cwd: str = SANDBOX_WORKDIR) -> str:
    """``path`` made absolute against the sandbox's working directory, ``..`` folded."""
    return posixpath.normpath(posixpath.join(cwd, path))


def resolve_confined(root: Path, path: str, operation: str) -> Path:
    """The host path a confined command would reach at ``path``, following symlinks inside.

    Symlinks are read on the host but their targets are sandbox paths, so an
    absolute target like ``/home/user/x`` lands in ``ROOT/home/x``.

    Raises:
        SandboxFileError: ``path`` (or a symlink on the way) leads outside the mapped
            directories, or there are too many symlinks.
    """
    lexical = sandbox_abspath(path)
    if to_host(root, lexical) is None:
        raise outside_error(str(root), path, operation, lexical_reason(path, _MAPPED))
    pending = list(Path(lexical).parts[1:])
    current = "/"
    links = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = posixpath.dirname(current)
            continue
        candidate = posixpath.join(current, part)
        host = to_host(root, candidate)
        if host is not None and host.is_symlink():
            links += 1
            if links > _MAX_SYMLINKS:
                raise SandboxFileError(
                    f"cannot {operation} '{path}': {os.strerror(errno.ELOOP).lower()}"
                )
            target = os.readlink(host)
            if target.startswith("/"):
                current = "/"
            pending = [*Path(target).parts[1 if target.startswith("/") else 0 :], *pending]
            continue
        current = candidate
    host = to_host(root, current)
    if host is None:
        raise outside_error(str(root), path, operation, symlink_reason(current))
    return host


def resolve_unconfined(root: Path, path: str, operation: str) -> Path:
    """The host path of ``path`` for an unconfined sandbox (see the module docstring).

    Raises:
        SandboxFileError: ``path`` resolves (following host symlinks) outside ``root``.
    """
    top = str(root)
    if os.path.isabs(path):
        candidate = posixpath.normpath(path)
        if not within(candidate, top):
            mapped = to_host(root, candidate)
            if mapped is None:
                raise outside_error(top, path, operation, lexical_reason(path, _MAPPED))
            candidate = str(mapped)
    else:
        candidate = str(root / WORK_DIR / path)
    confine_lexically(top, candidate, path, operation, absolute_hint=_MAPPED)
    real = os.path.realpath(candidate)
    check_real(top, real, path, operation)
    return Path(real)
