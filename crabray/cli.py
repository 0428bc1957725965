"""``crabray``: the command line. It owns the terminal; the library only logs.

Heavy imports (Ray, pandas) happen inside the commands that need them, so
``crabray --help`` and ``crabray tasks`` stay fast.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table

from crabray.cli_cluster import cluster_app
from crabray.cli_envs import envs_app
from crabray.core.errors import CrabrayError

if TYPE_CHECKING:
    from crabray.formats import Suite

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
app.add_typer(cluster_app, name="cluster")
app.add_typer(envs_app, name="envs")

console = Console()
errors = Console(stderr=True)

SuiteArg = Annotated[Path, typer.Argument(help="A suite: a .py file or a folder of tasks.")]
FormatOpt = Annotated[
    str | None, typer.Option("--format", help="Suite format; detected when omitted.")
]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Output directory of the results.")]
IndexOpt = Annotated[
    Path | None,
    typer.Option("--index", help="Task-JSON: an index file {tool: [task ids]} selecting tasks."),
]
BaseImageOpt = Annotated[
    str | None,
    typer.Option(
        "--base-image",
        help="Task folders: the image replacing every FROM of the tasks' Dockerfiles "
        "(default: the original base image becomes crabray/task-base:latest).",
    ),
]
ServicesOpt = Annotated[
    Path | None,
    typer.Option(
        "--services",
        help="Task folders: the service registry file (default: services.yml at the suite root).",
    ),
]


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
        list[str],
        typer.Option(
            "--agent",
            "-a",
            help="Agent to run: oracle, noop or a name from --agent-config (repeatable).",
        ),
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
    backend: Annotated[
        str | None,
        typer.Option(
            help="Sandbox backend (local, docker, ...) of suites that name none: task-JSON "
            "(default local) and task folders."
        ),
    ] = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
    agent_config: Annotated[
        Path | None,
        typer.Option(
            "--agent-config", help="Agents file (TOML) defining LLM agents --agent can name."
        ),
    ] = None,
    warm: Annotated[
        int, typer.Option(min=0, help="Environments per configuration started ahead of demand.")
    ] = 0,
    pool: Annotated[
        bool, typer.Option("--pool/--no-pool", help="Reuse environments across episodes.")
    ] = True,
    local_slots: Annotated[
        int | None,
        typer.Option(min=1, help="Sandboxes of each kind a local Ray instance hosts at once."),
    ] = None,
) -> None:
    """Run agents on every task of SUITE; episodes stream into OUT as they finish."""
    from crabray.agents import select_agents
    from crabray.cluster.nodes import use_token_auth

    try:
        use_token_auth(address)  # before Ray is imported: Ray reads RAY_AUTH_MODE then
        from crabray.run import RunOptions, run_suite

        options = RunOptions(
            suite=str(suite),
            format=suite_format,
            backend=backend,
            index=None if index is None else str(index),
            base_image=base_image,
            services=None if services is None else str(services),
            agents=select_agents(agent, agent_config),
            out_dir=out,
            concurrency=concurrency,
            address=address,
            resume=resume,
            epochs=epochs,
            max_steps=max_steps,
            max_attempts=max_attempts,
            task_ids=task,
            warm=warm,
            pooling=pool,
            local_slots=local_slots,
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.progress.__exit__(exc_type, exc, traceback)


@app.command()
def leaderboard(
    out: Annotated[
        str,
        typer.Argument(
            help="Output directory of runs, or an fsspec URL of one (file://, memory://, s3://)."
        ),
    ] = "results",
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run.")] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", "-f", help="table (fits 80 columns), md, csv or json (every column)."
        ),
    ] = "table",
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            metavar="COLUMN",
            help="Success per value of an episode column (task_id, suite, termination_reason, "
            "...) or per tag ('tag'), for each agent and model.",
        ),
    ] = None,
    per_suite: Annotated[
        bool, typer.Option("--per-suite", help="A leaderboard row per agent, model and suite.")
    ] = False,
    compare: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--compare",
            metavar="RUN_A RUN_B",
            help="What changed per task from RUN_A to RUN_B (fixed, broke, better, worse, "
            "same, only_a, only_b), with a summary line.",
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Also write a static site (plots, episode pages) here."),
    ] = None,
) -> None:
    """Per agent and model: success rate with its 95% interval, score, cost, pass@k.

    Infrastructure failures (env_error) are counted apart in 'infra_errors' and
    left out of every other number. With several epochs per task, pass@k and
    pass^k columns follow. --by and --compare show a breakdown or a run
    comparison instead of the leaderboard.
    """
    try:
        if fmt not in ("table", "md", "csv", "json"):
            raise CrabrayError(f"--format must be table, md, csv or json, not '{fmt}'")
        if compare is not None and (run_id is not None or by is not None):
            raise CrabrayError("--compare names its two runs; use it without --run and --by")
        _print_leaderboard(out, run_id, fmt, by=by, per_suite=per_suite, compare=compare)
        if html is not None:
            _write_site(Path(out), html, run_id)
    except CrabrayError as exc:
        raise _fail(exc) from exc


def _print_leaderboard(
    out: str | Path,
    run_id: str | None,
    fmt: str,
    *,
    by: str | None = None,
    per_suite: bool = False,
    compare: tuple[str, str] | None = None,
) -> None:
    """Print the leaderboard of OUT (or a breakdown, or a comparison) in ``fmt``.

    Reads only the columns the table needs, so it stays fast on large datasets.
    """
    import pandas as pd

    from crabray.results import (
        EPISODES_SCHEMA,
        LEADERBOARD_INPUT_COLUMNS,
        TAG,
        breakdown,
        compare_runs,
        read_episodes,
        render,
        to_rich_table,
    )
    from crabray.results import leaderboard as board

    columns = list(LEADERBOARD_INPUT_COLUMNS)
    if by is not None:
        source = "tags" if by in (TAG, "tags") else by
        if source not in EPISODES_SCHEMA.names:
            raise CrabrayError(
                f"--by must be an episode column or 'tag', not {by!r}; columns: "
                + ", ".join(EPISODES_SCHEMA.names)
            )
        columns = list(dict.fromkeys([*columns, source]))
    runs = list(compare) if compare is not None else [run_id]
    frames = [read_episodes(out, run, columns) for run in dict.fromkeys(runs)]
    for run, frame in zip(dict.fromkeys(runs), frames, strict=True):
        if frame.empty:
            raise CrabrayError(f"no episodes in {out}" + (f" for run {run}" if run else ""))
    episodes = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    summary = None
    keys = ("agent", "model", "suite") if per_suite else ("agent", "model")
    if compare is not None:
        comparison = compare_runs(episodes, *compare)
        table, title, summary = comparison.tasks, "changes per task", comparison.summary
    elif by is not None:
        table, title = breakdown(episodes, by, keys), f"success by {by}"
    else:
        table, title = board(episodes, keys), "leaderboard"
    if fmt == "table":
        console.print(to_rich_table(table, title=title))
    else:
        sys.stdout.write(render(table, fmt))  # type: ignore[arg-type]
        sys.stdout.flush()
    if summary is not None:
        # csv and json stay machine-readable: the summary goes to stderr there.
        (console if fmt in ("table", "md") else errors).print(summary, highlight=False)


def _write_site(out: Path, site_dir: Path, run_id: str | None) -> None:
    from crabray.results.site import build_site

    index = build_site(out, site_dir, run_id)
    errors.print(f"site written: {escape(str(index))}", highlight=False)


@app.command()
def view(
    out: Annotated[Path, typer.Argument(help="Output directory of a run.")] = Path("results"),
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port; 0 picks one.")] = 8765,
    host: Annotated[str, typer.Option(help="Interface to bind; keep it local.")] = "127.0.0.1",
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run.")] = None,
) -> None:
    """Serve OUT's leaderboard and episode pages; new episodes appear on reload."""
    from crabray.results.site import make_server

    try:
        server = make_server(out, host=host, port=port, run_id=run_id)
    except CrabrayError as exc:
        raise _fail(exc) from exc
    url = f"http://{host}:{server.server_port}/"
    console.print(f"serving {escape(str(out))} at {url} (Ctrl-C stops)", highlight=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        server.server_close()


def _load_suite(
    suite: Path,
    suite_format: str | None,
    index: Path | None,
    base_image: str | None,
    services: Path | None,
) -> Suite:
    """Load SUITE as the ``tasks`` commands do; a problem exits with every error shown."""
    from crabray.formats import load_suite, resolve_suite

    try:
        return load_suite(
            resolve_suite(
                suite, suite_format, index=index, base_image=base_image, services=services
            )
        )
    except CrabrayError as exc:
        raise _fail(exc) from exc


@tasks_app.command("list")
def tasks_list(
    suite: SuiteArg,
    suite_format: FormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """List the tasks of SUITE: id, environments, evaluator size, limits, tags."""
    loaded = _load_suite(suite, suite_format, index, base_image, services)
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
def tasks_validate(
    suite: SuiteArg,
    suite_format: FormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """Check every task of SUITE; print every problem with its file and field."""
    from crabray.run import check_suite

    loaded = _load_suite(suite, suite_format, index, base_image, services)
    try:
        check_suite(loaded)
    except CrabrayError as exc:
        raise _fail(exc) from exc
    console.print(f"[green]✓[/] {len(loaded.entries)} tasks in {suite} are valid")


@tasks_app.command("grade")
def tasks_grade(
    suite: SuiteArg,
    task_id: Annotated[str, typer.Argument(help="The task to grade.")],
    result: Annotated[
        list[str] | None,
        typer.Option(
            "--result",
            "-r",
            help="[ENV:]SANDBOX_PATH=LOCAL_FILE: a file handed in as the result (repeatable).",
        ),
    ] = None,
    skip_setup: Annotated[
        bool, typer.Option("--skip-setup", help="Leave the task's own setup steps out.")
    ] = False,
    backend: Annotated[
        str | None,
        typer.Option("--backend", help="Task-JSON: the sandbox backend (default: local)."),
    ] = None,
    suite_format: FormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """Run TASK_ID's setup, hand in the result files, grade it with no agent.

    Prints the score and each evaluator's or checkpoint's outcome: the gold
    file handed in should score 1, the untouched original 0.
    """
    from crabray.formats import load_suite, resolve_suite
    from crabray.grade import grade_task, parse_result_file

    try:
        loaded = load_suite(
            resolve_suite(
                suite,
                suite_format,
                backend=backend,
                index=index,
                base_image=base_image,
                services=services,
            )
        )
    except CrabrayError as exc:
        raise _fail(exc) from exc
    try:
        files = [parse_result_file(spec) for spec in result or []]
        graded = grade_task(loaded, task_id, files, skip_setup=skip_setup)
    except CrabrayError as exc:
        raise _fail(exc) from exc
    outcome = graded.record.result
    table = Table(title=f"{task_id}: score {outcome.score:g} ({outcome.termination_reason.value})")
    table.add_column("evaluator or checkpoint")
    table.add_column("outcome")
    for name, value in graded.breakdown:
        table.add_row(escape(name), value)
    console.print(table)
    for warning in graded.warnings:
        errors.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    if outcome.error:
        errors.print(f"[red]error:[/] {escape(outcome.error)}", highlight=False, soft_wrap=True)
    console.print(f"score {outcome.score:g}")


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
