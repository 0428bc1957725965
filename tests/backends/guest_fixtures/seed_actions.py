"""Actions written as CRAB's seed writes them: plain functions, no ``env``.

They run inside the sandbox through its guest; this module is never imported
there, its functions travel as source.
"""

from __future__ import annotations

import os

from crabray import action, evaluator

CALLS: dict[str, int] = {}
"""Per guest process: how many times ``count_calls`` ran (a new guest starts at 0)."""


@evaluator
def check_file_exist(file_path: str) -> bool:
    """Whether the file exists (the seed's first evaluator)."""
    return os.path.isfile(file_path)


@action
def divide(a: int, b: int) -> float:
    """Divide a by b; raises inside the sandbox when b is 0."""
    return _ratio(a, b)


def _ratio(a: int, b: int) -> float:
    return a / b


@action
def guest_pid() -> int:
    """The pid of the Python process the action ran in."""
    return os.getpid()


@action
def count_calls() -> int:
    """How many times this guest process ran it, this call included."""
    CALLS["n"] = CALLS.get("n", 0) + 1
    return CALLS["n"]


@action
def python_version() -> str:
    """The Python version of the sandbox (imports inside resolve in the guest)."""
    import platform

    return platform.python_version()
