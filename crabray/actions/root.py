"""Root actions: how the agent ends an episode or hands in an answer.

They act on the episode's root environment, which has no sandbox, by setting
the shared ``AgentSignals`` the episode loop reads after every step.
"""

from __future__ import annotations

from crabray.core import ROOT_ENV, Action, Task, action
from crabray.core.env import Env


@action(env_name=ROOT_ENV)
def submit(content: str, env: Env) -> str:
    """Submit the answer the task asks for. Evaluators that wait for a submission run after it.

    Args:
        content: The answer, as text.
        env: The episode's root environment, injected at run time (not part of the schema).
    """
    env.signals.submitted = True
    env.signals.submission = content
    return "submitted"


@action(env_name=ROOT_ENV)
def complete(env: Env) -> str:
    """Declare the task done. The episode ends and is evaluated as it stands."""
    env.signals.completed = True
    return "completed"


@action(env_name=ROOT_ENV)
def fail(reason: str, env: Env) -> str:
    """Give up on the task: it cannot be done. The episode ends.

    Args:
        reason: Why the task cannot be done.
        env: The episode's root environment, injected at run time (not part of the schema).
    """
    env.signals.failed = True
    env.signals.reason = reason
    return "failed"


ROOT_ACTIONS = (complete, fail)
"""Root actions every task offers; ``submit`` is added when the task needs it."""


def root_actions(task: Task) -> list[Action]:
    """The root actions an episode of ``task`` offers: complete and fail, and submit when needed."""
    extra_names = {a.name for a in task.extra_actions}
    needs_submit = task.requires_submit and "submit" not in extra_names
    return [*ROOT_ACTIONS, submit] if needs_submit else list(ROOT_ACTIONS)
