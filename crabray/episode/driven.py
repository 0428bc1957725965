"""An episode over real sandboxes, driven one move at a time by the caller.

``crabray run`` asks an ``Agent`` for each move. An external loop (a custom
agent, an RL trainer) wants the opposite: to hold the loop itself and hand the
episode one move at a time. ``DrivenEpisode`` runs the very episode
``crabray run`` runs (``run_episode``: setup, evaluation after every step in
the sandboxes, scoring, the same ``EpisodeRecord``) in a thread, with an agent
that passes each ``StepInput`` out to the caller and each ``AgentStep`` in.
So its record, written to a results directory, is the rows ``crabray run``
would write, and its score the one ``crabray run`` would give.
"""

from __future__ import annotations

import queue
import threading

from crabray.agents.base import ActionCall, Agent, AgentSpec, AgentStep, StepInput, TaskBrief
from crabray.backends.base import Backend
from crabray.core import BenchmarkConfig, Task
from crabray.core.result import EpisodeRecord
from crabray.episode.loop import EpisodeSettings, run_episode

DRIVEN_SPEC = AgentSpec(name="driven", kind="driven")
"""The agent a driven episode records, unless the caller names its own."""


class _Bridge(Agent):
    """The agent the episode talks to: hands each input out and waits for the caller's move."""

    kind = "driven"

    def __init__(self, spec: AgentSpec) -> None:
        super().__init__(spec)
        self.brief: TaskBrief | None = None
        self.inputs: queue.Queue[StepInput | EpisodeRecord | BaseException] = queue.Queue()
        self.moves: queue.Queue[AgentStep] = queue.Queue()

    def reset(self, brief: TaskBrief) -> None:
        self.brief = brief

    def step(self, observed: StepInput) -> AgentStep:
        self.inputs.put(observed)
        return self.moves.get()


class DrivenEpisode:
    """One episode of ``task`` in started sandboxes, whose moves the caller makes.

    Call ``start`` once, then ``step`` until it returns None (the episode is
    over: ``record`` holds it). The episode's own rules end it: its step and
    time budgets, a passed evaluator graph, ``complete`` or ``fail``.

    Args:
        benchmark: The benchmark of the task.
        task: The task.
        backends: A started, clean sandbox for each of the task's environments.
        settings: Identifiers and limits, as ``crabray run`` gives them.
        spec: The agent the record names (``driven`` unless given).
    """

    def __init__(
        self,
        benchmark: BenchmarkConfig,
        task: Task,
        backends: dict[str, Backend],
        settings: EpisodeSettings,
        spec: AgentSpec = DRIVEN_SPEC,
    ) -> None:
        self._bridge = _Bridge(spec)
        self._args = (benchmark, task, backends, settings)
        self._thread: threading.Thread | None = None
        self.record: EpisodeRecord | None = None

    @property
    def brief(self) -> TaskBrief | None:
        """What an agent learns at the start: the task, its tools, the environments."""
        return self._bridge.brief

    def start(self) -> StepInput | None:
        """Set the task up and return the first observations (None: it ended in setup).

        Raises:
            RuntimeError: The episode was started already.
        """
        if self._thread is not None:
            raise RuntimeError("the episode is started already; call step(...) to go on")
        benchmark, task, backends, settings = self._args

        def run() -> None:
            try:
                record = run_episode(benchmark, task, self._bridge, backends, settings)
            except BaseException as exc:  # handed to the caller, who is waiting for this thread
                self._bridge.inputs.put(exc)
                raise
            self._bridge.inputs.put(record)

        self._thread = threading.Thread(target=run, name=f"driven-{task.id}", daemon=True)
        self._thread.start()
        return self._next()

    def step(self, *calls: ActionCall, message: str | None = None) -> StepInput | None:
        """Make one move: ``calls`` by the names of ``brief.tools``.

        Returns:
            What the agent sees next: the calls' results and fresh observations;
            None when the move ended the episode (see ``record``).

        Raises:
            RuntimeError: The episode is not started, or is over.
        """
        if self._thread is None:
            raise RuntimeError("call start() first")
        if self.record is not None:
            raise RuntimeError(
                f"the episode is over ({self.record.result.termination_reason}); see record"
            )
        self._bridge.moves.put(AgentStep(calls=list(calls), message=message))
        return self._next()

    def finish(self) -> EpisodeRecord | None:
        """End the episode as it stands if it is still running (the agent's ``complete``).

        Returns:
            The record; None when the episode was never started.
        """
        if self._thread is None:
            return None
        while self.record is None and self.step(ActionCall(name="complete")) is not None:
            pass
        return self.record

    def _next(self) -> StepInput | None:
        got = self._bridge.inputs.get()
        if isinstance(got, BaseException):
            raise RuntimeError(f"the episode broke: {got}") from got
        if isinstance(got, EpisodeRecord):
            self.record = got
            return None
        return got
