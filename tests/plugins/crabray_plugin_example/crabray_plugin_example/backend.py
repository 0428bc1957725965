"""The ``example`` backend: a local sandbox that starts with a ``PLUGIN`` marker file."""

from __future__ import annotations

from crabray.backends import LocalBackend


class ExampleBackend(LocalBackend):
    """A local sandbox whose every fresh start holds ``PLUGIN`` (so a task can tell it ran here)."""

    def start(self) -> None:
        super().start()
        self.put_file("PLUGIN", b"example\n")
