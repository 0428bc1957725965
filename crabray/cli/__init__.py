"""``crabray``, the command line: one module per command group (see ``app``)."""

from crabray.cli.app import app

__all__ = ["app"]
