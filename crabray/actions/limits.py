"""Bounds on what an agent may ask of a shipped action.

An agent chooses the arguments of its tool calls, so every argument that costs
the host time or memory has a ceiling, declared in the parameter's type: the
JSON schema an agent receives states it, and a call past it is an action error
naming the parameter, before anything runs in the sandbox.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

MAX_TIMEOUT_SEC = 300.0
"""Longest any shipped action may wait on the sandbox (a command, a window): five minutes."""

TimeoutSec = Annotated[float, Field(gt=0, le=MAX_TIMEOUT_SEC)]
"""Seconds an action waits; more than 0 and at most ``MAX_TIMEOUT_SEC``."""

MAX_READ_BYTES = 1_000_000
"""Most bytes ``read_file`` returns of one file (1 MB); the rest is cut, with a marker."""

MAX_CHECKED_BYTES = 16 * 1024 * 1024
"""Largest file the shipped file evaluators (``file_equals``, ``file_contains``) read: 16 MiB.

A larger file fails the check without a byte of it being read (the size is the one
of the file the backend opened), so whatever the agent leaves in its sandbox (a
sparse file of terabytes) the worker grading it holds at most this much of it."""
