"""``crabray run``: agents on a suite, here or on a cluster, with a progress bar."""

from __future__ import annotations

import gc
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from crabray.cli.options import (
    AddressOpt,
    AgentConfigOpt,
    AgentOpt,
    BackendOpt,
    BackendSettingOpt,
    BaseImageOpt,
    ConcurrencyOpt,
    DetachOpt,
    EpochsOpt,
    IndexOpt,
    LimitOpt,
    LocalSlotsOpt,
    MaxAttemptsOpt,
    MaxCostOpt,
    MaxStepsOpt,
    MaxTokensOpt,
    ModelOpt,
    OldFormatOpt,
    OutOpt,
    PoolOpt,
    ResumeOpt,
    RunFileOpt,
    RunSuiteArg,
    ServicesOpt,
    SuiteFormatOpt,
    TagOpt,
    TaskOpt,
    TimeLimitOpt,
    VerifiedOnlyOpt,
    WarmOpt,
    backend_settings_of,
)
from crabray.cli.options import (
    suite_format as chosen_format,
)
from crabray.cli.reports import print_leaderboard
from crabray.cli.submit import DEFAULT_SYNC_SEC, SyncEveryOpt, submit_run
from crabray.cli.terminal import console, errors, print_copyable
from crabray.core.errors import CrabrayError
from crabray.core.words import counted, plural
from crabray.results.store.root import ResultsRoot
from crabray.run.spec import is_default_root

if TYPE_CHECKING:
    from crabray.cluster.sweep.progress import SweepProgress
    from crabray.run.budget import BudgetReached
    from crabray.run.outcomes import Cause
    from crabray.run.runner import RunSummary, StartCallback
    from crabray.run.spec import RunSpec

RUN_EXAMPLES = """Examples:

  crabray run tasks/demo --agent oracle --agent noop

  crabray run tasks/demo -a gpt --agent-config agents.toml --epochs 3

  crabray run tasks/demo -a gpt --agent-config agents.toml -m gpt-4o-mini --limit 3

  crabray run tasks/demo -a oracle --task 'hello-*' --tag files -v

  crabray run --config run.toml --concurrency 8     # the file's settings, but 8

  crabray run --resume latest     # finish the last run (after Ctrl-C): nothing else to give

  RAY_ADDRESS=10.0.0.5:6379 crabray run tasks/demo -a oracle     # on a cluster, from a node

  crabray run tasks/demo -a oracle --address http://10.0.0.5:8265   # from a laptop, as a job

A run file holds the same settings by their field names (suite, agents, agent_config,
out_dir, concurrency, epochs, max_steps, max_attempts, task_ids, tags, limit, backend,
...); an option given here overrides only that field.
"""


def run(
    suite: RunSuiteArg = None,
    agent: AgentOpt = None,
    model: ModelOpt = None,
    config: RunFileOpt = None,
    out_dir: OutOpt = None,
    concurrency: ConcurrencyOpt = None,
    address: AddressOpt = None,
    resume: ResumeOpt = None,
    epochs: EpochsOpt = None,
    max_steps: MaxStepsOpt = None,
    time_limit_sec: TimeLimitOpt = None,
    max_attempts: MaxAttemptsOpt = None,
    max_cost_usd: MaxCostOpt = None,
    max_tokens: MaxTokensOpt = None,
    task: TaskOpt = None,
    tag: TagOpt = None,
    limit: LimitOpt = None,
    suite_format: SuiteFormatOpt = None,
    old_format: OldFormatOpt = None,
    backend: BackendOpt = None,
    backend_setting: BackendSettingOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
    agent_config: AgentConfigOpt = None,
    warm: WarmOpt = None,
    pool: PoolOpt = None,
    local_slots: LocalSlotsOpt = None,
    detach: DetachOpt = False,
    sync_every: SyncEveryOpt = DEFAULT_SYNC_SEC,
    verified_only: VerifiedOnlyOpt = False,
) -> None:
    """Run agents on every task of SUITE; episodes stream into the results root as they finish."""
    from crabray.cluster.runtime.token_auth import use_token_auth
    from crabray.run.spec import RunSpec, load_run_spec

    flags = RunSpec.of(
        suite=suite,
        agents=agent or None,
        agent_config=agent_config,
        model=model,
        format=chosen_format(suite_format, old_format),
        backend=backend,
        backend_settings=backend_settings_of(backend_setting),
        index=index,
        base_image=base_image,
        services=services,
        out_dir=out_dir,
        concurrency=concurrency,
        address=address,
        resume=resume,
        epochs=epochs,
        max_steps=max_steps,
        time_limit_sec=time_limit_sec,
        max_attempts=max_attempts,
        max_cost_usd=max_cost_usd,
        max_tokens=max_tokens,
        task_ids=task or None,
        tags=tag or None,
        limit=limit,
        warm=warm,
        pooling=pool,
        local_slots=local_slots,
    )
    spec = (RunSpec() if config is None else load_run_spec(config)).updated(flags)
    submitted = _submitted(spec.execution.address)
    if spec.results.resume is not None and not submitted:
        from crabray.run.resume import resume_spec

        spec = resume_spec(spec)  # the run's suite, agents and options
    if spec.what.suite is None:
        raise CrabrayError("no suite: give SUITE, or `suite = ...` in a --config file")
    if not spec.agents.names:
        raise CrabrayError("no agent: give --agent NAME, or `agents = [...]` in a --config file")
    if submitted:  # on the cluster, as a job
        submit_run(spec, detach=detach, sync_every=sync_every, verified_only=verified_only)
        return
    if detach:
        raise CrabrayError("--detach is for a submitted run: give --address http://HEAD:8265")
    use_token_auth(spec.execution.address)  # before Ray is imported: Ray reads RAY_AUTH_MODE then
    from crabray.cluster.runtime.ray_runtime import disconnect
    from crabray.run.api import evaluate

    gc.freeze()  # the modules just imported live to the end: the run's collections skip them

    def show_end(run_id: str, causes: list[Cause]) -> int:
        return _print_end(spec, run_id, causes, verified_only=verified_only)

    root = spec.results.out_dir
    with _Interrupts(root, spec.results.resume, show_end) as interrupts:
        try:
            with _RunDisplay() as display:
                summary = evaluate(
                    None,
                    (),
                    spec,
                    on_start=interrupts.watch(display.start),
                    on_progress=display.update,
                )
                interrupts.summary = summary
        finally:
            disconnect()  # the results are on disk; Ray's exit handler would be slower
    if summary.skipped:
        console.print(
            f"{counted(summary.skipped, 'episode')} {plural(summary.skipped, 'was', 'were')} "
            "already finished and did not run again."
        )
    if summary.infra_failures:
        console.print(
            f"[yellow]{counted(summary.infra_failures, 'infrastructure failure')}, "
            f"{summary.retries} retried[/]"
        )
    code = show_end(summary.run_id, summary.not_the_agents)
    if summary.budget_reached is not None:
        _print_budget_stop(summary, summary.budget_reached, root)
        code = BUDGET_EXIT
    if code:
        raise typer.Exit(code)


BUDGET_EXIT = 3
"""``crabray run``'s exit code when its budget stopped it before every episode ran."""


def _print_budget_stop(summary: RunSummary, reached: BudgetReached, out: ResultsRoot) -> None:
    """Say which budget stopped the run, how far it got, and the command that goes on."""
    finished = summary.skipped + summary.ran
    console.print(
        f"[yellow]stopped by its budget[/]: {reached.describe()}; "
        f"{finished} of {counted(summary.planned, 'episode')} "
        f"{plural(finished, 'is', 'are')} finished and saved",
        highlight=False,
    )
    print_copyable(
        f"go on with as much again: {escape(_resume_command(out, summary.run_id))} "
        f"{reached.flag} {_as_much_again(reached)}"
    )


def _as_much_again(reached: BudgetReached) -> str:
    """A budget that allows the run what it spent plus the budget again (cents rounded up)."""
    import math

    if reached.flag == "--max-tokens":
        return str(reached.spent.tokens + int(reached.limit))
    return f"{math.ceil((reached.spent.cost_usd + reached.limit) * 100) / 100:.2f}"


def _print_end(spec: RunSpec, run_id: str, causes: list[Cause], *, verified_only: bool) -> int:
    """What a finished run prints: its leaderboard, where its results are, the commands
    that look at them, its passes not verified and what was not the agents' doing.

    Returns:
        The run's exit code (``print_causes``'s).
    """
    from crabray.agents.config import bare_kinds
    from crabray.cli.outcomes import print_causes

    root = spec.results.out_dir
    out = root.given
    print_leaderboard(root, run_id, "table", verified_only=verified_only)
    if any(name not in bare_kinds() for name in spec.agents.names):
        _print_models(out, run_id)  # a name the agents file defines: an LLM agent
    console.print(f"results: {escape(root.shown)}   run id: [bold]{run_id}[/]")
    submitted = spec.what.suite_origin is not None  # its machine prints its own, for its copy
    if not submitted:
        _print_next_steps(root, run_id)
    _print_unverified(out, run_id, verified_only)
    resume = None if submitted else _resume_command(root, run_id)
    return print_causes(causes, root, run_id, _prog(), resume)


def _print_models(out: Path | str, run_id: str) -> None:
    """A line per model the run's agents called: calls, 429s, retries, latency, tokens,
    cost and the time calls waited for the model limiter (every attempt counted)."""
    from rich.table import Table

    from crabray.results.board.models import model_usage

    usages = model_usage(out, run_id)
    if not usages:
        return
    table = Table(title="models", title_justify="left", box=None, pad_edge=False)
    for header in ("model", "calls", "429s", "/100", "retries", "p50 s", "p95 s", "waited s"):
        table.add_column(header, justify="left" if header == "model" else "right")
    for column in ("tok in", "tok out", "cost $"):
        table.add_column(column, justify="right")
    for usage in usages:
        table.add_row(
            escape(usage.model),
            str(usage.calls),
            str(usage.rate_limited),
            f"{usage.rate_limited_per_100:.1f}",
            str(usage.retries),
            _seconds(usage.latency_p50_sec),
            _seconds(usage.latency_p95_sec),
            f"{usage.wait_sec:.1f}",
            str(usage.tokens_in),
            str(usage.tokens_out),
            f"{usage.cost_usd:.4f}",
        )
    console.print(table)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _print_unverified(out: Path | str, run_id: str, verified_only: bool) -> None:
    """Name the run's passes that are not verified (``print_unverified``), read back from
    its rows by the rule the leaderboard above counted them with."""
    from crabray.cli.outcomes import print_unverified
    from crabray.results import read_episode_table
    from crabray.results.board.trust import TRUST_INPUT_COLUMNS, passes_not_verified

    rows = read_episode_table(out, run_id, list(TRUST_INPUT_COLUMNS), ordered=True)
    several = len(rows.column("agent").unique()) > 1
    print_unverified(passes_not_verified(rows), verified_only=verified_only, several_agents=several)


def _submitted(address: str | None) -> bool:
    """Whether the run goes to a cluster's head as a Ray job (its results root is there)."""
    return address is not None and address.startswith(("http://", "https://"))


def _prog() -> str:
    """How the user can type this command again: ``crabray`` if that finds it, else its path."""
    import shutil

    invoked = Path(sys.argv[0])
    if invoked.name != "crabray":
        return "crabray"  # python -m crabray, or in-process
    found = shutil.which("crabray")
    if found is not None and Path(found).resolve() == invoked.resolve():
        return "crabray"
    return str(invoked)


def _print_next_steps(out: ResultsRoot, run_id: str) -> None:
    """The exact commands that look at a run that just finished."""
    where = _where(out)
    prog = _prog()
    steps = [
        (f"{prog} leaderboard{where} --run {run_id}", "the leaderboard"),
        (f"{prog} view{where} --run latest", "episodes in a browser"),
        (f"{prog} leaderboard{where} --html site", "a static site, every run"),
        (f"{prog} runs list{where}", "every run"),
    ]
    if out.is_url:  # a store: the leaderboard reads it, the others a folder
        steps = [steps[0], (f"{prog} leaderboard{where} --by task_id", "per task")]
    width = max(len(command) for command, _ in steps)
    console.print("look at it with:", highlight=False)
    for command, what in steps:
        line = f"  {command:<{width}}  # {what}"
        console.print(escape(line), highlight=False, soft_wrap=True)


class _Interrupts:
    """Ctrl-C and SIGTERM stop a run cleanly: what was saved, how to resume, exit 130 / 143.

    SIGTERM becomes a ``KeyboardInterrupt`` as SIGINT is, so the run stops the
    same way (its episodes in flight end after their step and are saved as
    ``cancelled``; ``crabray.cluster.sweep.scheduler``), then the exit code says which.
    A signal that comes once every episode is saved (as the run winds up, or
    while Ray shuts down) interrupts no episode: the run finished, and its end
    is printed as usual (``show_end``) before the exit code says the signal.
    """

    def __init__(
        self, out: ResultsRoot, resume: str | None, show_end: Callable[[str, list[Cause]], int]
    ) -> None:
        self.out = out
        self.resume = resume
        self.show_end = show_end
        self.signum = signal.SIGINT
        self.run_id: str | None = None
        """The run, once it has started (``watch``)."""
        self.planned = 0
        """Its episodes, once it has started."""
        self.summary: RunSummary | None = None
        """What the run did, once it has finished."""

    def watch(self, on_start: StartCallback) -> StartCallback:
        """``on_start``, also noting the run's id: an interrupt after it names the run."""

        def started(run_id: str, planned: int, to_run: int) -> None:
            self.run_id, self.planned = run_id, planned
            on_start(run_id, planned, to_run)

        return started

    def __enter__(self) -> _Interrupts:
        self.previous = signal.signal(signal.SIGTERM, self._terminate)
        return self

    def _terminate(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signal.SIGTERM
        raise KeyboardInterrupt

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        signal.signal(signal.SIGTERM, self.previous)
        if not isinstance(exc, KeyboardInterrupt):
            return
        from crabray.run.runner import RunInterrupted, interrupted_after

        name = signal.Signals(self.signum).name
        if self.summary is None and self.run_id is not None and not isinstance(exc, RunInterrupted):
            exc = interrupted_after(self.out.given, self.run_id, self.planned)
        if isinstance(exc, RunInterrupted) and exc.complete:
            self._finished(name, exc.run_id, exc.planned, None)
        if self.summary is not None:
            self._finished(name, self.summary.run_id, self.summary.planned, self.summary)
        if isinstance(exc, RunInterrupted):
            console.print(
                f"[yellow]interrupted ({name})[/]: {exc.finished} of "
                f"{counted(exc.planned, 'episode')} {plural(exc.finished, 'is', 'are')} "
                "finished and saved"
                + (
                    f"; {exc.cancelled} stopped mid-way {plural(exc.cancelled, 'was', 'were')} "
                    "saved as they stood and run again on resume"
                    if exc.cancelled
                    else ""
                ),
                highlight=False,
            )
            run_id: str | None = exc.run_id
        else:
            console.print(f"[yellow]interrupted ({name})[/] before any episode ran")
            run_id = self.resume
        if run_id is not None:
            print_copyable(f"resume with: {escape(_resume_command(self.out, run_id))}")
        raise SystemExit(128 + self.signum) from None

    def _finished(self, name: str, run_id: str, planned: int, summary: RunSummary | None) -> None:
        """The signal came once every episode was saved: say so, print the run's end (its
        leaderboard) as a finished run does, and exit with the signal's code."""
        from crabray.run.outcomes import causes_not_the_agents

        console.print(
            f"[yellow]interrupted ({name})[/] as the run ended; the run had finished: "
            f"all {counted(planned, 'episode')} {plural(planned, 'is', 'are')} saved",
            highlight=False,
        )
        causes = (
            summary.not_the_agents if summary else causes_not_the_agents(self.out.given, run_id)
        )
        self.show_end(run_id, causes)
        raise SystemExit(128 + self.signum) from None


def _where(out: ResultsRoot) -> str:
    """A results root as a command's argument: nothing for the default one."""
    import shlex

    return "" if is_default_root(out) else f" {shlex.quote(out.given)}"


def _resume_command(out: ResultsRoot, run_id: str) -> str:
    """The command that finishes ``run_id``: nothing else to give but a non-default root."""
    import shlex

    where = "" if is_default_root(out) else f" --out {shlex.quote(out.shown)}"
    return f"{_prog()} run --resume {run_id}{where}"


class _RunDisplay:
    """The progress bar of a run: episodes done, successes, elapsed time, rate."""

    def __enter__(self) -> _RunDisplay:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            "{task.fields[successes]} ok",
            TimeElapsedColumn(),
            "{task.fields[rate]}",
            "{task.fields[flight]}",
            console=errors,
            transient=False,
            # Nobody sees a redraw off a terminal (its final state prints at the end):
            # no thread rebuilding the bar ten times a second (0.1 CPU-s per 30 s run).
            auto_refresh=errors.is_terminal,
        )
        self.progress.__enter__()
        self.bar: Any = None
        self.shown = 0
        self.t0 = time.monotonic()
        return self

    def start(self, run_id: str, planned: int, to_run: int) -> None:
        console.print(
            f"run id: [bold]{run_id}[/]  ({to_run} of {counted(planned, 'episode')} to run)"
        )
        self.bar = self.progress.add_task("episodes", total=to_run, successes=0, rate="", flight="")

    def update(self, progress: SweepProgress) -> None:
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        if not errors.is_terminal and progress.done != self.shown:
            # No bar where nobody watches a terminal (a Ray job's log): a line per episode.
            self.shown = progress.done
            errors.print(
                f"episodes {progress.done}/{self.progress.tasks[0].total:g}, "
                f"{progress.successes} ok"
                + "".join(f", {line}" for line in _flight_lines(progress)),
                highlight=False,
            )
        self.progress.update(
            self.bar,
            completed=progress.done,
            successes=progress.successes,
            rate=f"{progress.done / elapsed:.2f} ep/s",
            flight=", ".join(_flight_lines(progress)),
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.progress.__exit__(exc_type, exc, traceback)


def _flight_lines(progress: SweepProgress) -> list[str]:
    """What is in flight: the episodes (with ``--concurrency auto`` their level; with a fixed
    one only beside a model), then each model limiter's limit and calls, e.g. ``in flight 6,
    model gpt-4o: limit 8, 3 in flight``."""
    models = progress.models_line()
    episodes = progress.in_flight_line() or (f"in flight {progress.in_flight}" if models else "")
    return [line for line in (episodes, models) if line]
