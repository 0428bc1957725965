"""The one layout and the one rule that keep a sandbox's file paths inside its directory.

Every backend whose sandbox is a directory (local, ssh, and vm through ssh)
lays it out the same way (``work``, ``home`` and ``tmp`` under the sandbox
root) and checks a path in two steps, with the same refusals and the same
messages:

1. lexically: the path, made absolute and with ``..`` folded, must be the
   sandbox root or below it (:func:`confine_lexically`);
2. really: where the path leads after following symlinks (on the host, or on
   the remote machine over SFTP) must still be inside the root
   (:func:`check_real`).

Paths are POSIX strings here, so the same code serves host paths and paths
on a remote machine.
"""

from __future__ import annotations

import posixpath

from crabray.core.errors import SandboxFileError

WORK_DIR = "work"
"""Directory inside the sandbox root where commands start and relative paths resolve."""

HOME_DIR = "home"
"""Directory inside the sandbox root that ``HOME`` points to."""

TMP_DIR = "tmp"
"""Directory inside the sandbox root that ``TMPDIR`` points to.

``HOME`` and ``TMPDIR`` sit beside the working directory on the host, not in
it, so an agent listing its working directory sees only what it and the task
put there.
"""


def within(path: str, root: str) -> bool:
    """Whether normalized ``path`` is ``root`` itself or below it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def outside_error(root: str, path: str, operation: str, why: str) -> SandboxFileError:
    """The refusal of ``path``, naming the sandbox and why the path leaves it."""
    return SandboxFileError(
        f"refusing to {operation} '{path}': it is outside the sandbox directory {root}: {why}"
    )


def lexical_reason(path: str, absolute_hint: str = "") -> str:
    """Why ``path`` is lexically outside: a ``..`` climbs out, or it is absolute elsewhere."""
    if ".." in path.split("/"):
        return "'..' leads out of it"
    return "it is an absolute path outside it" + (f" ({absolute_hint})" if absolute_hint else "")


def confine_lexically(
    root: str, candidate: str, path: str, operation: str, *, absolute_hint: str = ""
) -> str:
    """``candidate`` (the absolute form of ``path``) normalized, if it stays inside ``root``.

    Args:
        root: The sandbox root (normalized, no symlinks).
        candidate: ``path`` made absolute (joined to the working directory when relative).
        path: What the caller asked for, for the message.
        operation: What was to be done (``"read"``, ``"write"``), for the message.
        absolute_hint: Said after "an absolute path outside it" (which paths are inside).

    Raises:
        SandboxFileError: ``..`` or an absolute path leads out of ``root``.
    """
    lexical = posixpath.normpath(candidate)
    if not within(lexical, root):
        raise outside_error(root, path, operation, lexical_reason(path, absolute_hint))
    return lexical


def check_real(root: str, real: str, path: str, operation: str) -> None:
    """Refuse ``path`` when ``real`` (where its symlinks lead) is outside ``root``.

    Raises:
        SandboxFileError: A symlink in the path points outside the sandbox.
    """
    if not within(real, root):
        raise outside_error(root, path, operation, symlink_reason(real))


def symlink_reason(target: str) -> str:
    """Why a path whose symlinks lead to ``target`` is outside."""
    return f"a symlink in the path points outside it (to {target})"
