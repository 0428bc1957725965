"""Files a grader's command may run without naming them: what an agent writes there is code.

A task's grading script is the author's, but it runs in the sandbox, and a
script in the style of GUI-OS's ``eval.sh`` starts with ``source ~/.profile``,
activates a virtualenv in the home folder and calls ``jupyter`` by ``PATH``:
three places the agent can write. A ``jupyter`` shell function in
``~/.profile`` then forges the grade, with nothing of the system changed.

So a backend notes what the agent changed among the files a shell or Python
runs on its own, or a command finds by a ``PATH`` a script may set
(:func:`runs_unnamed`), and a grade that ran commands afterwards is not
verified. Files the task's setup wrote are the harness's: only changes after
the agent begins count.

Docker reads the engine's diff of the container; a directory sandbox (local)
compares two listings of its folders (:func:`list_runnable`), taken when the
agent begins and when its turn ends.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Mapping
from pathlib import Path

SHELL_STARTUP = frozenset(
    {
        ".profile",
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".bash_aliases",
        ".zshenv",
        ".zprofile",
        ".zshrc",
        ".zlogin",
        ".kshrc",
        ".mkshrc",
        ".cshrc",
        ".tcshrc",
        ".login",
        ".inputrc",
    }
)
"""Files a shell reads on its own, or that a grading script sources by habit."""

PYTHON_STARTUP = frozenset({"sitecustomize.py", "usercustomize.py", "pyvenv.cfg"})
"""Files Python runs or reads on its own at start (with ``*.pth`` files)."""

PROGRAM_DIRS = frozenset({"bin", "sbin", ".bin"})
"""Folders whose files a command finds by ``PATH`` (``~/.local/bin``, a virtualenv's ``bin``,
``node_modules/.bin``)."""

MAX_ENTRIES = 200_000
"""Most entries :func:`list_runnable` looks at in one sandbox; past it, it says so."""

MAX_DEPTH = 32
"""Deepest folder :func:`list_runnable` descends into; below it, it says so."""

UNLISTED = "(a folder too large or too deep to list whole)"
"""The entry :func:`list_runnable` adds when it did not look at everything."""


def runs_unnamed(path: str) -> bool:
    """Whether a shell or Python may run ``path`` (a POSIX path) without a command naming it:
    a shell's startup file, Python's startup hooks, or a file in a program folder.

    Example:
        >>> runs_unnamed("/home/user/Desktop/.action-env/bin/jupyter")
        True
        >>> runs_unnamed("/home/user/answer.txt")
        False
    """
    folder, name = posixpath.split(path.rstrip("/"))
    if name in SHELL_STARTUP or name in PYTHON_STARTUP or name.endswith(".pth"):
        return True
    return posixpath.basename(folder) in PROGRAM_DIRS


Listing = dict[str, tuple[int, ...]]
"""A sandbox path and its (inode, mode, size, modification and change times in ns): the
change time moves with every write and its owner cannot set it back."""


def list_runnable(folders: Mapping[Path, str]) -> Listing:
    """The files of ``folders`` (each host folder mapped to its path inside the sandbox) that
    :func:`runs_unnamed` names, without following symlinks.

    Two listings compare equal when the agent changed none of them. A walk that
    stops at :data:`MAX_ENTRIES` or :data:`MAX_DEPTH`, or at a folder it cannot
    read, adds :data:`UNLISTED`: what it did not see may have changed.
    """
    listing: Listing = {}
    stack = [(host, inside, 0) for host, inside in folders.items()]
    seen = 0
    while stack and seen <= MAX_ENTRIES:
        host, inside, depth = stack.pop()
        try:
            with os.scandir(host) as entries:  # read lazily: a folder may hold millions
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        break
                    _note(entry, posixpath.join(inside, entry.name), depth, listing, stack)
        except OSError:
            listing[UNLISTED] = ()
    if seen > MAX_ENTRIES:
        listing[UNLISTED] = ()
    return listing


def _note(
    entry: os.DirEntry[str],
    path: str,
    depth: int,
    listing: Listing,
    stack: list[tuple[Path, str, int]],
) -> None:
    """List ``entry`` (at ``path`` in the sandbox) if it runs unnamed; queue it if a folder.

    Raises:
        OSError: It could not be looked at (its folder then counts as not seen).
    """
    info = entry.stat(follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        if depth + 1 >= MAX_DEPTH:
            listing[UNLISTED] = ()
        else:
            stack.append((Path(entry.path), path, depth + 1))
    if runs_unnamed(path):
        listing[path] = (
            info.st_ino,
            info.st_mode,
            info.st_size,
            info.st_mtime_ns,
            info.st_ctime_ns,
        )


def changed(before: Listing, after: Listing) -> list[str]:
    """The paths added, removed or changed from ``before`` to ``after``, sorted; the
    :data:`UNLISTED` entry whenever ``after`` has it (what was not seen may have changed)."""
    paths = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    if UNLISTED in after:
        paths.add(UNLISTED)
    return sorted(paths)
