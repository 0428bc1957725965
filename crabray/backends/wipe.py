"""Removing whatever tree a sandbox's commands made: no recursion, no path length, no leak.

An agent can make a directory 3,000 levels deep, a path longer than ``PATH_MAX``,
directories without permissions, or a million entries. ``shutil.rmtree`` walks
with recursion (Python's limit is hit near 1,000 levels) and paths; this walks
with one open directory at a time, an explicit stack of names, and ``..`` to
climb back, checking that each ``..`` is the directory it came down from. It is
meant for trees whose processes are already dead (reset and close kill them
first): nothing moves directories while it runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable

logger = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_entry(parent_fd: int, name: str) -> None:
    """Remove entry ``name`` of directory ``parent_fd``: a file, a symlink or a whole tree.

    An entry that is already gone counts as removed (several cleanups may race
    on one abandoned sandbox). Directories a command made read-only or
    unsearchable are made writable first (the caller owns them, or is root).

    Raises:
        OSError: Something could not be removed (the tree is left partly removed).
    """
    try:
        mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        _unlink(parent_fd, name)
        return
    _remove_tree(parent_fd, name)


def remove_path(path: str) -> None:
    """Remove ``path`` (a file, a symlink or a tree) as :func:`remove_entry` does.

    Raises:
        OSError: Something could not be removed.
    """
    path = os.path.abspath(path)
    parent, name = os.path.split(path)
    try:
        parent_fd = os.open(parent, _DIR_FLAGS)
    except FileNotFoundError:
        return
    try:
        remove_entry(parent_fd, name)
    finally:
        os.close(parent_fd)


def _remove_tree(top_fd: int, top: str) -> None:
    """Remove directory ``top`` of ``top_fd`` and everything under it, one level open at a time.

    ``names`` is the path from ``top`` down to the open directory; ``pending``
    holds, per level, the subdirectories still to remove; ``seen`` each level's
    (device, inode) so a climb by ``..`` is checked.
    """
    fd = _open_dir(top_fd, top)
    if fd is None:
        return
    names: list[str] = [top]
    seen: list[tuple[int, int]] = [_identity(fd)]
    pending: list[list[str]] = [_empty_but_dirs(fd)]
    try:
        while True:
            if pending[-1]:
                child = pending[-1].pop()
                inner = _open_dir(fd, child)
                if inner is None:
                    continue
                os.close(fd)
                fd = inner
                names.append(child)
                seen.append(_identity(fd))
                pending.append(_empty_but_dirs(fd))
                continue
            done = names.pop()
            seen.pop()
            pending.pop()
            if not names:
                os.close(fd)
                fd = -1
                _rmdir(top_fd, done)
                return
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            if _identity(fd) != seen[-1]:
                raise OSError(f"directory {'/'.join(names)} moved while it was being removed")
            _rmdir(fd, done)
    finally:
        if fd >= 0:
            os.close(fd)


def _empty_but_dirs(fd: int) -> list[str]:
    """Unlink every entry of directory ``fd`` but its subdirectories; their names."""
    dirs: list[str] = []
    with os.scandir(fd) as entries:
        listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, is_dir in listed:
        if is_dir:
            dirs.append(name)
        else:
            _unlink(fd, name)
    return dirs


def _open_dir(parent_fd: int, name: str) -> int | None:
    """Directory ``name`` of ``parent_fd``, opened (made readable if need be); None if gone."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        return None
    except PermissionError:
        _make_writable(parent_fd)
        os.chmod(name, stat.S_IRWXU, dir_fd=parent_fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    if stat.S_IMODE(os.fstat(fd).st_mode) & stat.S_IRWXU != stat.S_IRWXU:
        _make_writable(fd)  # listed, searched (to climb back by ``..``) and emptied
    return fd


def _unlink(parent_fd: int, name: str) -> None:
    _remove_name(os.unlink, parent_fd, name)


def _rmdir(parent_fd: int, name: str) -> None:
    _remove_name(os.rmdir, parent_fd, name)


def _remove_name(remove: Callable[..., None], parent_fd: int, name: str) -> None:
    """``remove`` entry ``name`` of ``parent_fd``, making the directory writable if need be."""
    try:
        remove(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return
    except PermissionError:
        _make_writable(parent_fd)
        with contextlib.suppress(FileNotFoundError):
            remove(name, dir_fd=parent_fd)


def _make_writable(fd: int) -> None:
    """Give the owner every permission on directory ``fd``, so its entries can be removed."""
    os.fchmod(fd, stat.S_IRWXU | stat.S_IMODE(os.fstat(fd).st_mode))


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino
