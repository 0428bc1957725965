"""How the ``crabray`` command shows an error: one paragraph, an exit code, no traceback.

The command group in ``cli.py`` calls ``show_error`` for whatever a command
raises, so no command has error handling of its own. Errors crabray raises on
purpose (``CrabrayError``) carry their file, field and reason already; the
operating system's errors (a path that is a file, a read-only file system)
and a few of Python's (a nesting too deep to parse) are worded here; an error
raised on a Ray worker is shown as the error it wraps, without Ray's trace.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import TYPE_CHECKING, TypeGuard

from rich.console import Console

from crabray.cli.terminal import safe_text
from crabray.core.errors import CrabrayError
from crabray.core.words import counted

if TYPE_CHECKING:
    from crabray.formats import SuiteErrors

ERROR_EXIT = 2
"""Bad input (a suite with problems included: every problem is listed) or a failed command."""

_OS_ADVICE = {
    errno.ENOTDIR: "a part of it is a file, not a directory; give a directory path",
    errno.EISDIR: "it is a directory; give a file path",
    errno.EROFS: "the file system is read-only; give a path on a writable one",
    errno.EACCES: "permission denied; give a path you can write, or fix its permissions",
    errno.EPERM: "not permitted; give a path you can write, or fix its permissions",
    errno.ENOSPC: "the disk is full; free space or give a path on another disk",
    errno.ENOENT: "it does not exist; check the path",
    errno.ELOOP: "it is a loop of symbolic links; point to the real file or folder",
    errno.EEXIST: "it already exists as something else; give another path",
}


def show_error(exc: BaseException, errors: Console) -> int | None:
    """Print ``exc`` for the user on ``errors``; return the exit code, or None for a bug.

    Args:
        exc: What a command raised.
        errors: The console of stderr.
    """
    exc = _unwrapped(exc)
    if _is_suite_errors(exc):
        for problem in exc.errors:
            errors.print(f"[red]✗[/] {safe_text(problem)}", highlight=False, soft_wrap=True)
        errors.print(f"[bold red]{counted(len(exc.errors), 'problem')}[/] in {safe_text(exc.file)}")
        return ERROR_EXIT
    message = _message(exc)
    if message is None:
        return None
    errors.print(f"[bold red]error:[/] {safe_text(message)}", highlight=False, soft_wrap=True)
    return ERROR_EXIT


def _is_suite_errors(exc: BaseException) -> TypeGuard[SuiteErrors]:
    """Whether ``exc`` lists a suite's problems (``crabray.formats.SuiteErrors``).

    Only a loaded module can have raised one: a command that loaded no suite
    (``crabray leaderboard``) does not load the suite formats, and the authoring
    model with them, to show its error.
    """
    suite = sys.modules.get("crabray.formats.suite")
    return suite is not None and isinstance(exc, suite.SuiteErrors)


def _message(exc: BaseException) -> str | None:
    if isinstance(exc, CrabrayError):
        return str(exc)
    if isinstance(exc, OSError):
        return _os_message(exc)
    if isinstance(exc, RecursionError):
        return (
            "an input is nested too deeply to read (Python's recursion limit was hit); "
            "flatten the deeply nested value (run with -vv to see where)"
        )
    return None


def _os_message(exc: OSError) -> str:
    """``path: what went wrong; what to do`` for an error of the operating system."""
    path = exc.filename if exc.filename is not None else "a file"
    reason = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))
    advice = _OS_ADVICE.get(exc.errno or 0, "check the path and its permissions")
    return f"{path}: {reason} ({advice})"


def _unwrapped(exc: BaseException) -> BaseException:
    """The error a Ray worker raised, if ``exc`` is Ray's wrapper around one."""
    cause = getattr(exc, "cause", None)
    if type(exc).__module__.startswith("ray.") and isinstance(cause, BaseException):
        return cause
    return exc
