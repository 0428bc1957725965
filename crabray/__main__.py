"""``python -m crabray``: the same as the ``crabray`` command."""

from crabray.cli import app

app(prog_name="crabray")
