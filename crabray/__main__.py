"""``python -m crabray``: the same as the ``crabray`` command."""

from crabray.cli import main_entry

main_entry()
