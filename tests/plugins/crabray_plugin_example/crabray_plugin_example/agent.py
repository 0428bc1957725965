"""The ``example`` agent: writes the text its task quotes into ``answer.txt``, then completes."""

from __future__ import annotations

import re

from crabray.agents import ActionCall, Agent, AgentStep, StepInput, TaskBrief
from crabray.core.errors import AgentError

QUOTED = re.compile(r"'([^']*)'")


class ExampleAgent(Agent):
    """Reads the first quoted text of the instruction; one write, then ``complete``."""

    def reset(self, brief: TaskBrief) -> None:
        found = QUOTED.search(brief.description)
        if found is None:
            raise AgentError(f"task '{brief.task_id}' quotes no text to write")
        self._pending = [
            ActionCall(name="write_file", arguments={"path": "answer.txt", "content": found[1]}),
            ActionCall(name="complete"),
        ]

    def step(self, observed: StepInput) -> AgentStep:
        return AgentStep(calls=[self._pending.pop(0)] if self._pending else [])
