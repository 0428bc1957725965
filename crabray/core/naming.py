"""Names of actions and environments, and how they qualify each other.

Action and environment names are Python identifiers, so they never contain
``-``. With several environments an agent sees ``<env>-<action>``: the
separator cannot occur inside either part, so a qualified name always splits
back uniquely, and it is valid in OpenAI tool names (``^[a-zA-Z0-9_-]{1,64}$``).
"""

from __future__ import annotations

import re

QUALIFIER = "-"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def check_identifier(value: str, what: str) -> str:
    """Return ``value`` if it is a valid name, else raise ``ValueError`` saying why."""
    if not _IDENTIFIER.match(value):
        raise ValueError(
            f"{what} {value!r} must be a Python identifier of at most 64 characters "
            "(letters, digits, underscores; not starting with a digit)"
        )
    return value


def qualify(env: str, action: str) -> str:
    """The name an agent uses for ``action`` of ``env`` in a multi-environment task."""
    return f"{env}{QUALIFIER}{action}"


def split_qualified(name: str) -> tuple[str | None, str]:
    """Split ``env-action`` into ``(env, action)``; an unqualified name gives ``(None, name)``."""
    env, sep, action = name.partition(QUALIFIER)
    return (env, action) if sep else (None, name)
