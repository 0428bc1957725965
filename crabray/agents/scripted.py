"""Scripted baselines: the oracle replays the reference solution; noop gives up at once."""

from __future__ import annotations

from crabray.agents.base import ActionCall, Agent, AgentStep, StepInput, TaskBrief
from crabray.agents.registry import register_agent
from crabray.core.errors import NoSolutionError


@register_agent
class OracleAgent(Agent):
    """Replays the task's reference solution, one call per step, then declares completion.

    It proves a task is solvable and its evaluators accept a correct solution.
    """

    kind = "oracle"
    replays_reference = True

    def reset(self, brief: TaskBrief) -> None:
        if not brief.solution:
            raise NoSolutionError(
                f"task '{brief.task_id}' has no reference solution for the oracle to replay; "
                "declare one with Task(solution=[...])"
            )
        self._remaining = list(brief.solution)

    def step(self, observed: StepInput) -> AgentStep:
        if self._remaining:
            return AgentStep(calls=[self._remaining.pop(0)], message="replaying the solution")
        return AgentStep(calls=[ActionCall(name="complete")], message="solution replayed")


@register_agent
class NoopAgent(Agent):
    """Declares itself done without acting: the failing baseline every task must reject."""

    kind = "noop"

    def reset(self, brief: TaskBrief) -> None:
        """Nothing to remember."""

    def step(self, observed: StepInput) -> AgentStep:
        return AgentStep(calls=[ActionCall(name="complete")], message="doing nothing")
