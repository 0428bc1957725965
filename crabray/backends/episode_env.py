"""``EpisodeEnv``: what an action receives as ``env`` during an episode (an ``Env``).

It names one sandbox of the episode and forwards the backend interface to it,
so action libraries see the same object whether the sandbox lives in this
process or behind a Ray actor on another node. The root environment has no
sandbox; it carries the agent's signals (submit, complete, fail), which all
environments of an episode share.
"""

from __future__ import annotations

import logging
from typing import Any

from crabray.backends.base import Backend, ExecResult
from crabray.backends.guest import NoPythonError, python_call
from crabray.core.actions import Action
from crabray.core.env import AgentSignals, TrajectoryEntry
from crabray.core.errors import ActionError, ConfigError, SandboxError

logger = logging.getLogger(__name__)


class EpisodeEnv:
    """One named environment of a running episode; it is what ``crabray.core.env.Env`` types.

    Args:
        name: The environment's name (``root`` for the sandbox-less root).
        backend: The sandbox, or ``None`` for the root environment.
        signals: The episode's shared agent signals.
    """

    def __init__(self, name: str, backend: Backend | None, signals: AgentSignals) -> None:
        self.name = name
        self._backend = backend
        self.signals = signals
        self.grading = False
        """Set by the episode while an evaluator or scorer runs here."""
        self.graded_by_command = False
        """Whether an evaluator or scorer ran a command here (see ``Backend.grader_trusted``)."""
        self.trajectory: list[TrajectoryEntry] = []
        """The agent's calls in this environment, as CRAB records them: (action name,
        arguments, return value); CRAB's evaluators read the root environment's."""

    def take_action(self, action: Any, parameters: dict[str, Any] | None = None) -> Any:
        """Run ``action`` in this environment (CRAB's API; not recorded in ``trajectory``)."""
        return action.run(self, **(parameters or {}))

    def _action_endpoint(self, action: Any, parameters: dict[str, Any]) -> Any:
        """CRAB's private name for ``take_action``, which CRAB's shipped evaluators call."""
        return self.take_action(action, parameters)

    @property
    def backend(self) -> Backend:
        """The sandbox behind this environment.

        Raises:
            SandboxError: This is the root environment, which has none.
        """
        if self._backend is None:
            raise SandboxError(
                f"environment '{self.name}' has no sandbox: an action that runs commands or "
                "touches files must not be declared local=True"
            )
        return self._backend

    def exec(
        self,
        command: str | list[str],
        *,
        timeout_sec: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run a command in the sandbox (see ``Backend.exec``).

        Raises:
            ActionError: The command, its directory or environment holds a NUL byte,
                which no program's arguments can carry (the caller's mistake).
        """
        words = [command] if isinstance(command, str) else list(command)
        words += [cwd or "", *(env or {}).keys(), *(env or {}).values()]
        if any("\0" in word for word in words):
            raise ActionError("the command holds a NUL byte, which no program's arguments carry")
        self.graded_by_command = self.graded_by_command or self.grading
        return self.backend.exec(command, timeout_sec=timeout_sec, cwd=cwd, env=env)

    def run_plain(self, action: Action, values: dict[str, Any]) -> Any:
        """Run a plain-Python action (see ``Action.runs_in_sandbox``) where this environment is.

        In a sandbox, its guest process runs it and the value comes back; in the
        root environment, which has no sandbox, it runs here in the episode.

        Raises:
            GuestCallError: The function raised inside the sandbox (with the guest traceback).
            SandboxError: The sandbox failed.
        """
        if self._backend is None:
            return action.entry(**values)
        return self._backend.call_python(python_call(action, values))

    def check_python(self, action: Action) -> None:
        """Make sure this sandbox can run ``action`` (a plain-Python one): it has ``python3``.

        Raises:
            ConfigError: Naming the action, the environment and what the image lacks.
            SandboxError: The sandbox failed.
        """
        if self._backend is None:
            return
        try:
            self._backend.check_python()
        except NoPythonError as exc:
            raise ConfigError(
                f"action '{action.name}' runs inside environment '{self.name}', but {exc}"
            ) from exc

    def put_file(self, path: str, data: bytes) -> None:
        """Write a file in the sandbox (see ``Backend.put_file``)."""
        self.backend.put_file(path, data)

    def get_file(self, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read a file from the sandbox, if at most ``max_bytes`` (see ``Backend.get_file``)."""
        return self.backend.get_file(path, max_bytes=max_bytes)

    def screenshot(self) -> bytes:
        """A PNG of the sandbox's screen (see ``Backend.screenshot``)."""
        return self.backend.screenshot()

    def __repr__(self) -> str:
        return f"EpisodeEnv({self.name!r})"
