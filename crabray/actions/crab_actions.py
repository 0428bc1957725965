"""CRAB's root actions under their CRAB names (``crab.actions.crab_actions``).

``submit`` and ``complete`` are crabray's own root actions (same names and
parameters), so the episode sees the submission and ends on ``complete``.
``check_submit`` reads the root environment's ``trajectory`` as CRAB's does:
it passes when the agent's last root action was ``submit`` with ``text`` in
its content.
"""

from __future__ import annotations

import time
from typing import Protocol

from crabray.actions.root import complete, submit
from crabray.core import ROOT_ENV, action, evaluator
from crabray.core.env import Env

WAIT_SEC = 5.0
"""How long ``wait`` lets the environment work; CRAB's value."""


@evaluator(env_name=ROOT_ENV)
def check_submit(text: str, env: Env) -> bool:
    """Whether the agent's last root action submitted content containing ``text``.

    Args:
        text: What the submission must contain.
        env: The root environment, injected at run time.
    """
    if not env.trajectory:
        return False
    name, arguments, _ = env.trajectory[-1]
    return bool(name == "submit" and text in str(arguments.get("content", "")))


@action(env_name=ROOT_ENV, local=True)
def wait() -> None:
    """Wait a few seconds: use it when the environment is still busy with your last action."""
    time.sleep(WAIT_SEC)


class VisualEnv(Env, Protocol):
    """An environment whose visual-prompt observation labelled the screen's elements."""

    element_position_map: dict[int, tuple[int, int, int, int]]
    """Element id -> its box ``(x1, y1, x2, y2)``, as CRAB keeps it."""


def get_element_position(element_id: int, env: VisualEnv) -> tuple[int, int]:
    """The centre of the screen element ``element_id`` that a visual prompt labelled.

    Reads ``env.element_position_map`` (element id -> ``(x1, y1, x2, y2)``), which
    the visual-prompt observation sets, as in CRAB.

    Raises:
        KeyError: No element has that id.
    """
    box = env.element_position_map[element_id]
    return round((box[0] + box[2]) / 2), round((box[1] + box[3]) / 2)


__all__ = [
    "WAIT_SEC",
    "VisualEnv",
    "check_submit",
    "complete",
    "get_element_position",
    "submit",
    "wait",
]
