"""The terminal the ``crabray`` command owns: one console for results, one for messages."""

from __future__ import annotations

from rich.console import Console

console = Console()
"""Standard output: tables, results, the commands to type next."""
errors = Console(stderr=True)
"""Standard error: progress, warnings and errors, kept apart from output a script may parse."""


def print_copyable(line: str) -> None:
    """A line a user copies (a command): one line whatever the width, no colours."""
    console.print(line, soft_wrap=True, highlight=False)
