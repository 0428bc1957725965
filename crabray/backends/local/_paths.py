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
transfers agree on every path. Anything else (``/etc/passwd``, ``/root/x``) is
outside the sandbox and refused. File transfers of a confined sandbox never
touch a host path: :class:`SandboxView` resolves every path from a descriptor
of the sandbox's own root directory (``/proc/PID/root`` of its pid 1), one
component at a time with ``O_NOFOLLOW``, following symlinks as the sandbox
sees them. A symlink, even one swapped in while a transfer runs, can only lead
to what the sandbox's processes see themselves, and a path whose symlinks end
outside the three directories above is refused.

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
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from crabray.backends.base import MAX_FILE_BYTES, check_file_size
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


_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""Opening a file to read: never a symlink, never blocking on a FIFO the agent planted."""

_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def is_mapped(sandbox_path: str) -> bool:
    """Whether normalized absolute ``sandbox_path`` is in one of the sandbox's own directories."""
    return any(within(sandbox_path, inside) for inside, _ in MOUNTS)


class SandboxView:
    """A confined sandbox's files as its processes see them, through a descriptor of its root.

    Every path is resolved from ``root_fd`` one component at a time: each
    directory is opened with ``O_NOFOLLOW`` relative to the one before, and a
    symlink is read and followed as the sandbox would follow it (an absolute
    target starts again at the sandbox's ``/``, ``..`` never climbs above it).
    Nothing is looked up by a host path, so a symlink swapped in by a process
    of the sandbox while a transfer runs cannot lead outside the sandbox's own
    view; the final path must also lie under ``/home/user`` or ``/tmp``.

    Args:
        root_fd: A descriptor of the sandbox's ``/`` (owned by the caller).
        owner: Host uid and gid to give new files and directories (the sandbox user),
            or None to leave them to the calling process.
        label: The sandbox directory on the host, for messages.
    """

    def __init__(self, root_fd: int, owner: tuple[int, int] | None, label: str) -> None:
        self.root_fd = root_fd
        self.owner = owner
        self.label = label

    def read(self, path: str, max_bytes: int | None = None) -> bytes:
        """The content of the regular file at sandbox path ``path``, at most ``max_bytes``.

        Raises:
            FileTooLargeError: The opened file is larger than ``max_bytes`` (see
                :func:`~crabray.backends.base.check_file_size`).
            SandboxFileError: Outside the sandbox's directories, missing, a directory or
                not a regular file (a FIFO, a socket).
            OSError: The host failed; ``errno`` says how.
        """
        with self._walk(path, "read", create=False) as (parent, name):
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                raise SandboxFileError(
                    f"cannot read '{path}': no such file in the sandbox"
                ) from None
            with os.fdopen(fd, "rb") as handle:
                mode = os.fstat(fd).st_mode
                if stat.S_ISDIR(mode):
                    raise SandboxFileError(f"cannot read '{path}': it is a directory, not a file")
                if not stat.S_ISREG(mode):
                    raise SandboxFileError(f"cannot read '{path}': it is not a regular file")
                return read_bounded(handle, path, max_bytes)

    def write(self, path: str, data: bytes) -> None:
        """Replace the file at ``path`` with ``data`` atomically, creating parent directories.

        An existing file keeps its permission bits; the new one belongs to the sandbox user.

        Raises:
            SandboxFileError: Outside the sandbox's directories, or a directory.
            OSError: The write failed; ``errno`` says how.
        """
        with self._walk(path, "write", create=True) as (parent, name):
            try:
                existing = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            except FileNotFoundError:
                existing = None
            if existing is not None and stat.S_ISDIR(existing):
                raise SandboxFileError(f"cannot write '{path}': it is a directory")
            mode = stat.S_IMODE(existing) if existing is not None else 0o644
            temp = f".{name[:200]}.{secrets.token_hex(6)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temp, flags, 0o600, dir_fd=parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    os.fchmod(fd, mode)
                    if self.owner is not None:
                        os.fchown(fd, *self.owner)
                os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with suppress(OSError):
                    os.unlink(temp, dir_fd=parent)
                raise

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory of the sandbox's own directories.

        Raises:
            SandboxFileError: ``path`` (or a symlink on the way) is outside them.
        """
        try:
            with self._walk(path, "run in", create=False) as (parent, name):
                mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return False
        return stat.S_ISDIR(mode)

    @contextmanager
    def _walk(self, path: str, operation: str, *, create: bool) -> Iterator[tuple[int, str]]:
        """Resolve ``path`` to (descriptor of its directory, final name that is no symlink).

        Raises:
            SandboxFileError: The path leads outside the sandbox's directories, through
                something that is not a directory, or through too many symlinks.
            FileNotFoundError: A directory on the way is missing (and ``create`` is false).
        """
        lexical = sandbox_abspath(path)
        if not is_mapped(lexical):
            raise outside_error(self.label, path, operation, lexical_reason(path, _MAPPED))
        pending = [part for part in lexical.split("/") if part]
        opened: list[tuple[str, int]] = []
        links = 0
        try:
            while pending:
                part = pending.pop(0)
                if part == ".":
                    continue
                if part == "..":
                    if opened:
                        os.close(opened.pop()[1])
                    continue
                parent = opened[-1][1] if opened else self.root_fd
                handle = self._open(parent, part, create=create and bool(pending))
                mode = None if handle is None else os.fstat(handle).st_mode
                if handle is not None and (not pending or not stat.S_ISDIR(mode or 0)):
                    os.close(handle)  # only directories on the way stay open
                if handle is not None and stat.S_ISLNK(mode or 0):
                    links += 1
                    if links > _MAX_SYMLINKS:
                        raise SandboxFileError(
                            f"cannot {operation} '{path}': {os.strerror(errno.ELOOP).lower()}"
                        )
                    target = self._readlink(parent, part)
                    if target.startswith("/"):
                        while opened:
                            os.close(opened.pop()[1])
                    pending = [p for p in target.split("/") if p] + pending
                    continue
                if not pending:
                    where = "/" + "/".join([*(name for name, _ in opened), part])
                    if not is_mapped(where):
                        raise outside_error(self.label, path, operation, symlink_reason(where))
                    yield parent, part
                    return
                if handle is None or not stat.S_ISDIR(mode or 0):
                    missing = "no such directory" if handle is None else "not a directory"
                    raise SandboxFileError(f"cannot {operation} '{path}': '{part}' is {missing}")
                opened.append((part, handle))
        finally:
            for _, fd in opened:
                os.close(fd)

    def _open(self, parent: int, name: str, *, create: bool) -> int | None:
        """An ``O_PATH`` descriptor of ``name`` itself (a symlink is not followed), or None
        when it does not exist; a missing directory is made first when ``create``."""
        try:
            return os.open(name, _PATH_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
        with suppress(FileExistsError):  # made meanwhile by the sandbox: use what is there
            os.mkdir(name, 0o755, dir_fd=parent)
            if self.owner is not None:
                os.chown(name, *self.owner, dir_fd=parent, follow_symlinks=False)
        return os.open(name, _PATH_FLAGS, dir_fd=parent)

    @staticmethod
    def _readlink(parent: int, name: str) -> str:
        """The target of symlink ``name``; a sandbox that swapped it meanwhile gets a refusal."""
        try:
            return os.readlink(name, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOENT):
                raise SandboxFileError(
                    f"'{name}' changed while the path was resolved; try again"
                ) from exc
            raise


def read_bounded(handle: BinaryIO, path: str, max_bytes: int | None) -> bytes:
    """All of open regular file ``handle`` if it holds at most ``max_bytes``, else refused.

    The size is the opened file's; a file growing meanwhile is read no further
    than one byte past the cap, so it is refused too.

    Raises:
        FileTooLargeError: It is larger than the cap (``MAX_FILE_BYTES`` when None).
    """
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    check_file_size(path, os.fstat(handle.fileno()).st_size, limit)
    data = handle.read(limit + 1)
    check_file_size(path, len(data), limit)
    return data
