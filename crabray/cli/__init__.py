"""``crabray``, the command line: one module per command group (see ``app``)."""

from crabray.cli.app import app, main_entry

__all__ = ["app", "main_entry"]
