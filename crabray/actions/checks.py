"""Shipped evaluators for terminal and file tasks, written against the backend interface.

Bind their arguments where a task declares them, e.g.
``file_contains(path="notes.txt", text="done")``, and combine them with
``&``, ``|``, ``~`` or in a graph.
"""

from __future__ import annotations

import logging
from typing import Any

from crabray.actions.limits import MAX_CHECKED_BYTES
from crabray.core import evaluator
from crabray.core.errors import FileTooLargeError, SandboxFileError

logger = logging.getLogger(__name__)


def _read(env: Any, path: str) -> str | None:
    """The file's text, or None when there is no file to check: the check fails.

    None for a missing file, one that is not regular, or one past
    :data:`~crabray.actions.limits.MAX_CHECKED_BYTES`.
    """
    try:
        data: bytes = env.get_file(path, max_bytes=MAX_CHECKED_BYTES)
    except FileTooLargeError as exc:
        logger.info("check of '%s' fails: %s", path, exc)
        return None
    except SandboxFileError:
        return None
    return data.decode("utf-8", errors="replace")


@evaluator
def path_exists(path: str, env: Any) -> bool:
    """The file or directory exists in the sandbox.

    Args:
        path: The path to check.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    exit_code: int = env.exec(["test", "-e", path]).exit_code
    return exit_code == 0


@evaluator
def file_equals(path: str, content: str, env: Any, strip: bool = True) -> bool:
    """The file's text equals the expected content.

    A file over 16 MiB (``MAX_CHECKED_BYTES``) is not read and fails the check.

    Args:
        path: The file.
        content: The expected text.
        strip: Ignore leading and trailing white space on both sides.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    text = _read(env, path)
    if text is None:
        return False
    return text.strip() == content.strip() if strip else text == content


@evaluator
def file_contains(path: str, text: str, env: Any) -> bool:
    """The file exists and contains the text.

    A file over 16 MiB (``MAX_CHECKED_BYTES``) is not read and fails the check.

    Args:
        path: The file.
        text: The text to find.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    found = _read(env, path)
    return found is not None and text in found


@evaluator
def command_succeeds(command: str, env: Any) -> bool:
    """The shell command exits 0 in the sandbox.

    Args:
        command: The command line.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    ok: bool = env.exec(command, timeout_sec=60).ok
    return ok


@evaluator
def command_output_contains(command: str, text: str, env: Any) -> bool:
    """The shell command exits 0 and its standard output contains the text.

    Args:
        command: The command line.
        text: The text to find in its output.
        env: The sandbox the action runs in, injected at run time (not part of the schema).
    """
    result = env.exec(command, timeout_sec=60)
    return result.ok and text in result.stdout


@evaluator(require_submit=True, local=True)
def submission_equals(expected: str, submission: Any, strip: bool = True) -> bool:
    """The agent's submitted answer equals the expected one.

    Args:
        expected: The right answer.
        submission: The agent's submitted answer, injected at run time (not part of the schema).
        strip: Ignore surrounding white space and letter case.
    """
    given = str(submission)
    return given.strip().lower() == expected.strip().lower() if strip else given == expected
