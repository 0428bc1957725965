"""``run_suite``: what ``crabray run`` does, from a suite path to rows on disk.

Load and validate every task first (nothing starts on a broken suite); open
the run (new, or resumed: only episodes without a final row run again, infra
failures as their next attempt); run the rest on Ray; write every batch of
finished episodes atomically as it arrives.

This is the one module that ties suite loading (``crabray.formats``), the
results dataset (``crabray.results``) and the Ray scheduler
(``crabray.cluster``) together: the Ray layer and the results layer know
nothing of each other.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from crabray import __version__
from crabray.agents import AgentSpec, agent_secrets
from crabray.agents.model_gate import ModelLimiters
from crabray.backends import backend_class
from crabray.cluster.actors.cleanup import LOST_WORKER, cleanup_orphans
from crabray.cluster.actors.inflight import SweepItem
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.placement import check_hostable
from crabray.cluster.runtime.ray_runtime import connect, is_local_instance, local_cpus
from crabray.cluster.runtime.run_end import end_run_everywhere
from crabray.cluster.sweep.adaptive import AUTO, Concurrency
from crabray.cluster.sweep.progress import SweepProgress
from crabray.cluster.sweep.scheduler import ProgressCallback, Scheduler, SubmitCallback
from crabray.cluster.sweep.settings import SchedulerSettings
from crabray.core import EnvironmentConfig
from crabray.core.errors import ConfigError, CrabrayError, ResultsError
from crabray.core.redact import RedactingFilter, Redactor, secrets_in_environment
from crabray.core.result import EpisodeRecord, TerminationReason
from crabray.core.words import counted
from crabray.formats import Suite, SuiteErrors, SuiteRef, load_suite
from crabray.formats.validate import validate_suite
from crabray.results import (
    ResultSink,
    RunManifest,
    RunState,
    attempts_so_far,
    check_output_dir,
    finished_keys,
    list_runs,
    new_run_id,
    read_manifest,
    run_lock,
    run_log_path,
    write_manifest,
)
from crabray.results.store.root import ResultsRoot
from crabray.run.budget import BudgetReached, RunBudget
from crabray.run.model_progress import ModelProgress
from crabray.run.outcomes import Cause, causes_not_the_agents
from crabray.run.preflight import preflight
from crabray.run.selection import select_tasks
from crabray.run.spec import DEFAULT_RESULTS, RunSpec, recorded_backend_settings

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

logger = logging.getLogger(__name__)


class RunSummary(BaseModel):
    """What a run did, and a handle to its rows (``episodes``, ``steps``)."""

    run_id: str
    out_dir: str = Field(
        default=str(DEFAULT_RESULTS), description="The results root the run's rows are in."
    )
    planned: int = Field(description="Episodes the run consists of.")
    skipped: int = Field(description="Episodes already finished by an earlier attempt of the run.")
    ran: int
    successes: int
    retries: int
    infra_failures: int
    timeouts: int = 0
    pool_hit_rate: float = Field(default=0.0, description="Environments served warm / served.")
    not_the_agents: list[Cause] = Field(
        default_factory=list,
        description="The run's episodes attributed to the benchmark or the infrastructure, by "
        "cause: empty when every episode is the agent's (the run then exits 0).",
    )
    budget_reached: BudgetReached | None = Field(
        default=None,
        description="The budget that stopped the run before every episode had run (a resume "
        "with a higher one goes on); None when the run finished.",
    )

    def episodes(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The run's episodes, one row each (its latest attempt): ``read_episodes``."""
        from crabray.results import read_episodes

        return read_episodes(self.out_dir, self.run_id, columns)

    def steps(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The steps of the run's episodes: ``read_steps``."""
        from crabray.results import read_steps

        return read_steps(self.out_dir, self.run_id, columns)

    def table(self, columns: list[str] | None = None) -> pa.Table:
        """The run's episodes as an Arrow table (no pandas frame is made)."""
        from crabray.results import read_episode_table

        return read_episode_table(self.out_dir, self.run_id, columns, ordered=True)


class RunInterrupted(KeyboardInterrupt):
    """The run was interrupted (Ctrl-C, SIGTERM) after it started; what finished is on disk.

    A ``KeyboardInterrupt``, so whatever cleans up on one still does. Interrupted
    once every episode had its final row (as the run wound up), the run is
    recorded as finished and ``complete`` says so.
    """

    def __init__(self, run_id: str, planned: int, finished: int, cancelled: int) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        self.planned = planned
        self.finished = finished
        """Episodes of the run with a final result on disk, earlier attempts included."""
        self.cancelled = cancelled
        """Episodes stopped mid-way whose partial rows were written (a resume reruns them)."""

    @property
    def complete(self) -> bool:
        """Every episode of the run has its final row: nothing is left to resume."""
        return self.finished == self.planned and not self.cancelled


def interrupted_after(out_dir: str | Path, run_id: str, planned: int) -> RunInterrupted:
    """An interrupt that came after the run's own handler let go (as its lock was released
    or its summary made), read from disk: a run whose every episode is saved is recorded
    finished, so that nothing is said to be left to resume; any other, interrupted."""
    manifest = read_manifest(out_dir, run_id)
    interrupted = RunInterrupted(run_id, planned, len(finished_keys(out_dir, run_id)), 0)
    state = RunState.FINISHED if interrupted.complete else RunState.INTERRUPTED
    if manifest.state != state:
        _record_state(out_dir, manifest, state)
    return interrupted


StartCallback = Callable[[str, int, int], None]
"""Told the run id, the episodes planned and those left to run, before anything runs."""


def run_suite(
    spec: RunSpec,
    agents: list[AgentSpec],
    on_start: StartCallback | None = None,
    on_progress: ProgressCallback | None = None,
    on_submit: SubmitCallback | None = None,
) -> RunSummary:
    """Run every episode of ``spec`` that has no final result yet.

    ``agents`` are ``spec.agents`` resolved into their specs (``crabray.evaluate``
    resolves them). A results root given as a URI (``s3://...``) is written
    through a local staging folder uploaded as files land (``ResultsRoot.staged``).

    Raises:
        ConfigError: The suite is invalid (``SuiteErrors`` lists every problem), or a
            resume does not match its run.
        ResultsError: The results directory or store cannot be read or written.
    """
    if not agents:
        raise ConfigError("no agent: give at least one agent", field="agents")
    root = spec.results.out_dir
    with root.staged(spec.results.resume) as out:
        run = _Run(spec, agents, out, root)
        summary = _run_suite(run, on_start, on_progress, on_submit)
    return summary.model_copy(update={"out_dir": root.given})


@dataclass(frozen=True)
class _Run:
    """A run as it goes: its description, its agents' specs, and its results root both as
    given (``root``: recorded, shown) and as the local folder written (``out``: a store's
    staging folder)."""

    spec: RunSpec
    agents: list[AgentSpec]
    out: Path
    root: ResultsRoot


def _run_suite(
    run: _Run,
    on_start: StartCallback | None,
    on_progress: ProgressCallback | None,
    on_submit: SubmitCallback | None,
) -> RunSummary:
    """``run_suite`` with its results root on the local file system (``run.out``)."""
    what = run.spec.what
    if what.suite is None:
        raise ConfigError("no suite: give a suite path", field="suite")
    suite = load_checked_suite(what.resolve(what.suite))
    task_ids = select_tasks(suite, what.task_ids, what.tags, what.limit)
    if suite.unsupported and not what.task_ids:
        logger.warning(
            "skipping %s this installation cannot run: %s",
            counted(len(suite.unsupported), "task"),
            "; ".join(suite.unsupported_reasons()),
        )
    check_output_dir(run.out)
    resume = run.spec.results.resume
    if resume is None:
        manifest = _new_manifest(run, suite)
    else:
        manifest = _resumed_run(run, resume, suite)
        run = replace(run, agents=_with_recorded_models(run, manifest))
        # A manifest from before a field was recorded gains what this resume was given.
        manifest = manifest.model_copy(
            update={
                "options": {
                    **_recorded_options(run),
                    **manifest.options,
                    **_budget_options(run.spec),
                },
                "agent_config": manifest.agent_config or run.spec.agents.agent_config,
            }
        )
    with run_lock(run.root.given, manifest.run_id):
        return _run_locked(run, suite, task_ids, manifest, on_start, on_progress, on_submit)


def _run_locked(
    run: _Run,
    suite: Suite,
    task_ids: list[str],
    manifest: RunManifest,
    on_start: StartCallback | None,
    on_progress: ProgressCallback | None,
    on_submit: SubmitCallback | None,
) -> RunSummary:
    """The run, once this process holds its lock: nobody else writes it meanwhile."""
    run_id, out, execution = manifest.run_id, run.out, run.spec.execution
    done = finished_keys(out, run_id)
    attempts = attempts_so_far(out, run_id)
    planned = [
        (agent, task_id, epoch)
        for agent in run.agents
        for task_id in task_ids
        for epoch in range(agent.epochs or run.spec.what.epochs)
    ]
    items = [
        SweepItem(
            task_id=task_id,
            agent=agent,
            epoch=epoch,
            attempt=attempts.get((agent.name, task_id, epoch), -1) + 1,
        )
        for agent, task_id, epoch in planned
        if (agent.name, task_id, epoch) not in done
    ]
    if items:
        # Everything that can refuse the run happens before its manifest exists.
        envs = _task_environments(suite, {item.task_id for item in items})
        needs = _host_needs(envs)
        ceiling = _concurrency_ceiling(execution.concurrency)
        slots = execution.local_slots or 2 * ceiling
        selectors = {k: v for _, selector in needs for k, v in selector}
        widest = max((len(task_envs) for task_envs in envs.values()), default=1)
        cpus = local_cpus(widest, len(items), ceiling)
        hosts = {kind: slots for kind, _ in needs}
        preflight(suite, envs, run.agents, execution.address)
        connect(execution.address, num_cpus=cpus, hosts=hosts, labels=selectors)
        check_hostable(needs)
        specs = [SandboxSpec.of(env) for task_envs in envs.values() for env in task_envs]
        cleanup_orphans(specs, here=is_local_instance())
    limits = run.spec.limits
    budget = RunBudget.of_run(out, run_id, limits.max_cost_usd, limits.max_tokens)
    if items:
        budget.check_room(run_id)
    manifest = manifest.model_copy(update={"planned": len(planned), "state": RunState.RUNNING})
    write_manifest(out, manifest)
    if on_start is not None:
        on_start(run_id, len(planned), len(items))
    progress = SweepProgress(total=0)
    redactor = Redactor([*agent_secrets(run.agents), *secrets_in_environment(os.environ)])
    sink = ResultSink(out, run_id, redactor)
    scheduler = None
    try:
        with _redacted_logs(redactor), _run_log(out, run_id, redactor):
            logger.info(
                "run %s: %s, %d to run", run_id, counted(len(planned), "episode"), len(items)
            )
            if items:
                limiters = ModelLimiters.start(run_id, run.agents)  # one per model, the run's
                scheduler = Scheduler(
                    suite,
                    SchedulerSettings(run_id=run_id, execution=execution, limits=limits.episode),
                    _writer(suite, sink),
                    ModelProgress(limiters, on_progress),  # the models beside the sandboxes
                    on_submit,
                    on_finished=budget.charge,
                    models_queued=limiters.queued,
                )
                budget.on_reached = scheduler.drain
                try:
                    progress = scheduler.run(limiters.attach(items))
                finally:
                    limiters.stop()
                    _end_run(suite, {kind for kind, _ in needs})
                if progress.infra_failures:
                    # A worker killed from outside leaves its sandbox (a disk, a cgroup).
                    cleanup_orphans(specs, here=is_local_instance(), left_by=LOST_WORKER)
                sink.compact()
        not_the_agents = causes_not_the_agents(out, run_id)
    except KeyboardInterrupt as exc:
        so_far = scheduler.progress if scheduler is not None else progress
        finished = len(planned) - len(items) + so_far.done
        interrupted = RunInterrupted(run_id, len(planned), finished, so_far.cancelled)
        # Interrupted as it wound up, with every episode's final row on disk: finished.
        state = RunState.FINISHED if interrupted.complete else RunState.INTERRUPTED
        _record_state(out, manifest, state)
        raise interrupted from exc
    except BaseException:
        _record_state(out, manifest, RunState.FAILED)
        raise
    finished = len(planned) - len(items) + progress.done
    stopped = budget.reached if finished < len(planned) else None
    _record_state(out, manifest, RunState.STOPPED if stopped else RunState.FINISHED)
    return RunSummary(
        run_id=run_id,
        planned=len(planned),
        skipped=len(planned) - len(items),
        ran=progress.done,
        successes=progress.successes,
        retries=progress.retries,
        infra_failures=progress.infra_failures,
        timeouts=progress.timeouts,
        pool_hit_rate=scheduler.pool_hit_rate if scheduler is not None else 0.0,
        not_the_agents=not_the_agents,
        budget_reached=stopped,
    )


def _concurrency_ceiling(concurrency: Concurrency) -> int:
    """What sizes a local Ray instance: the fixed concurrency, or with 'auto' this
    machine's cores (the controller's levels stay within the slots made from it)."""
    return os.cpu_count() or 1 if concurrency == AUTO else int(concurrency)


def _record_state(out_dir: str | Path, manifest: RunManifest, state: RunState) -> None:
    """Record where the run stands in its manifest; a failure to is logged, not raised
    (the run's own outcome, on its way out, matters more)."""
    try:
        write_manifest(out_dir, manifest.model_copy(update={"state": state}))
    except ResultsError as exc:
        logger.warning("could not record the run's state (%s): %s", state, exc)


def load_checked_suite(ref: SuiteRef) -> Suite:
    """Load a suite and check it; every problem of every file that loads, at once.

    A file that fails to load (a Python module raising at import) is one
    problem; the tasks of the files that did load are still checked, so one
    broken file does not hide the problems of the others.

    Raises:
        SuiteErrors: Every problem found, each naming its file, line and field.
    """
    try:
        suite = load_suite(ref)
    except SuiteErrors as exc:
        if exc.partial is None:
            raise
        problems = list(exc.errors)
        try:
            check_suite(exc.partial)
        except SuiteErrors as more:
            problems += more.errors
        raise SuiteErrors(exc.file or ref.path, problems) from exc
    check_suite(suite)
    return suite


def _end_run(suite: Suite, kinds: set[str]) -> None:
    """Let the suite's format stop what its tasks started (services), here and on every
    other node that hosts the run's ``kinds`` (``crabray.cluster.runtime.run_end``).

    A failure to stop is shown as a warning: every episode's result is recorded already.
    """
    try:
        end_run_everywhere(suite.ref, kinds)
    except CrabrayError as exc:
        logger.warning("after the run, %s", exc)


@contextmanager
def _run_log(out_dir: str | Path, run_id: str, redactor: Redactor) -> Iterator[None]:
    """Append what crabray logs at info level while the run lasts to ``OUT/runs/<RUN>.log``.

    The terminal shows what ``-v`` asks for; the file always has the info level,
    secrets removed, so a run can be looked into after the fact (the viewer links it).
    """
    handler = logging.FileHandler(run_log_path(out_dir, run_id), encoding="utf-8")
    handler.setLevel(logging.INFO)
    formatter = logging.Formatter(_RUN_LOG_FORMAT, "%Y-%m-%d %H:%M:%S")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    handler.addFilter(RedactingFilter(redactor))
    package = logging.getLogger("crabray")
    level = package.level
    if package.getEffectiveLevel() > logging.INFO:
        package.setLevel(logging.INFO)
    package.addHandler(handler)
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.setLevel(level)
        handler.close()


_RUN_LOG_FORMAT = "%(asctime)s UTC %(levelname)s %(name)s: %(message)s"


@contextmanager
def _redacted_logs(redactor: Redactor) -> Iterator[None]:
    """Remove known secrets from every record the root logger's handlers emit, during a run."""
    handlers = logging.getLogger().handlers
    log_filter = RedactingFilter(redactor)
    for handler in handlers:
        handler.addFilter(log_filter)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(log_filter)


def check_suite(suite: Suite) -> None:
    """Check a loaded suite as a run does before anything starts; report all problems at once.

    Every task as an episode would set it up (``validate_suite``), and every
    environment's backend settings, without starting a sandbox.

    Raises:
        SuiteErrors: One entry per task or environment that would fail before its agent
            starts.
    """
    validate_suite(suite, check_environment=_check_backend_settings)


def _check_backend_settings(env: EnvironmentConfig) -> None:
    backend_class(env.backend, env.name).check_settings(env.backend_settings)


def _writer(suite: Suite, sink: ResultSink) -> Callable[[list[EpisodeRecord]], None]:
    """``sink.write``, adding the files the suite's format writes per episode (in the
    driver), then naming in the run's log each episode written that ended in an error."""
    hook = suite.record_files

    def write(records: list[EpisodeRecord]) -> None:
        if hook is not None:
            for record in records:
                entry = suite.entries.get(record.result.task_id)
                if entry is not None:
                    record.artifacts.update(hook(entry, record))
        sink.write(records)
        for record in records:
            _log_if_errored(record)

    return write


def _log_if_errored(record: EpisodeRecord) -> None:
    """Name an episode that ended in an error in the run's log (info: the file has it
    whatever ``-v`` says): task, agent, outcome, whose doing it is, and the error.

    The end of ``crabray run`` groups them by cause; the log keeps each one, with when
    it happened, for whoever looks into the run later. An interrupted episode
    (``cancelled``) is no error: a resume runs it again.
    """
    result = record.result
    if result.error is None or result.termination_reason is TerminationReason.CANCELLED:
        return
    error = f"{result.error_type}: {result.error}" if result.error_type else result.error
    logger.info(
        "episode %s (agent %s, epoch %d, attempt %d) ended %s, the %s's: %s",
        result.task_id,
        result.agent,
        result.epoch,
        result.attempt,
        result.termination_reason.value,
        result.attribution.value,
        error,
    )


def _task_environments(suite: Suite, task_ids: set[str]) -> dict[str, list[EnvironmentConfig]]:
    """Each given task's environments, looked up once for everything the run checks first."""
    environments = {}
    for task_id in task_ids:
        entry = suite.entry(task_id)
        environments[task_id] = entry.benchmark.task_environments(entry.task)
    return environments


def _host_needs(
    envs: dict[str, list[EnvironmentConfig]],
) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """The (host kind, label selector) pairs the tasks' environments need."""
    return {
        (env.kind, tuple(sorted(env.label_selector.items())))
        for task_envs in envs.values()
        for env in task_envs
    }


def _new_manifest(run: _Run, suite: Suite) -> RunManifest:
    """The manifest of a new run, written once nothing can refuse the run any more.

    It records the results root as given (a store's URI, keys removed), not the
    staging folder a store's run is written through.
    """
    chosen = run.spec.results.run_id
    run_id = chosen or new_run_id()
    if chosen is not None and run_id in list_runs(run.out):
        raise ConfigError(
            f"run {run_id} exists in {run.root.shown}; resume it with --resume {run_id}",
            field="run_id",
        )
    return RunManifest(
        run_id=run_id,
        suite=suite.ref.path,
        suite_name=suite.name,
        suite_description=" ".join(
            dict.fromkeys(
                entry.benchmark.description
                for entry in suite.entries.values()
                if entry.benchmark.description
            )
        ),
        agents=[a.name for a in run.agents],
        agent_config=run.spec.agents.agent_config,
        options=_recorded_options(run),
        crabray_version=__version__,
    )


_NOT_RECORDED = {"resume", "address", "run_id", "agent_config", "model"}
"""Flat keys a manifest leaves out: which run and where (a resume says), and what the
manifest keeps in fields of its own."""


def _recorded_options(run: _Run) -> dict[str, object]:
    """The run as its manifest records it, by flat keys (``RunSpec.flat``), with the
    agents' specs and the results root as given (a store's URI, no keys).

    A backend setting named like a secret (``password``, ``api_key``) is recorded
    without its value (``recorded_backend_settings``): a resume asks for it again.
    """
    recorded = run.spec.flat(mode="json")
    for key in _NOT_RECORDED:
        recorded.pop(key)
    backend_settings = run.spec.what.backend_settings
    if backend_settings:
        recorded["backend_settings"] = recorded_backend_settings(backend_settings)
    agents = [agent.model_dump(mode="json") for agent in run.agents]
    return {**recorded, "agents": agents, "out_dir": run.root.shown}


def _budget_options(spec: RunSpec) -> dict[str, Any]:
    """The budget a resume runs with (given, else the run's): the manifest records it, so
    the next resume keeps a budget raised by this one."""
    return {"max_cost_usd": spec.limits.max_cost_usd, "max_tokens": spec.limits.max_tokens}


def _with_recorded_models(run: _Run, manifest: RunManifest) -> list[AgentSpec]:
    """The run's agents, each keeping the model the run recorded for it.

    A run is one model per agent: a resume given no ``--model`` goes on with the
    model each agent started with, even if its agents file now says another
    (a warning says so); a ``--model`` other than the recorded one is refused.

    Raises:
        ConfigError: ``--model`` differs from an agent's recorded model.
    """
    recorded = {
        spec["name"]: spec.get("model")
        for spec in manifest.options.get("agents") or []
        if isinstance(spec, dict)
    }
    given_model = run.spec.agents.model
    agents = []
    for spec in run.agents:
        model = recorded.get(spec.name)
        if model is None or model == spec.model:
            agents.append(spec)
        elif given_model is not None:
            raise ConfigError(
                f"run {manifest.run_id} ran agent {spec.name!r} with model {model!r}, not "
                f"{given_model!r}; resume it with --model {model} or without --model",
                field="--model",
            )
        else:
            logger.warning(
                "agent %r goes on with model %r, which run %s started with (its agents file "
                "now says %r)",
                spec.name,
                model,
                manifest.run_id,
                spec.model,
            )
            agents.append(spec.model_copy(update={"model": model}))
    return agents


def _resumed_run(run: _Run, resume: str, suite: Suite) -> RunManifest:
    """The manifest of ``resume``, checked against what the run says to run."""
    agents = [a.name for a in run.agents]
    manifest = read_manifest(run.out, resume)
    what = run.spec.what
    if what.suite_origin is not None:
        origin = manifest.options.get("suite_origin")
        if origin != what.suite_origin:
            raise ConfigError(
                f"run {resume} ran the suite shipped from {origin or manifest.suite}, not "
                f"{what.suite_origin}",
                field="--resume",
            )
    elif Path(manifest.suite).resolve() != Path(suite.ref.path).resolve():
        raise ConfigError(
            f"run {resume} ran suite {manifest.suite}, not {suite.ref.path}",
            field="--resume",
        )
    if sorted(manifest.agents) != sorted(agents):
        raise ConfigError(
            f"run {resume} ran agents {manifest.agents}, not {agents}", field="--resume"
        )
    for option, flag in (
        ("epochs", "--epochs"),
        ("task_ids", "--task"),
        ("tags", "--tag"),
        ("limit", "--limit"),
    ):
        recorded, given = manifest.options.get(option), getattr(what, option)
        if recorded != given:
            raise ConfigError(
                f"run {resume} was started with {option}={recorded!r}, not {given!r}; "
                f"pass the same {flag} to resume it",
                field="--resume",
            )
    return manifest
