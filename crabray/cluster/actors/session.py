"""A driven episode on the cluster: its sandboxes are environment actors on their hosts.

An external loop (a custom agent, an RL trainer on Ray) drives an episode one
move at a time (``DrivenEpisode``) while each of the task's environments is an
``EnvironmentActor`` placed on a node that hosts its kind, as ``crabray run``
places them. The episode's loop runs in the caller's process; every sandbox
operation (the agent's actions, setup, the evaluators) runs in the actor, on
the sandbox's host. The record is the one ``crabray run`` would make.
"""

from __future__ import annotations

import logging
from typing import Any

import ray

from crabray.agents import AgentSpec
from crabray.backends.base import Backend
from crabray.cluster.actors.environment import RemoteEnvironmentActor
from crabray.cluster.actors.sandbox import ActorBackend, SandboxSpec
from crabray.cluster.runtime.placement import actor_options, check_hostable
from crabray.core import BenchmarkConfig, Task
from crabray.episode import DrivenEpisode, EpisodeSettings
from crabray.episode.driven import DRIVEN_SPEC

logger = logging.getLogger(__name__)


class ClusterEpisode(DrivenEpisode):
    """A ``DrivenEpisode`` whose sandboxes are environment actors on the cluster.

    Needs a connected Ray (``ray.init(address=...)``) with nodes hosting the
    task's environment kinds. Use it as a context manager, or call ``close``:
    it closes the sandboxes and ends their actors.

    Args:
        benchmark: The benchmark of the task.
        task: The task.
        settings: Identifiers and limits, as ``crabray run`` gives them.
        spec: The agent the record names (``driven`` unless given).

    Raises:
        ConfigError: No node of the cluster hosts a kind of sandbox the task needs.
        SandboxError: A sandbox did not start (the actors made so far are ended).
    """

    def __init__(
        self,
        benchmark: BenchmarkConfig,
        task: Task,
        settings: EpisodeSettings,
        spec: AgentSpec = DRIVEN_SPEC,
    ) -> None:
        self._actors: list[Any] = []
        backends: dict[str, Backend] = {}
        sandboxes = [SandboxSpec.of(env) for env in benchmark.task_environments(task)]
        check_hostable((s.kind, tuple(sorted(s.label_selector.items()))) for s in sandboxes)
        try:
            for env, sandbox in zip(benchmark.task_environments(task), sandboxes, strict=True):
                options = actor_options(sandbox.kind, sandbox.label_selector)
                actor = RemoteEnvironmentActor.options(**options).remote(sandbox, settings.run_id)
                self._actors.append(actor)
                backend = ActorBackend(env, actor)
                backend.start()
                backends[env.name] = backend
        except BaseException:
            self._end_actors()
            raise
        self.backends = backends
        super().__init__(benchmark, task, backends, settings, spec)

    def close(self) -> None:
        """End a running episode as it stands (``finish``), close the sandboxes, end the actors."""
        try:
            self.finish()
        finally:
            self._end_actors()

    def _end_actors(self) -> None:
        for actor in self._actors:
            try:
                ray.get(actor.close.remote())
            except Exception as exc:  # the actor is killed below either way
                logger.warning("closing a sandbox of a cluster episode failed: %s", exc)
            ray.kill(actor, no_restart=True)
        self._actors.clear()

    def __enter__(self) -> ClusterEpisode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
