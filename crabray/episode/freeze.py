"""Graders run while nothing of the agent's does: its processes frozen around every grade.

An agent that leaves a process behind could otherwise act while it is graded:
write into a grader's pipe through ``/proc``, answer a FIFO only when a
grader opens it, rewrite a reward file after the verifier made it anew. So
the episode freezes every sandbox (``Backend.freeze_agent``) before each step's
evaluator graph and thaws it after, and from the end of the agent's turn keeps
it frozen through the final grading; the next reset kills what is left.

A grade taken while some of the agent's processes still ran (a backend that
cannot freeze, a process of another user) is unverified, and so is a pass that
a scorer gave only with the agent's processes thawed (a test that talks to a
server the agent started): each is a reason on the row
(``grader_untrusted_reason``).
"""

from __future__ import annotations

from crabray.backends.episode_env import EpisodeEnv


class AgentFreeze:
    """The frozen state of an episode's sandboxes, and why its grades may be unverified.

    Args:
        envs: The episode's sandbox environments (not the root one).
    """

    def __init__(self, envs: list[EpisodeEnv]) -> None:
        self._envs = envs
        self.frozen = False
        """Whether the sandboxes are frozen now."""
        self.stopped = 0
        """How many of the agent's processes the last freeze stopped, over all sandboxes."""
        self._reasons: dict[str, list[str]] = {}
        """Per environment, why a grade taken there is unverified (in the order seen)."""

    def freeze(self) -> None:
        """Freeze every sandbox, unless already frozen.

        Raises:
            SandboxError: A sandbox could not be reached.
        """
        if self.frozen:
            return
        self.stopped = 0
        for env in self._envs:
            frozen = env.backend.freeze_agent()
            self.stopped += frozen.frozen
            if frozen.unverified is not None:
                self.note(env.name, frozen.unverified)
        self.frozen = True

    def end_turn(self) -> None:
        """Freeze every sandbox for good and have each note what the agent changed.

        Raises:
            SandboxError: A sandbox could not be reached.
        """
        self.freeze()
        for env in self._envs:
            env.backend.agent_ends()

    def thaw(self) -> None:
        """Continue the agent's processes, unless not frozen.

        Raises:
            SandboxError: A sandbox could not be reached.
        """
        if not self.frozen:
            return
        self.frozen = False
        for env in self._envs:
            env.backend.thaw_agent()

    def note(self, env: str, reason: str) -> None:
        """Record why a grade taken in ``env`` is unverified (once per reason)."""
        reasons = self._reasons.setdefault(env, [])
        if reason not in reasons:
            reasons.append(reason)

    def reasons(self, env: str) -> list[str]:
        """Why the grades taken in ``env`` are unverified, if any were."""
        return list(self._reasons.get(env, []))
