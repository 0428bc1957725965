"""``crabray``: the command line. It owns the terminal; the library only logs.

Heavy imports (Ray, pandas) happen inside the commands that need them, so
``crabray --help`` and ``crabray tasks`` stay fast.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from crabray.cli_cluster import cluster_app
from crabray.cli_envs import envs_app
from crabray.cli_errors import show_error
from crabray.cli_llm import llm_app
from crabray.cli_submit import fetch, follow_run, pack, stop_run, submit_run
from crabray.core.errors import CrabrayError
from crabray.run_config import DEFAULT_RESULTS, RunSettings

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from crabray.formats import Suite

MAIN_EXAMPLES = """Examples:

  crabray run tasks/demo --agent oracle --agent noop    # results go to results/

  crabray leaderboard --run latest

  crabray view

  crabray tasks validate tasks/demo

Each command's --help shows more.
"""


class _Commands(TyperGroup):
    """The ``crabray`` group: every command's errors are turned into messages here, once.

    Subcommands (``tasks``, ``runs``, ``cluster``, ``envs``) run inside this
    group's ``invoke``, so no command needs a ``try`` block of its own.
    """

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click.Context
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # typer's own: usage errors, exit codes, Ctrl-C
        except Exception as exc:
            code = show_error(exc, errors)
            if code is None:
                raise
            raise typer.Exit(code=code) from exc


app = typer.Typer(
    cls=_Commands,
    name="crabray",
    help="Run benchmarks for computer-using AI agents on Ray; results in Parquet.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
tasks_app = typer.Typer(
    help="Inspect and validate the tasks of a suite.",
    no_args_is_help=True,
    epilog="""Examples:

  crabray tasks list tasks/demo

  crabray tasks validate tasks/demo

  crabray tasks grade tasks/demo hello-file -r hello.txt=hello.txt
""",
)
runs_app = typer.Typer(
    help="List the runs under a results root.",
    no_args_is_help=True,
    epilog="""Example:

  crabray runs list
""",
)
app.add_typer(tasks_app, name="tasks")
app.add_typer(runs_app, name="runs")
app.add_typer(cluster_app, name="cluster")
app.add_typer(envs_app, name="envs")
app.add_typer(llm_app, name="llm")

console = Console()
errors = Console(stderr=True)

SuiteArg = Annotated[Path, typer.Argument(help="A suite: a .py file or a folder of tasks.")]
SuiteFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--suite-format",
        help="Suite format (python, task-json, task-folder, crab-dataset, or a plugin's); "
        "detected when omitted.",
    ),
]
OldFormatOpt = Annotated[
    str | None,
    typer.Option("--format", hidden=True, help="Deprecated spelling of --suite-format."),
]
IndexOpt = Annotated[
    Path | None,
    typer.Option(
        "--index",
        help="Task-JSON: an index file mapping each tool to the task ids to run (JSON).",
    ),
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

RunOpt = Annotated[
    str | None,
    typer.Option(
        "--run", help="Only this run id ('latest': the most recent run); every run when omitted."
    ),
]
TitleOpt = Annotated[
    str | None,
    typer.Option("--title", help="The site's title; the suite's name by default."),
]
DescriptionOpt = Annotated[
    str | None,
    typer.Option(
        "--description", help="The line under the site's title; the suite's path by default."
    ),
]


def _default(field: str) -> str:
    """The default of a run setting as ``--help`` shows it: written once, in ``RunSettings``."""
    return str(RunSettings.model_fields[field].default)


def _setting_option(field: str, *names: str, **option: Any) -> Any:
    """The option of run setting ``field``, its default shown as ``RunSettings`` writes it."""
    return typer.Option(*names, show_default=_default(field), **option)


# The options of ``crabray run``, each declared once: a command sharing one uses its alias.
RunSuiteArg = Annotated[
    Path | None,
    typer.Argument(help="A suite: a .py file or a folder of tasks (or `suite` in --config)."),
]
AgentOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--agent",
        "-a",
        help="Agent to run: oracle, noop or a name from --agent-config (repeatable).",
    ),
]
RunFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Run file (TOML) with the run's settings; options given here override it.",
    ),
]
OutOpt = Annotated[
    str | None,
    _setting_option(
        "out_dir",
        "--out",
        "-o",
        help="Results root; each run is kept apart under it. A directory, or a URI of a "
        "store pyarrow writes (s3://BUCKET/PREFIX, gs://...): the run is staged locally and "
        "uploaded as episodes finish.",
    ),
]
ConcurrencyOpt = Annotated[
    int | None,
    _setting_option(
        "concurrency", "--concurrency", "-c", min=1, help="Episodes in flight at most."
    ),
]
AddressOpt = Annotated[
    str | None,
    typer.Option(
        envvar="RAY_ADDRESS",
        help="Ray cluster to join (HOST:PORT, from a node of it), or the head's job API "
        "(http://HEAD:8265: the run is submitted as a Ray job, results stay on the head "
        "unless --out is a store URI); "
        "a local Ray instance when omitted.",
    ),
]
ResumeOpt = Annotated[
    str | None, typer.Option(help="Resume this run id: run only unfinished episodes.")
]
EpochsOpt = Annotated[
    int | None,
    _setting_option("epochs", min=1, help="Episodes of each task per agent (for pass@k)."),
]
MaxStepsOpt = Annotated[int | None, typer.Option(min=1, help="Override every task's step budget.")]
TimeLimitOpt = Annotated[
    float | None,
    typer.Option(
        min=0.001,
        help="Override every task's time budget, in seconds (default: the task's, else the "
        "suite's, else 3600).",
    ),
]
MaxAttemptsOpt = Annotated[
    int | None,
    _setting_option("max_attempts", min=1, help="Tries per episode when the infrastructure fails."),
]
TaskOpt = Annotated[
    list[str] | None, typer.Option("--task", "-t", help="Run only this task (repeatable).")
]
BackendOpt = Annotated[
    str | None,
    typer.Option(
        help="Sandbox backend (local, docker, ...) of suites that name none: task-JSON "
        "(default local) and task folders."
    ),
]
AgentConfigOpt = Annotated[
    Path | None,
    typer.Option("--agent-config", help="Agents file (TOML) defining LLM agents --agent can name."),
]
WarmOpt = Annotated[
    int | None,
    _setting_option("warm", min=0, help="Environments per configuration started ahead of demand."),
]
PoolOpt = Annotated[
    bool | None,
    typer.Option(
        "--pool/--no-pool",
        help="Reuse environments across episodes.",
        show_default="pool" if _default("pooling") == "True" else "no-pool",
    ),
]
LocalSlotsOpt = Annotated[
    int | None,
    typer.Option(min=1, help="Sandboxes of each kind a local Ray instance hosts at once."),
]
DetachOpt = Annotated[
    bool,
    typer.Option(
        "--detach",
        help="With --address http://HEAD:8265: submit the run, print its ids and how to "
        "follow it (crabray runs follow), and return at once.",
    ),
]


def _no_runs(out: str | Path, command: str) -> CrabrayError:
    """The error of a command that found no runs in OUT: where they are, or how to make one."""
    from crabray.results import nested_roots, shown_uri

    if "://" in str(out):
        out = shown_uri(str(out))  # never a key given in the URI
    nested = nested_roots(out) if "://" not in str(out) else []
    if nested:
        found = ", ".join(str(root) for root in nested)
        return CrabrayError(
            f"no runs in {out} itself, but under it in {found}; "
            f"give one: crabray {command} {nested[-1]}"
        )
    missing = "" if "://" in str(out) or Path(out).is_dir() else " (it does not exist)"
    return CrabrayError(
        f"no runs in {out}{missing}: start one with `crabray run tasks/demo --agent oracle` "
        "(or `bash scripts/demo.sh`), or give the results root your runs went to "
        f"(crabray run's --out): crabray {command} PATH"
    )


def _resolve_run(out: str | Path, run_id: str | None, command: str) -> str | None:
    """``--run``, with 'latest' replaced by the most recent run's id."""
    from crabray.results import latest_run

    if run_id != "latest":
        return run_id
    with _readable_root(str(out), whole=False) as root:
        found = latest_run(root)
    if found is None:
        raise _no_runs(out, command)
    return found


def _shown_root(out_arg: str, out: Path) -> str:
    """How messages name the results root: a store's URI (keys removed), else the folder."""
    from crabray.results import is_remote, shown_uri

    return shown_uri(out_arg) if is_remote(out_arg) else str(out)


@contextmanager
def _readable_root(out: str, *, whole: bool) -> Iterator[Path]:
    """OUT as a local results root: itself, or a temporary copy of the store it names.

    ``whole`` copies every run's files (the viewer and the site read them); else
    only the run manifests are copied (``runs list``).
    """
    from crabray.results import is_remote, local_path
    from crabray.results.remote import store_copy

    if not is_remote(out):
        yield local_path(out)
        return
    with store_copy(out, whole=whole) as copy:
        yield copy


def _print_version(value: bool) -> None:
    if value:
        from crabray import __version__

        console.print(f"crabray {__version__}", highlight=False)
        raise typer.Exit()


@app.callback(epilog=MAIN_EXAMPLES)
def main(
    verbose: Annotated[
        int, typer.Option("--verbose", "-v", count=True, help="-v for info, -vv for debug logs.")
    ] = 0,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run benchmarks for computer-using AI agents on Ray; results in Parquet."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    handler = RichHandler(console=errors, show_path=False, rich_tracebacks=False)
    logging.basicConfig(level=level, format="%(message)s", handlers=[handler], force=True)
    logging.getLogger("ray").setLevel(max(level, logging.ERROR))


RUN_EXAMPLES = """Examples:

  crabray run tasks/demo --agent oracle --agent noop

  crabray run tasks/demo -a gpt --agent-config agents.toml --epochs 3

  crabray run --config run.toml --concurrency 8     # the file's settings, but 8

  RAY_ADDRESS=10.0.0.5:6379 crabray run tasks/demo -a oracle     # on a cluster, from a node

  crabray run tasks/demo -a oracle --address http://10.0.0.5:8265   # from a laptop, as a job

A run file holds the same settings by their field names (suite, agents, agent_config,
out_dir, concurrency, epochs, max_steps, max_attempts, task_ids, backend, ...); an option
given here overrides only that field.
"""


@app.command(epilog=RUN_EXAMPLES)
def run(
    suite: RunSuiteArg = None,
    agent: AgentOpt = None,
    config: RunFileOpt = None,
    out: OutOpt = None,
    concurrency: ConcurrencyOpt = None,
    address: AddressOpt = None,
    resume: ResumeOpt = None,
    epochs: EpochsOpt = None,
    max_steps: MaxStepsOpt = None,
    time_limit_sec: TimeLimitOpt = None,
    max_attempts: MaxAttemptsOpt = None,
    task: TaskOpt = None,
    suite_format: SuiteFormatOpt = None,
    old_format: OldFormatOpt = None,
    backend: BackendOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
    agent_config: AgentConfigOpt = None,
    warm: WarmOpt = None,
    pool: PoolOpt = None,
    local_slots: LocalSlotsOpt = None,
    detach: DetachOpt = False,
) -> None:
    """Run agents on every task of SUITE; episodes stream into the results root as they finish."""
    from crabray.agents import select_agents
    from crabray.cluster.nodes import use_token_auth
    from crabray.run_config import RunConfig, load_run_config, merge_overrides

    given = {
        "suite": suite,
        "agents": agent or None,
        "agent_config": agent_config,
        "format": _suite_format(suite_format, old_format),
        "backend": backend,
        "index": index,
        "base_image": base_image,
        "services": services,
        "out_dir": out,
        "concurrency": concurrency,
        "address": address,
        "resume": resume,
        "epochs": epochs,
        "max_steps": max_steps,
        "time_limit_sec": time_limit_sec,
        "max_attempts": max_attempts,
        "task_ids": task or None,
        "warm": warm,
        "pooling": pool,
        "local_slots": local_slots,
    }
    base = RunConfig() if config is None else load_run_config(config)
    settings = merge_overrides(base, {k: _as_str(v) for k, v in given.items()})
    if settings.suite is None:
        raise CrabrayError("no suite: give SUITE, or `suite = ...` in a --config file")
    if not settings.agents:
        raise CrabrayError("no agent: give --agent NAME, or `agents = [...]` in a --config file")
    if settings.address is not None and settings.address.startswith(("http://", "https://")):
        submit_run(settings, detach=detach)  # on the cluster, as a Ray job
        return
    if detach:
        raise CrabrayError("--detach is for a submitted run: give --address http://HEAD:8265")
    use_token_auth(settings.address)  # before Ray is imported: Ray reads RAY_AUTH_MODE then
    from crabray.cluster.ray_runtime import disconnect
    from crabray.run import RunOptions, run_suite

    options = RunOptions(
        **settings.settings(),
        suite=settings.suite,
        agents=select_agents(settings.agents, settings.agent_config),
    )
    try:
        with _RunDisplay() as display:
            summary = run_suite(options, on_start=display.start, on_progress=display.update)
    finally:
        disconnect()  # the results are on disk; Ray's exit handler would be slower
    if summary.skipped:
        console.print(f"{summary.skipped} episodes were already finished and did not run again.")
    if summary.infra_failures:
        console.print(
            f"[yellow]{summary.infra_failures} infrastructure failures, "
            f"{summary.retries} retried[/]"
        )
    _print_leaderboard(options.out_dir, summary.run_id, "table")
    console.print(f"results: {escape(str(options.out_dir))}   run id: [bold]{summary.run_id}[/]")
    _print_next_steps(options.out_dir, summary.run_id)


def _as_str(value: object) -> object:
    """A path given on the command line as the string the run settings hold."""
    return str(value) if isinstance(value, Path) else value


def _suite_format(suite_format: str | None, old_format: str | None) -> str | None:
    """``--suite-format``, or its deprecated spelling ``--format`` with a warning."""
    if old_format is None:
        return suite_format
    errors.print(
        "[yellow]warning:[/] --format is deprecated for the suite format; use --suite-format"
    )
    if suite_format is not None and suite_format != old_format:
        raise CrabrayError("--suite-format and --format disagree; give --suite-format only")
    return old_format


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


def _print_next_steps(out: Path | str, run_id: str) -> None:
    """The exact commands that look at a run that just finished."""
    import shlex

    where = "" if out == DEFAULT_RESULTS else f" {shlex.quote(str(out))}"
    prog = _prog()
    steps = [
        (f"{prog} leaderboard{where} --run {run_id}", "the leaderboard"),
        (f"{prog} view{where} --run latest", "episodes in a browser"),
        (f"{prog} leaderboard{where} --html site", "a static site, every run"),
        (f"{prog} runs list{where}", "every run"),
    ]
    if "://" in str(out):  # a store: the leaderboard reads it, the others a local root
        steps = [steps[0], (f"{prog} leaderboard{where} --by task_id", "per task")]
    width = max(len(command) for command, _ in steps)
    console.print("look at it with:", highlight=False)
    for command, what in steps:
        line = f"  {command:<{width}}  # {what}"
        console.print(escape(line), highlight=False, soft_wrap=True)


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
        console.print(f"run id: [bold]{run_id}[/]  ({to_run} of {planned} episodes to run)")
        self.bar = self.progress.add_task("episodes", total=to_run, successes=0, rate="")

    def update(self, progress: Any) -> None:
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        if not errors.is_terminal and progress.done != self.shown:
            # No bar where nobody watches a terminal (a Ray job's log): a line per episode.
            self.shown = progress.done
            errors.print(
                f"episodes {progress.done}/{self.progress.tasks[0].total:g}, "
                f"{progress.successes} ok",
                highlight=False,
            )
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


@app.command(
    epilog="""Examples:

  crabray leaderboard                          # every run under results/

  crabray leaderboard --run latest --format md

  crabray leaderboard --by tag

  crabray leaderboard --compare RUN_A RUN_B

  crabray leaderboard --html site              # a static site of every run

  crabray leaderboard s3://bucket/results --format csv
"""
)
def leaderboard(
    out: Annotated[
        str,
        typer.Argument(help="Results root, or an fsspec URL of one (file://, memory://, s3://)."),
    ] = str(DEFAULT_RESULTS),
    run_id: RunOpt = None,
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
            "same, only_a, only_b), with a summary line; 'latest' names the most recent run.",
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Also write a static site (plots, episode pages) here."),
    ] = None,
    title: TitleOpt = None,
    description: DescriptionOpt = None,
) -> None:
    """Per agent and model: success rate with its 95% interval, score, cost, pass@k.

    Infrastructure failures (env_error) are counted apart in 'infra_errors' and
    left out of every other number. With several epochs per task, pass@k and
    pass^k columns follow. --by and --compare show a breakdown or a run
    comparison instead of the leaderboard.
    """
    if fmt not in ("table", "md", "csv", "json"):
        raise CrabrayError(f"--format must be table, md, csv or json, not '{fmt}'")
    if compare is not None and (run_id is not None or by is not None):
        raise CrabrayError("--compare names its two runs; use it without --run and --by")
    if html is not None:
        import importlib

        from crabray.results import check_output_dir

        check_output_dir(html, "--html")
        importlib.import_module("crabray.results.site")  # without the [site] extra: fail first
    run_id = _resolve_run(out, run_id, "leaderboard")
    if compare is not None:
        first, second = (_resolve_run(out, run, "leaderboard") for run in compare)
        compare = (first or compare[0], second or compare[1])
        if compare[0] == compare[1]:
            raise CrabrayError(f"--compare needs two different runs, not {compare[0]} twice")
    _print_leaderboard(out, run_id, fmt, by=by, per_suite=per_suite, compare=compare)
    if html is not None:
        with _readable_root(out, whole=True) as root:
            _write_site(root, html, run_id, title, description)


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
    from crabray.results import (
        EPISODES_SCHEMA,
        LEADERBOARD_INPUT_COLUMNS,
        TAG,
        breakdown_table,
        compare_table,
        leaderboard_table,
        read_episode_table,
    )
    from crabray.results.dataset import use_system_allocator

    use_system_allocator()  # this process reads the results and exits (see why there)

    columns = list(LEADERBOARD_INPUT_COLUMNS)
    if by is not None:
        source = "tags" if by in (TAG, "tags") else by
        if source not in EPISODES_SCHEMA.names:
            raise CrabrayError(
                f"--by must be an episode column or 'tag', not {by!r}; columns: "
                + ", ".join(EPISODES_SCHEMA.names)
            )
        columns = list(dict.fromkeys([*columns, source]))
    runs = list(dict.fromkeys(compare)) if compare is not None else [run_id]
    # The plain leaderboard reads rows in the files' order (the fastest); a breakdown or a
    # comparison in episode order, so its sums add up in the order they always did.
    ordered = compare is not None or by is not None
    tables = [read_episode_table(out, run, columns, ordered=ordered) for run in runs]
    for run, rows in zip(runs, tables, strict=True):
        if rows.num_rows == 0 and run is None:
            raise _no_runs(out, "leaderboard")
        if rows.num_rows == 0:
            raise CrabrayError(f"no episodes in {out} for run {run}")
    import pyarrow as pa

    episodes = pa.concat_tables(tables)
    keys = ("agent", "model", "suite") if per_suite else ("agent", "model")
    if compare is not None:
        comparison = compare_table(episodes, *compare)
        _show(comparison.table, "changes per task", fmt)
        # csv and json stay machine-readable: the summary goes to stderr there.
        (console if fmt in ("table", "md") else errors).print(comparison.summary, highlight=False)
    elif by is not None:
        _show(breakdown_table(episodes, by, keys), f"success by {by}", fmt)
    else:
        _show(leaderboard_table(episodes, keys), "leaderboard", fmt)


def _show(table: pd.DataFrame | pa.Table, title: str, fmt: str) -> None:
    """Print a leaderboard-like table in ``fmt`` (a terminal table, md, csv or json)."""
    from crabray.results import render, to_rich_table

    if fmt == "table":
        console.print(to_rich_table(table, title=title))
    else:
        sys.stdout.write(render(table, fmt))  # type: ignore[arg-type]
        sys.stdout.flush()


def _write_site(
    out: Path, site_dir: Path, run_id: str | None, title: str | None, description: str | None
) -> None:
    from crabray.results.site import build_site

    index = build_site(out, site_dir, run_id, title=title, description=description)
    errors.print(f"site written: {escape(str(index))}", highlight=False)


@app.command(
    epilog="""Examples:

  crabray view                                 # every run under results/

  crabray view --run latest --port 0           # the newest run, on a free port

  crabray view path/to/results

  crabray view --title "Nightly sweep" --description "desktop tasks, three models"
"""
)
def view(
    out_arg: Annotated[
        str, typer.Argument(metavar="OUT", help="Results root: a folder or a store URI.")
    ] = str(DEFAULT_RESULTS),
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port; 0 picks one.")] = 8765,
    host: Annotated[str, typer.Option(help="Interface to bind; keep it local.")] = "127.0.0.1",
    run_id: RunOpt = None,
    title: TitleOpt = None,
    description: DescriptionOpt = None,
) -> None:
    """Serve OUT's results: matrix, leaderboard, runs, comparison, episodes with their
    conversation. Open pages update themselves as episodes finish."""
    from crabray.results import has_results
    from crabray.results.site import make_server

    with _readable_root(out_arg, whole=True) as out:
        shown = _shown_root(out_arg, out)
        if not has_results(out):
            raise _no_runs(shown, "view")
        run_id = _resolve_run(out, run_id, "view")
        server = make_server(
            out, host=host, port=port, run_id=run_id, title=title, description=description
        )
        url = f"http://{host}:{server.server_port}/"
        snapshot = " (a copy of the store made now)" if shown != str(out) else ""
        console.print(f"serving {escape(shown)}{snapshot} at {url} (Ctrl-C stops)", highlight=False)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            console.print("stopped")
        finally:
            server.server_close()


def _load_suite(
    suite: Path,
    suite_format: str | None,
    old_format: str | None,
    index: Path | None,
    base_image: str | None,
    services: Path | None,
) -> Suite:
    """Load SUITE as the ``tasks`` commands do; a problem exits with every error shown."""
    from crabray.formats import load_suite, resolve_suite

    chosen = _suite_format(suite_format, old_format)
    return load_suite(
        resolve_suite(suite, chosen, index=index, base_image=base_image, services=services)
    )


@tasks_app.command(
    "list",
    epilog="""Examples:

  crabray tasks list tasks/demo

  crabray tasks list tasks/task_json_demo --index tasks/task_json_demo/test_small.json
""",
)
def tasks_list(
    suite: SuiteArg,
    suite_format: SuiteFormatOpt = None,
    old_format: OldFormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """List the tasks of SUITE: id, environments, evaluator size, limits, tags."""
    loaded = _load_suite(suite, suite_format, old_format, index, base_image, services)
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


@tasks_app.command(
    "validate",
    epilog="""Examples:

  crabray tasks validate tasks/demo

  crabray tasks validate my_suite/ --suite-format python
""",
)
def tasks_validate(
    suite: SuiteArg,
    suite_format: SuiteFormatOpt = None,
    old_format: OldFormatOpt = None,
    index: IndexOpt = None,
    base_image: BaseImageOpt = None,
    services: ServicesOpt = None,
) -> None:
    """Check every task of SUITE; print every problem with its file, line and field."""
    from crabray.formats import resolve_suite
    from crabray.run import load_checked_suite

    chosen = _suite_format(suite_format, old_format)
    ref = resolve_suite(suite, chosen, index=index, base_image=base_image, services=services)
    loaded = load_checked_suite(ref)
    console.print(f"[green]✓[/] {len(loaded.entries)} tasks in {suite} are valid")
    for entry in loaded.entries.values():
        for warning in entry.task.metadata.get("warnings", []):
            console.print(f"[yellow]![/] {escape(str(warning))}")


@tasks_app.command(
    "grade",
    epilog="""Examples:

  crabray tasks grade tasks/demo/demo.py hello-file -r hello.txt=/tmp/hello.txt

  crabray tasks grade SUITE TASK_ID -r /home/user/out.csv=gold.csv --skip-setup
""",
)
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
    suite_format: SuiteFormatOpt = None,
    old_format: OldFormatOpt = None,
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

    loaded = load_suite(
        resolve_suite(
            suite,
            _suite_format(suite_format, old_format),
            backend=backend,
            index=index,
            base_image=base_image,
            services=services,
        )
    )
    files = [parse_result_file(spec) for spec in result or []]
    graded = grade_task(loaded, task_id, files, skip_setup=skip_setup)
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


@runs_app.command(
    "list",
    epilog="""Examples:

  crabray runs list                            # the runs under results/

  crabray runs list path/to/results
""",
)
def runs_list(
    out_arg: Annotated[
        str, typer.Argument(metavar="OUT", help="Results root: a folder or a store URI.")
    ] = str(DEFAULT_RESULTS),
) -> None:
    """List the runs recorded in OUT (a folder or a store URI) with their suite and agents."""
    from crabray.results import list_runs, read_manifest

    with _readable_root(out_arg, whole=False) as out:
        manifests = [read_manifest(out, run_id) for run_id in list_runs(out)]
    shown = _shown_root(out_arg, out)
    if not manifests:
        raise _no_runs(shown, "runs list")
    table = Table(title=f"runs in {shown}")
    for column in ("run id", "suite", "agents", "created"):
        table.add_column(column)
    for m in manifests:
        table.add_row(m.run_id, m.suite_name, ", ".join(m.agents), f"{m.created_at:%Y-%m-%d %H:%M}")
    console.print(table)


runs_app.command(
    "fetch",
    epilog="""Examples:

  crabray runs fetch 20261123-075300-3fa2c1 --address http://10.0.0.5:8265

  crabray runs fetch RUN_ID --address http://HEAD:8265 --from /mnt/shared/results --out results
""",
)(fetch)
runs_app.command(
    "follow",
    epilog="""Examples:

  crabray runs follow 20261123-075300-3fa2c1 --address http://10.0.0.5:8265
""",
)(follow_run)
runs_app.command(
    "stop",
    epilog="""Examples:

  crabray runs stop 20261123-075300-3fa2c1 --address http://10.0.0.5:8265
""",
)(stop_run)
runs_app.command("pack", hidden=True)(pack)


if __name__ == "__main__":
    app()
