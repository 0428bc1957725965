"""``evaluate``: a run from Python, the same run ``crabray run`` makes from the command line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crabray.agents import AgentSpec, select_agents
from crabray.cluster.scheduler import ProgressCallback
from crabray.core.errors import ConfigError
from crabray.run.runner import RunOptions, RunSummary, run_suite
from crabray.run.settings import RunConfig, load_run_config, merge_overrides


def evaluate(
    suite: str | Path,
    agents: Sequence[str | AgentSpec],
    *,
    agent_config: str | Path | None = None,
    config: str | Path | None = None,
    on_progress: ProgressCallback | None = None,
    **settings: Any,
) -> RunSummary:
    """Run ``agents`` on every task of ``suite``; episodes stream into the results root.

    The Python twin of ``crabray run``: ``settings`` are the run settings by
    their field names (``out_dir``, ``concurrency``, ``epochs``, ``max_steps``,
    ``time_limit_sec``, ``task_ids``, ``resume``, ``address``, ...; see
    ``RunSettings``), over those of the run file ``config`` when given. Agents
    are named as on the command line (``"oracle"``, ``"noop"``, a name in
    ``agent_config``) or given as ``AgentSpec``s. The run is on the Ray
    cluster this process is connected to, or at ``address``, or on a local
    instance started for it and stopped when it ends.

    Returns:
        What the run did: its id, episodes planned, run and skipped, successes,
        failures. The rows are in the results root (``crabray.results``).

    Raises:
        ConfigError: A setting, agent or the suite is invalid (``SuiteErrors``
            lists every problem of the suite), or ``address`` is a head's job API
            (``http://HEAD:8265``), which only ``crabray run`` submits to.
        ResultsError: The results root cannot be read or written.
    """
    base = RunConfig() if config is None else load_run_config(config)
    names = [agent for agent in agents if isinstance(agent, str)]
    chosen = merge_overrides(base, {**settings, "suite": str(suite), "agents": names or None})
    if chosen.address is not None and chosen.address.startswith(("http://", "https://")):
        raise ConfigError(
            "a run submitted to a head's job API is made by the command line: "
            f"crabray run {suite} --address {chosen.address}",
            field="address",
        )
    specs = select_agents(names, agent_config) if names else []
    specs += [agent for agent in agents if isinstance(agent, AgentSpec)]
    if not specs:
        raise ConfigError("no agent: give at least one agent name or AgentSpec", field="agents")
    options = RunOptions(**chosen.settings(), suite=str(suite), agents=specs)
    return _run_and_leave(options, on_progress)


def _run_and_leave(options: RunOptions, on_progress: ProgressCallback | None) -> RunSummary:
    """Run, then stop the local Ray instance if this call started one (a cluster stays joined)."""
    import ray

    from crabray.cluster.ray_runtime import disconnect

    joined_before = ray.is_initialized()
    try:
        return run_suite(options, on_progress=on_progress)
    finally:
        if not joined_before:
            disconnect()
