"""``crabray audit``: which tasks of a suite can be passed without doing them."""

from __future__ import annotations

import json
import shlex
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from crabray.cli.options import (
    AddressOpt,
    BackendOpt,
    BackendSettingOpt,
    BaseImageOpt,
    ConcurrencyOpt,
    IndexOpt,
    LimitOpt,
    MaxAttemptsOpt,
    OutOpt,
    ResumeOpt,
    ServicesOpt,
    SuiteArg,
    SuiteFormatOpt,
    TagOpt,
    TaskOpt,
    TimeLimitOpt,
    backend_settings_of,
)
from crabray.cli.terminal import console, errors, safe_text
from crabray.core.words import counted, plural

if TYPE_CHECKING:
    from crabray.audit import AuditOptions
    from crabray.results.store.audit import AuditReport
    from crabray.results.store.root import ResultsRoot

AUDIT_EXAMPLES = """Examples:

  crabray audit tasks/demo                      # every probe; oracle and noop 3 times each

  crabray audit tasks/task_folder_demo --format json > audit.json

  crabray audit tasks/demo -k 5 --probe probe-peek --probe probe-empty

  crabray audit tasks/demo --fail-on do-nothing --fail-on answer-visible

Exit code: 0 when no task has a counted finding, 1 when one has, 2 on bad input.
"""


class AuditFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


RepeatsOpt = Annotated[
    int | None,
    typer.Option(
        "--repeats",
        "-k",
        min=1,
        help="Episodes of the oracle and of noop per task: a reference that passes fewer "
        "than k of k, or noop passing any, is a finding (3 by default; on --resume, the audit's "
        "own).",
    ),
]
ProbeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--probe",
        help="Run only this probe (repeatable); every registered probe when omitted "
        "(`crabray audit --list-probes`).",
    ),
]
FailOnOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-on",
        help="A finding class that fails the audit (repeatable, or comma-separated): "
        "reference, no-reference, do-nothing, trivial-answer, answer-visible, grader-trust, "
        "determinism; all but no-reference when omitted.",
    ),
]
FormatOpt = Annotated[
    AuditFormat,
    typer.Option("--format", help="table: a table per task; json: the findings, for CI."),
]
ListProbesOpt = Annotated[
    bool, typer.Option("--list-probes", help="List the probes and what each does, then stop.")
]


def audit(
    suite: Annotated[Path | None, typer.Argument(help=SuiteArg.__metadata__[0].help)] = None,
    repeats: RepeatsOpt = None,
    probe: ProbeOpt = None,
    fail_on: FailOnOpt = None,
    output: FormatOpt = AuditFormat.TABLE,
    list_probes: ListProbesOpt = False,
    out_dir: OutOpt = None,
    backend: BackendOpt = None,
    backend_setting: BackendSettingOpt = None,
    concurrency: ConcurrencyOpt = None,
    address: AddressOpt = None,
    resume: ResumeOpt = None,
    time_limit_sec: TimeLimitOpt = None,
    max_attempts: MaxAttemptsOpt = None,
    task: TaskOpt = None,
    tag: TagOpt = None,
    limit: LimitOpt = None,
    suite_format: SuiteFormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """Report the tasks of SUITE whose grade moves without the task being done.

    The oracle and noop play every task k times and each probe once (trivial
    answers, a search for the answer in the sandbox, attacks on the grader's
    inputs), as one ordinary run; each task's findings follow, with the share
    of tasks that fall and its 95% interval.
    """
    from crabray.audit import AuditOptions
    from crabray.core.errors import CrabrayError
    from crabray.run.spec import RunSpec

    if list_probes:
        _print_probes()
        return
    if suite is None and resume is None:
        raise CrabrayError("no suite: give SUITE (crabray audit tasks/demo)")
    spec = RunSpec.of(
        suite=suite,
        format=suite_format,
        backend=backend,
        backend_settings=backend_settings_of(backend_setting),
        index=index,
        base_image=base_image,
        services=services,
        out_dir=out_dir,
        concurrency=concurrency,
        address=address,
        resume=resume,
        time_limit_sec=time_limit_sec,
        max_attempts=max_attempts,
        task_ids=task or None,
        tags=tag or None,
        limit=limit,
    )
    address = spec.execution.address
    if address is not None and address.startswith(("http://", "https://")):
        raise CrabrayError(
            "an audit joins a cluster from one of its nodes (--address HOST:PORT); it is not "
            "submitted to a head's job API"
        )
    if spec.results.resume is not None:
        from crabray.run.resume import resume_spec

        spec = resume_spec(spec)
    options = AuditOptions(
        run=spec,
        repeats=repeats,
        probes=probe or None,
        fail_on=_classes(fail_on),
    )
    root = spec.results.out_dir
    report = _interruptible(options, output is AuditFormat.JSON, root)
    if output is AuditFormat.JSON:
        typer.echo(json.dumps(_json(report), indent=2))
    else:
        _print_report(report, root)
    unjudged = _unjudged(report, root)
    if report.failing or unjudged:
        raise typer.Exit(1)


def _unjudged(report: AuditReport, out: ResultsRoot) -> int:
    """Say (on standard error) which verdicts the infrastructure left unknown: a task whose
    every try of a probe failed there is not clean, only unaudited. Returns their count."""
    missing = [
        f"{task.task_id} ({probe})"
        for task in report.tasks
        for probe, verdict in task.verdicts.items()
        if verdict == "error"
    ]
    if missing:
        errors.print(
            f"[yellow]{counted(len(missing), 'verdict')} unknown[/]: every try failed in the "
            f"infrastructure, so these say nothing: {escape(', '.join(missing))}\n"
            f"audit them again with: crabray audit --resume {report.run_id} "
            f"--out {escape(shlex.quote(out.shown))}",
            highlight=False,
        )
    return len(missing)


def _interruptible(options: AuditOptions, quiet: bool, out: ResultsRoot) -> AuditReport:
    """The audit, stopped cleanly by Ctrl-C or SIGTERM: what finished is saved, the
    terminal says how much and the command that goes on, and the exit code is the
    signal's (130, 143), as ``crabray run``'s."""
    import signal

    from crabray.run.runner import RunInterrupted

    received = [signal.SIGINT]

    def terminate(signum: int, frame: Any) -> None:
        received[0] = signal.SIGTERM
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        return _run(options, quiet=quiet)
    except KeyboardInterrupt as exc:
        name = signal.Signals(received[0]).name
        if isinstance(exc, RunInterrupted):
            errors.print(
                f"[yellow]interrupted ({name})[/]: {exc.finished} of "
                f"{counted(exc.planned, 'episode')} {plural(exc.finished, 'is', 'are')} "
                "finished and saved\n"
                f"audit on with: crabray audit --resume {exc.run_id} "
                f"--out {escape(shlex.quote(out.shown))}",
                highlight=False,
            )
        else:
            errors.print(f"[yellow]interrupted ({name})[/] before any episode ran")
        raise typer.Exit(128 + received[0]) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _classes(fail_on: list[str] | None) -> list[str]:
    from crabray.audit.runner import DEFAULT_FAIL_ON

    if not fail_on:
        return list(DEFAULT_FAIL_ON)
    return [part.strip() for value in fail_on for part in value.split(",") if part.strip()]


def _run(options: Any, *, quiet: bool) -> AuditReport:
    """The audit with a progress line on standard error (standard output stays the report's)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from crabray.audit import run_audit
    from crabray.cluster.runtime.ray_runtime import disconnect

    progress = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=errors,
        transient=True,
        auto_refresh=errors.is_terminal,
        disable=not errors.is_terminal,
    )
    bar: list[Any] = []

    def start(run_id: str, planned: int, to_run: int) -> None:
        shown = f"{to_run} of {counted(planned, 'episode')} to run"
        errors.print(f"audit run id: [bold]{run_id}[/]  ({shown})")
        bar.append(progress.add_task("episodes", total=to_run))

    def update(state: Any) -> None:
        if bar:
            progress.update(bar[0], completed=state.done)

    try:
        with progress:
            return run_audit(options, on_start=start, on_progress=update)
    finally:
        disconnect()


def _json(report: AuditReport) -> list[dict[str, Any]]:
    """What ``--format json`` prints: each task with its findings (empty when clean)."""
    return [
        {
            "task_id": task.task_id,
            "findings": [finding.model_dump() for finding in task.findings],
            "verdicts": task.verdicts,
        }
        for task in report.tasks
    ]


def _print_report(report: AuditReport, out: ResultsRoot) -> None:
    """The table of verdicts per task, each finding below it, then the suite's figure."""
    console.print(_verdicts_table(report))
    for task in report.tasks:
        for finding in task.findings:
            aside = "" if finding.kind in report.counted else " (not counted)"
            console.print(
                f"[bold]{escape(safe_text(task.task_id))}[/]  [red]{finding.kind}[/]{aside}  "
                f"{escape(finding.probe)}: {escape(safe_text(finding.evidence))}",
                highlight=False,
            )
    console.print(
        f"exploitable: {report.exploitable} of {counted(len(report.tasks), 'task')} "
        f"({report.share:.0%}, 95% interval {report.low:.0%} to {report.high:.0%})",
        highlight=False,
    )
    if report.failing != report.exploitable:
        console.print(
            f"failing the audit: {counted(report.failing, 'task')} with a finding of "
            f"{', '.join(report.counted)}",
            highlight=False,
        )
    console.print(
        f"report: {escape(out.shown.rstrip('/') + '/audits/' + report.run_id + '.json')}   "
        f"run id: [bold]{report.run_id}[/]",
        highlight=False,
    )


def _verdicts_table(report: AuditReport) -> Table:
    """A column per probe where the terminal has room for them (about 9 characters each);
    else the oracle, noop, and the probes that passed the task or found its answer."""
    title = f"audit of {escape(report.suite)} (k = {report.repeats})"
    table = Table(title=title)
    table.add_column("task", overflow="fold")
    if console.width >= 30 + 9 * len(report.probes):
        for name in report.probes:
            table.add_column(_short(name), overflow="fold")
        for task in report.tasks:
            cells = [_cell(task.verdicts.get(name, "")) for name in report.probes]
            table.add_row(escape(safe_text(task.task_id)), *cells)
        return table
    baselines = [name for name in report.probes if not name.startswith("probe-")]
    for name in baselines:
        table.add_column(name, no_wrap=True)
    table.add_column("probes that moved the grade", overflow="fold")
    for task in report.tasks:
        moved = [
            f"{_short(name)} ({verdict})" if verdict not in ("pass", "found") else _short(name)
            for name in report.probes
            if name not in baselines
            and (verdict := task.verdicts.get(name, "")).startswith(("pass", "found"))
        ]
        cells = [escape(task.verdicts.get(name, "")) for name in baselines]
        table.add_row(escape(safe_text(task.task_id)), *cells, escape(", ".join(moved) or "none"))
    return table


def _short(name: str) -> str:
    return name.removeprefix("probe-")


def _cell(verdict: str) -> str:
    if verdict.startswith("pass") or verdict == "found":
        return f"[bold]{escape(verdict)}[/]"
    return escape(verdict)


def _print_probes() -> None:
    from crabray.agents.registry import agent_class
    from crabray.audit import probe_kinds

    for kind in probe_kinds():
        cls = agent_class(kind)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        console.print(
            f"{kind:<22} {getattr(cls, 'finding', ''):<15} {escape(doc)}", highlight=False
        )
