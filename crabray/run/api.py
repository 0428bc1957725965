"""``evaluate``: a run from Python, the same run ``crabray run`` makes from the command line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crabray.agents import AgentSpec, select_agents
from crabray.cluster.sweep.scheduler import ProgressCallback
from crabray.core import BenchmarkConfig
from crabray.core.errors import ConfigError
from crabray.core.session import Benchmark, benchmark_configs
from crabray.formats import SuiteRef, load_suite
from crabray.formats.python import FORMAT as PYTHON
from crabray.formats.python import defining_file, importing_suite
from crabray.run.runner import RunOptions, RunSummary, run_suite
from crabray.run.settings import RunConfig, load_run_config, merge_overrides


def evaluate(
    suite: str | Path | BenchmarkConfig | Benchmark,
    agents: Sequence[str | AgentSpec],
    *,
    agent_config: str | Path | None = None,
    config: str | Path | None = None,
    on_progress: ProgressCallback | None = None,
    **settings: Any,
) -> RunSummary:
    """Run ``agents`` on every task of ``suite``; episodes stream into the results root.

    ``suite`` is a path, as ``crabray run`` takes, or a benchmark object
    (``BenchmarkConfig``, or CRAB's ``Benchmark``) bound at module level in a
    ``.py`` file: the run loads that file as its suite (in every process that
    runs its episodes) and runs that benchmark's tasks. A script that calls
    ``evaluate`` must do so under ``if __name__ == "__main__":``, since loading
    the suite imports it.

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
            lists every problem of the suite), ``address`` is a head's job API
            (``http://HEAD:8265``), which only ``crabray run`` submits to, a
            benchmark object is bound in no file (or differs from the file's), or
            this call was made while its suite file was being imported.
        ResultsError: The results root cannot be read or written.

    Example:
        >>> from notes import bench  # doctest: +SKIP
        >>> crabray.evaluate(bench, ["oracle", "noop"]).successes  # doctest: +SKIP
        1
    """
    importing = importing_suite()
    if importing is not None:
        raise ConfigError(
            "crabray.evaluate was called while the file was being imported as a run's "
            "suite (every process that runs its episodes imports it): call it under "
            "`if __name__ == '__main__':`",
            file=str(importing),
        )
    if isinstance(suite, BenchmarkConfig | Benchmark):
        suite, settings = _benchmark_file(suite, settings)
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


def _benchmark_file(
    benchmark: BenchmarkConfig | Benchmark, settings: dict[str, Any]
) -> tuple[Path, dict[str, Any]]:
    """The file a run of ``benchmark`` loads as its suite, and the settings that run only
    its tasks (``task_ids``, unless given, when the file defines other benchmarks too).

    Raises:
        ConfigError: No file binds the benchmark, or the file's benchmark of that name
            has other tasks than the object given (it was changed after the file made it).
    """
    config = benchmark_configs([benchmark])[0]
    path = defining_file(benchmark)
    loaded = load_suite(SuiteRef(path=str(path), format=PYTHON))
    mine = [
        task_id for task_id, entry in loaded.entries.items() if entry.benchmark.name == config.name
    ]
    given = sorted(task.id for task in config.tasks)
    found = sorted(loaded.entries[task_id].task.id for task_id in mine)
    if found != given:
        raise ConfigError(
            f"benchmark '{config.name}' as {path} makes it has tasks {found}, the one given "
            f"{given}: a run loads the benchmark from its file in every process that runs "
            "its episodes, so change the file, not the object"
        )
    chosen = {"format": PYTHON, **settings}
    if len(mine) < len(loaded.entries) and settings.get("task_ids") is None:
        chosen["task_ids"] = [_exact(task_id) for task_id in mine]
    return path, chosen


def _exact(task_id: str) -> str:
    """``task_id`` as a ``--task`` pattern that matches only itself (globs escaped)."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in task_id)


def _run_and_leave(options: RunOptions, on_progress: ProgressCallback | None) -> RunSummary:
    """Run, then stop the local Ray instance if this call started one (a cluster stays joined)."""
    import ray

    from crabray.cluster.runtime.ray_runtime import disconnect

    joined_before = ray.is_initialized()
    try:
        return run_suite(options, on_progress=on_progress)
    finally:
        if not joined_before:
            disconnect()
