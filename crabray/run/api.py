"""``evaluate``: a run from Python, the same run ``crabray run`` makes from the command line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from crabray.agents import AgentSpec, select_agents
from crabray.agents.config import with_model
from crabray.cluster.sweep.scheduler import ProgressCallback
from crabray.core import BenchmarkConfig
from crabray.core.errors import ConfigError
from crabray.core.session import Benchmark, benchmark_configs
from crabray.formats import SuiteRef, load_suite
from crabray.formats.python import FORMAT as PYTHON
from crabray.formats.python import defining_file, importing_suite
from crabray.run.runner import RunSummary, StartCallback, run_suite
from crabray.run.spec import RunSpec, load_run_spec


def evaluate(
    suite: str | Path | BenchmarkConfig | Benchmark | None,
    agents: Sequence[str | AgentSpec] = (),
    spec: RunSpec | None = None,
    *,
    config: str | Path | None = None,
    on_start: StartCallback | None = None,
    on_progress: ProgressCallback | None = None,
) -> RunSummary:
    """Run ``agents`` on every task of ``suite``; episodes stream into the results root.

    ``crabray run`` is a shell over this call: it builds a ``RunSpec`` from its
    flags and run file and calls it, so a run made here is the run the command
    line makes.

    ``suite`` is a path, as ``crabray run`` takes, or a benchmark object
    (``BenchmarkConfig``, or CRAB's ``Benchmark``) bound at module level in a
    ``.py`` file: the run loads that file as its suite (in every process that
    runs its episodes) and runs that benchmark's tasks. A script that calls
    ``evaluate`` must do so under ``if __name__ == "__main__":``, since loading
    the suite imports it.

    Args:
        suite: A suite path, or a benchmark object bound in a file; ``None``: the
            spec's (or the run file's) ``suite``.
        agents: Names as on the command line (``"oracle"``, ``"noop"``, a name in
            the agents file) or ``AgentSpec``s; empty: the spec's ``agents``.
        spec: The run (``RunSpec``: results root, concurrency, epochs, limits, task
            selection, budgets, agents file, model, ``resume``, ``address``, ...),
            e.g. ``RunSpec.of(epochs=2, agent_config="agents.toml")``. The fields it
            sets override those of the run file ``config``.
        config: A run file whose settings apply under ``spec``.
        on_start: Told the run id, the episodes planned and those left to run.
        on_progress: Told the counts after every batch of finished episodes.

    Returns:
        What the run did, and a handle to its rows (``RunSummary.episodes()``).
        The run is on the Ray cluster this process is connected to, or at
        ``spec.execution.address``, or on a local instance started for it and
        stopped when it ends.

    Raises:
        ConfigError: A setting, agent or the suite is invalid (``SuiteErrors``
            lists every problem of the suite), ``address`` is a head's job API
            (``http://HEAD:8265``), which only ``crabray run`` submits to, a
            benchmark object is bound in no file (or differs from the file's), or
            this call was made while its suite file was being imported.
        ResultsError: The results root cannot be read or written.

    Example:
        >>> from notes import bench  # doctest: +SKIP
        >>> summary = crabray.evaluate(bench, ["oracle", "noop"], RunSpec.of(epochs=2))
        >>> summary.episodes().groupby("agent").success.mean()  # doctest: +SKIP
    """
    importing = importing_suite()
    if importing is not None:
        raise ConfigError(
            "crabray.evaluate was called while the file was being imported as a run's "
            "suite (every process that runs its episodes imports it): call it under "
            "`if __name__ == '__main__':`",
            file=str(importing),
        )
    given = spec or RunSpec()
    names = [agent for agent in agents if isinstance(agent, str)]
    if isinstance(suite, BenchmarkConfig | Benchmark):
        suite, given = _benchmark_file(suite, given)
    base = RunSpec() if config is None else load_run_spec(config)
    chosen = base.updated(given).updated(_what_and_who(suite, names))
    if chosen.agents.agent_config is not None:  # recorded whole: a resume may start elsewhere
        resolved = str(Path(chosen.agents.agent_config).resolve())
        chosen = chosen.updated(RunSpec.of(agent_config=resolved))
    if chosen.execution.address is not None and chosen.execution.address.startswith(
        ("http://", "https://")
    ):
        raise ConfigError(
            "a run submitted to a head's job API is made by the command line: "
            f"crabray run {chosen.what.suite} --address {chosen.execution.address}",
            field="address",
        )
    return _run_and_leave(chosen, _agent_specs(chosen, agents), on_start, on_progress)


def _what_and_who(suite: str | Path | None, names: list[str]) -> RunSpec:
    """The suite and agent names given as ``evaluate``'s arguments, as fields they set."""
    return RunSpec.of(suite=suite, agents=names or None)


def _agent_specs(spec: RunSpec, agents: Sequence[str | AgentSpec]) -> list[AgentSpec]:
    """The run's agents as specs: its names looked up in its agents file, then the specs
    given whole, each with the spec's model over its own.

    Raises:
        ConfigError: No agent at all, or a name no agents file defines.
    """
    names = spec.agents.names
    agent_config = spec.agents.agent_config
    specs = select_agents(names, agent_config) if names else []
    specs += [agent for agent in agents if isinstance(agent, AgentSpec)]
    if not specs:
        raise ConfigError("no agent: give at least one agent name or AgentSpec", field="agents")
    return with_model(specs, spec.agents.model)


def _benchmark_file(benchmark: BenchmarkConfig | Benchmark, spec: RunSpec) -> tuple[Path, RunSpec]:
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
    chosen: dict[str, object] = {"format": PYTHON}
    if len(mine) < len(loaded.entries) and spec.what.task_ids is None:
        chosen["task_ids"] = [_exact(task_id) for task_id in mine]
    return path, RunSpec.model_validate(chosen).updated(spec)


def _exact(task_id: str) -> str:
    """``task_id`` as a ``--task`` pattern that matches only itself (globs escaped)."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in task_id)


def _run_and_leave(
    spec: RunSpec,
    agents: list[AgentSpec],
    on_start: StartCallback | None,
    on_progress: ProgressCallback | None,
) -> RunSummary:
    """Run, then stop the local Ray instance if this call started one (a cluster stays joined)."""
    import ray

    from crabray.cluster.runtime.ray_runtime import disconnect

    joined_before = ray.is_initialized()
    try:
        return run_suite(spec, agents, on_start=on_start, on_progress=on_progress)
    finally:
        if not joined_before:
            disconnect()
