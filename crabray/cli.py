"""``crabray``: the command line. It owns the terminal; the library only logs.

Heavy imports (Ray, pandas) happen inside the commands that need them, so
``crabray --help`` and ``crabray tasks`` stay fast.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table

from crabray.core.errors import CrabrayError

app = typer.Typer(
    name="crabray",
    help="Run benchmarks for computer-using AI agents on Ray; results in Parquet.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
tasks_app = typer.Typer(help="Inspect and validate the tasks of a suite.", no_args_is_help=True)
runs_app = typer.Typer(help="List the runs in an output directory.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
app.add_typer(runs_app, name="runs")

console = Console()
errors = Console(stderr=True)

SuiteArg = Annotated[Path, typer.Argument(help="A suite: a .py file or a folder of tasks.")]
FormatOpt = Annotated[
    str | None, typer.Option("--format", help="Suite format; detected when omitted.")
]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Output directory of the results.")]


@app.callback()
def main(
    verbose: Annotated[
        int, typer.Option("--verbose", "-v", count=True, help="-v for info, -vv for debug logs.")
    ] = 0,
) -> None:
    """Set up logging: warnings by default, more with -v."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    handler = RichHandler(console=errors, show_path=False, rich_tracebacks=False)
    logging.basicConfig(level=level, format="%(message)s", handlers=[handler], force=True)
    logging.getLogger("ray").setLevel(max(level, logging.ERROR))


def _fail(exc: Exception) -> typer.Exit:
    """Show an error as the user should read it; return the exit code for it.

    A suite's problems are listed one per line and exit with 1 (invalid
    input); any other error is one line and exits with 2.
    """
    from crabray.formats import SuiteErrors

    if isinstance(exc, SuiteErrors):
        for problem in exc.errors:
            errors.print(f"[red]✗[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
        errors.print(f"[bold red]{len(exc.errors)} problem(s)[/] in {escape(str(exc.file))}")
        return typer.Exit(code=1)
    errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


@app.command()
def run(
    suite: SuiteArg,
    agent: Annotated[
        list[str], typer.Option("--agent", "-a", help="Agent to run (repeat for several).")
    ],
    out: OutOpt = Path("results"),
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Episodes in flight at most.")
    ] = 2,
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address; a local Ray instance when omitted.")
    ] = None,
    resume: Annotated[
        str | None, typer.Option(help="Resume this run id: run only unfinished episodes.")
    ] = None,
    epochs: Annotated[int, typer.Option(min=1, help="Attempts of each task per agent.")] = 1,
    max_steps: Annotated[
        int | None, typer.Option(min=1, help="Override every task's step budget.")
    ] = None,
    max_attempts: Annotated[
        int, typer.Option(min=1, help="Tries per episode when the infrastructure fails.")
    ] = 3,
    task: Annotated[
        list[str] | None, typer.Option("--task", "-t", help="Run only this task (repeatable).")
    ] = None,
    suite_format: FormatOpt = None,
) -> None:
    """Run agents on every task of SUITE; episodes stream into OUT as they finish."""
    from crabray.agents import agent_spec
    from crabray.cluster import RunOptions, run_suite

    try:
        options = RunOptions(
            suite=str(suite),
            format=suite_format,
            agents=[agent_spec(name) for name in agent],
            out_dir=out,
            concurrency=concurrency,
            address=address,
            resume=resume,
            epochs=epochs,
            max_steps=max_steps,
            max_attempts=max_attempts,
            task_ids=task,
        )
        with _RunDisplay() as display:
            summary = run_suite(options, on_start=display.start, on_progress=display.update)
    except CrabrayError as exc:
        raise _fail(exc) from exc
    if summary.skipped:
        console.print(f"{summary.skipped} episodes were already finished and did not run again.")
    if summary.infra_failures:
        console.print(
            f"[yellow]{summary.infra_failures} infrastructure failures, "
            f"{summary.retries} retried[/]"
        )
    _print_leaderboard(out, summary.run_id, "table")
    console.print(f"results: {out}   run id: [bold]{summary.run_id}[/]")


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
            console=errors,
            transient=False,
        )
        self.progress.__enter__()
        self.bar: Any = None
        self.t0 = time.monotonic()
        return self

    def start(self, run_id: str, planned: int, to_run: int) -> None:
        console.print(f"run id: [bold]{run_id}[/]  ({to_run} of {planned} episodes to run)")
        self.bar = self.progress.add_task("episodes", total=to_run, successes=0, rate="")

    def update(self, progress: Any) -> None:
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        self.progress.update(
            self.bar,
            completed=progress.done,
            successes=progress.successes,
            rate=f"{progress.done / elapsed:.2f} ep/s",
        )

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)


@app.command()
def leaderboard(
    out: Annotated[Path, typer.Argument(help="Output directory of a run.")] = Path("results"),
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, md, csv or json.")] = "table",
) -> None:
    """Per agent and model: episodes, success rate, mean score, completeness, steps, tokens."""
    if fmt not in ("table", "md", "csv", "json"):
        raise _fail(CrabrayError(f"--format must be table, md, csv or json, not '{fmt}'"))
    try:
        _print_leaderboard(out, run_id, fmt)
    except CrabrayError as exc:
        raise _fail(exc) from exc


def _print_leaderboard(out: Path, run_id: str | None, fmt: str) -> None:
    from crabray.results import leaderboard as board
    from crabray.results import read_episodes, render, to_rich_table

    episodes = read_episodes(out, run_id)
    if episodes.empty:
        raise CrabrayError(f"no episodes in {out}" + (f" for run {run_id}" if run_id else ""))
    table = board(episodes)
    if fmt == "table":
        console.print(to_rich_table(table, title="leaderboard"))
    else:
        sys.stdout.write(render(table, fmt))  # type: ignore[arg-type]
        sys.stdout.flush()


@tasks_app.command("list")
def tasks_list(suite: SuiteArg, suite_format: FormatOpt = None) -> None:
    """List the tasks of SUITE: id, environments, evaluator size, limits, tags."""
    from crabray.formats import load_suite, resolve_suite

    try:
        loaded = load_suite(resolve_suite(suite, suite_format))
    except CrabrayError as exc:
        raise _fail(exc) from exc
    table = Table(title=f"{loaded.name} ({len(loaded.entries)} tasks)")
    for column in ("task", "benchmark", "environments", "evaluators", "max steps", "tags"):
        table.add_column(column)
    for task_id, entry in loaded.entries.items():
        envs = entry.benchmark.task_environments(entry.task)
        table.add_row(
            task_id,
            entry.benchmark.name,
            ", ".join(e.name for e in envs),
            str(len(entry.task.evaluators)),
            str(entry.benchmark.step_limit_of(entry.task)),
            ", ".join(entry.task.tags),
        )
    console.print(table)


@tasks_app.command("validate")
def tasks_validate(suite: SuiteArg, suite_format: FormatOpt = None) -> None:
    """Check every task of SUITE; print every problem with its file and field."""
    from crabray.episode import check_suite
    from crabray.formats import load_suite, resolve_suite

    try:
        loaded = load_suite(resolve_suite(suite, suite_format))
        check_suite(loaded)
    except CrabrayError as exc:
        raise _fail(exc) from exc
    console.print(f"[green]✓[/] {len(loaded.entries)} tasks in {suite} are valid")


@runs_app.command("list")
def runs_list(
    out: Annotated[Path, typer.Argument(help="Output directory.")] = Path("results"),
) -> None:
    """List the runs recorded in OUT with their suite and agents."""
    from crabray.results import list_runs, read_manifest

    try:
        manifests = [read_manifest(out, run_id) for run_id in list_runs(out)]
    except CrabrayError as exc:
        raise _fail(exc) from exc
    table = Table(title=f"runs in {out}")
    for column in ("run id", "suite", "agents", "created"):
        table.add_column(column)
    for m in manifests:
        table.add_row(m.run_id, m.suite_name, ", ".join(m.agents), f"{m.created_at:%Y-%m-%d %H:%M}")
    console.print(table)


if __name__ == "__main__":
    app()
