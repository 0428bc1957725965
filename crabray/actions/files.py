"""File actions: read, write, list and test files in the environment's sandbox.

Listing and existence go through ``exec`` (POSIX ``ls``/``test``), so they work
on every backend that runs commands; reading and writing use the backend's
file transfer.
"""

from __future__ import annotations

import shlex
from typing import Any

from crabray.core import action
from crabray.core.errors import SandboxFileError


@action
def read_file(path: str, env: Any) -> str:
    """Read a text file from the sandbox.

    Args:
        path: Path of the file, absolute or relative to the working directory.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    data: bytes = env.get_file(path)
    return data.decode("utf-8", errors="replace")


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
