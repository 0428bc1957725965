"""``run_audit``: a suite's tasks under the oracle, noop and every probe, as one ordinary run.

The audit is a run like any other (its episodes are rows: resume, clusters,
the viewer and the leaderboard work on them): the oracle and noop each play
every task k times, each probe once. Its report is then read from the rows
(``crabray.audit.findings``) and written beside them (``OUT/audits/``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from crabray.agents import AgentSpec
from crabray.agents.probes import ProbeAgent
from crabray.agents.registry import agent_class, available_agents
from crabray.audit.facts import task_facts
from crabray.audit.findings import (
    BASELINE,
    EPISODE_COLUMNS,
    REFERENCE,
    STEP_COLUMNS,
    task_audits,
)
from crabray.cluster.sweep.scheduler import ProgressCallback
from crabray.core.errors import ConfigError
from crabray.results.board.stats import wilson_interval
from crabray.results.store.audit import FINDING_CLASSES, AuditReport, fails, falls, write_audit
from crabray.results.store.dataset import read_episodes, read_steps
from crabray.results.store.runs import read_manifest
from crabray.run.runner import StartCallback, load_checked_suite, run_suite
from crabray.run.selection import select_tasks
from crabray.run.spec import RunSpec

DEFAULT_REPEATS = 3
DEFAULT_FAIL_ON = tuple(kind for kind in FINDING_CLASSES if kind != "no-reference")
"""Every class but a missing reference solution, which suites such as TheAgentCompany's
ship none of: the audit then says so, and fails only when asked to."""


class AuditOptions(BaseModel):
    """What to audit and how: the run's options (without agents), k, the probes, what fails."""

    run: RunSpec = Field(description="The run's suite and settings; its agents are the audit's.")
    repeats: int | None = Field(
        default=None,
        gt=0,
        description="Oracle and noop episodes per task; a resumed audit's own, else 3.",
    )
    probes: list[str] | None = Field(
        default=None, description="Probes to run; a resumed audit's own, else every one."
    )
    fail_on: list[str] = Field(default_factory=lambda: list(DEFAULT_FAIL_ON))


def probe_kinds() -> list[str]:
    """Every registered probe (plugins' included), by kind."""
    return [kind for kind in available_agents() if issubclass(agent_class(kind), ProbeAgent)]


def audit_agents(options: AuditOptions) -> list[AgentSpec]:
    """The oracle and noop (k episodes each) and each probe (one), told the tasks' facts.

    Raises:
        ConfigError: A probe that is not a registered probe, or a finding class unknown.
    """
    what = options.run.what
    if what.suite is None:
        raise ConfigError("no suite: give SUITE", field="SUITE")
    # Loaded first: a probe its module registers is then known here as in the workers.
    suite = load_checked_suite(what.resolve(what.suite))
    known = probe_kinds()
    chosen = known if options.probes is None else options.probes
    unknown = [name for name in chosen if name not in known]
    if unknown:
        raise ConfigError(
            f"not a probe: {', '.join(unknown)}; known probes: {', '.join(known)}",
            field="--probe",
        )
    task_ids = select_tasks(suite, what.task_ids, what.tags, what.limit)
    facts = {
        task_id: task_facts(suite.entries[task_id].task).model_dump(exclude_defaults=True)
        for task_id in task_ids
    }
    repeats = options.repeats or DEFAULT_REPEATS
    baselines = [AgentSpec(name=name, kind=name, epochs=repeats) for name in (REFERENCE, BASELINE)]
    probes = [
        AgentSpec(name=kind, kind=kind, epochs=1, settings={"facts": facts}) for kind in chosen
    ]
    return [*baselines, *probes]


def check_fail_on(classes: Sequence[str]) -> list[str]:
    """The finding classes given to ``--fail-on``, checked.

    Raises:
        ConfigError: A class that is not one of ``FINDING_CLASSES``.
    """
    unknown = [name for name in classes if name not in FINDING_CLASSES]
    if unknown:
        raise ConfigError(
            f"unknown finding class {', '.join(unknown)}; known: {', '.join(FINDING_CLASSES)}",
            field="--fail-on",
        )
    return list(classes)


def run_audit(
    options: AuditOptions,
    on_start: StartCallback | None = None,
    on_progress: ProgressCallback | None = None,
) -> AuditReport:
    """Audit the suite: run it (or resume it), then read and write its report.

    Raises:
        ConfigError: Bad options, a bad probe, or an invalid suite.
        ResultsError: The results root cannot be read or written.
    """
    counted = check_fail_on(options.fail_on)
    options = _as_recorded(options)
    agents = audit_agents(options)
    run = options.run.updated(RunSpec.of(epochs=1))  # each agent's own epochs: k, or 1
    summary = run_suite(run, agents, on_start=on_start, on_progress=on_progress)
    return audit_report(run, agents, summary.run_id, options.repeats or DEFAULT_REPEATS, counted)


def _as_recorded(options: AuditOptions) -> AuditOptions:
    """A resumed audit's k and probes, where none are given: what its run recorded."""
    results = options.run.results
    if results.resume is None:
        return options
    manifest = read_manifest(results.out_dir.given, results.resume)
    specs = {spec["name"]: spec for spec in manifest.options.get("agents", [])}
    recorded_k = specs.get(REFERENCE, {}).get("epochs")
    probes = [name for name in manifest.agents if name not in (REFERENCE, BASELINE)]
    return options.model_copy(
        update={
            "repeats": options.repeats or recorded_k,
            "probes": options.probes if options.probes is not None else probes,
        }
    )


def audit_report(
    run: RunSpec, agents: list[AgentSpec], run_id: str, repeats: int, counted: list[str]
) -> AuditReport:
    """The report of an audit run, from its rows; written to ``OUT/audits/RUN.json``."""
    out = run.results.out_dir.given
    episodes = read_episodes(out, run_id, EPISODE_COLUMNS)
    steps = read_steps(out, run_id, STEP_COLUMNS)
    probes = {
        agent.name: cls
        for agent in agents
        if issubclass(cls := agent_class(agent.kind), ProbeAgent)
    }
    finding_of = {name: cls.finding for name, cls in probes.items()}
    guarded = frozenset(name for name, cls in probes.items() if cls.harness_guards)
    order = [agent.name for agent in agents]
    tasks = task_audits(episodes, steps, finding_of, order, guarded)
    fell = sum(falls(task, counted) for task in tasks)
    low, high = wilson_interval(fell, len(tasks)) if tasks else (0.0, 0.0)
    report = AuditReport(
        run_id=run_id,
        suite=run.what.suite or "",
        repeats=repeats,
        probes=order,
        counted=counted,
        tasks=tasks,
        exploitable=fell,
        failing=sum(fails(task, counted) for task in tasks),
        share=fell / len(tasks) if tasks else 0.0,
        low=low,
        high=high,
    )
    write_audit(out, report)
    return report
