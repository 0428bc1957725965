"""The terminal the ``crabray`` command owns: one console for results, one for messages."""

from __future__ import annotations

from rich.console import Console

console = Console()
"""Standard output: tables, results, the commands to type next."""
errors = Console(stderr=True)
"""Standard error: progress, warnings and errors, kept apart from output a script may parse."""
