"""``Env``: the type of the ``env`` an action or evaluator receives when it runs.

An action whose function takes the kept parameter ``env`` is handed the
environment it runs in: during an episode, one of its sandboxes (or the
sandbox-less root environment), forwarding the backend interface; in CRAB's
in-process API, a ``crabray.core.Environment``. Both have this shape, so action
libraries are typed against it and run on any backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

TrajectoryEntry = tuple[str, dict[str, Any], Any]
"""One recorded call: (action name, arguments, return value), as CRAB records it."""


@dataclass
class AgentSignals:
    """What the agent declared through the root actions during an episode."""

    submitted: bool = False
    submission: Any = None
    completed: bool = False
    failed: bool = False
    reason: str | None = None


class CommandOutcome(Protocol):
    """What running a command gave (a backend's ``ExecResult``)."""

    @property
    def exit_code(self) -> int:
        """The command's exit status; -1 when it was killed."""

    @property
    def stdout(self) -> str:
        """What it printed."""

    @property
    def stderr(self) -> str:
        """What it printed to standard error."""

    @property
    def timed_out(self) -> bool:
        """Whether its timeout killed it."""

    @property
    def duration_sec(self) -> float:
        """How long it ran, in seconds."""

    @property
    def ok(self) -> bool:
        """Whether it exited 0 within its timeout."""


class Env(Protocol):
    """An environment as an action sees it: a name, the sandbox's interface, the episode's state.

    Attributes:
        name: The environment's name (``root`` for the sandbox-less root).
        signals: The episode's agent signals (submit, complete, fail), shared by all
            its environments.
        trajectory: The agent's calls in this environment, as CRAB records them.
    """

    name: str
    signals: AgentSignals
    trajectory: list[TrajectoryEntry]

    def take_action(self, action: Any, parameters: dict[str, Any] | None = None) -> Any:
        """Run ``action`` here (CRAB's API)."""

    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> CommandOutcome:
        """Run a command in the sandbox."""

    def put_file(self, path: str, data: bytes) -> None:
        """Write a file in the sandbox."""

    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read a file from the sandbox."""

    def screenshot(self) -> bytes:
        """A PNG of the sandbox's screen."""
