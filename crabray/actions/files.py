"""File actions: read, write, list and test files in the environment's sandbox.

Listing and existence go through ``exec`` (POSIX ``ls``/``test``), so they work
on every backend that runs commands; reading and writing use the backend's
file transfer.
"""

from __future__ import annotations

import shlex
from typing import Any

from crabray.actions.limits import MAX_READ_BYTES
from crabray.core import action
from crabray.core.errors import FileTooLargeError, SandboxFileError


@action
def read_file(path: str, env: Any) -> str:
    """Read a text file from the sandbox; past 1 MB it is cut, with a line saying so.

    Args:
        path: Path of the file, absolute or relative to the working directory.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    # The backend checks the size of the file it opened: no spelling of the path
    # (``a/../big``) makes the check and the read see different files.
    try:
        data: bytes = env.get_file(path, max_bytes=MAX_READ_BYTES)
    except FileTooLargeError as exc:
        return _head(env, path, exc.size)
    except SandboxFileError:
        found = _stat(env, path)
        if found is None or found[0]:
            raise  # missing, refused, or a regular file: the backend's answer stands
        return _head(env, path, None)  # a device, a pipe
    return _cut(data.decode("utf-8", errors="replace"), path, len(data))


def _head(env: Any, path: str, size: int | None) -> str:
    """The first ``MAX_READ_BYTES`` of a file too big, or not regular, read in the sandbox.

    No more than that (and a command's output cap) reaches the worker.
    """
    head = env.exec(["head", "-c", str(MAX_READ_BYTES), "--", path])
    if not head.ok:
        raise SandboxFileError(f"cannot read '{path}': {head.stderr.strip()}")
    return _cut(head.stdout, path, size, cut=True)


def _stat(env: Any, path: str) -> tuple[bool, int] | None:
    """Whether ``path`` is a regular file (after symlinks) and its size; None if stat fails."""
    result = env.exec(["stat", "-L", "-c", "%s %F", "--", path])
    size, _, kind = result.stdout.strip().partition(" ")
    if not result.ok or not size.isdigit():
        return None
    return kind.startswith("regular"), int(size)


def _cut(text: str, path: str, size: int | None, *, cut: bool = False) -> str:
    """``text`` within the cap, with a last line saying it was cut when it was."""
    if not cut and (size is None or size <= MAX_READ_BYTES):
        return text
    encoded = text.encode("utf-8", errors="replace")[:MAX_READ_BYTES]
    total = "" if size is None else f" of {size}"
    kept = encoded.decode("utf-8", errors="ignore")
    return f"{kept}\n[read_file cut '{path}' at {MAX_READ_BYTES} bytes{total}]"


@action
def write_file(path: str, content: str, env: Any) -> str:
    """Write a text file in the sandbox, creating parent directories; replaces an existing file.

    Args:
        path: Path of the file, absolute or relative to the working directory.
        content: The full new content of the file.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    env.put_file(path, content.encode("utf-8"))
    return f"wrote {len(content)} characters to {path}"


@action
def list_files(env: Any, path: str = ".") -> list[str]:
    """List the entries of a directory in the sandbox, sorted; directories end with '/'.

    Args:
        path: The directory, absolute or relative to the working directory.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    result = env.exec(["ls", "-1Ap", "--", path])
    if not result.ok:
        raise SandboxFileError(f"cannot list '{path}': {result.stderr.strip()}")
    return sorted(line for line in result.stdout.splitlines() if line)


@action
def file_exists(path: str, env: Any) -> bool:
    """Whether a file or directory exists in the sandbox.

    Args:
        path: The path to check.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    exit_code: int = env.exec(f"test -e {shlex.quote(path)}").exit_code
    return exit_code == 0
