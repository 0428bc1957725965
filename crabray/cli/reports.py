"""``crabray leaderboard`` and ``crabray view``: what a results root says, in a table or pages."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from crabray.cli.options import (
    DEFAULT_ROOT,
    DescriptionOpt,
    RootArg,
    RunOpt,
    TitleOpt,
    VerifiedOnlyOpt,
    root_argument,
)
from crabray.cli.roots import no_runs, resolve_run, resolve_run_in, shown_root
from crabray.cli.terminal import console, errors, plain_text, safe_text
from crabray.core.errors import CrabrayError
from crabray.results.store.root import ResultsRoot

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

logger = logging.getLogger(__name__)

LEADERBOARD_EXAMPLES = """Examples:

  crabray leaderboard                          # per suite; per task the latest run's episodes

  crabray leaderboard --run latest --format md

  crabray leaderboard --by tag

  crabray leaderboard --compare RUN_A RUN_B

  crabray leaderboard --all-runs               # every run's episodes summed, per suite

  crabray leaderboard --verified-only          # only passes of a trusted grader succeed

  crabray leaderboard --html site              # a static site of every run

  crabray leaderboard s3://bucket/results --format csv
"""


def leaderboard(
    root: Annotated[
        ResultsRoot,
        root_argument("Results root, or an fsspec URL of one (file://, memory://, s3://)."),
    ] = DEFAULT_ROOT,
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
        bool,
        typer.Option(
            "--per-suite",
            help="With --run: a suite column too (without --run every table is of one suite).",
        ),
    ] = False,
    all_runs: Annotated[
        bool,
        typer.Option(
            "--all-runs",
            help="Count every run's episodes, a task run twice counting twice (still one "
            "table per suite). Default without --run: per task, only the latest run's.",
        ),
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
    verified_only: VerifiedOnlyOpt = False,
    title: TitleOpt = None,
    description: DescriptionOpt = None,
) -> None:
    """Per agent and model: success rate with its 95% interval, score, cost, pass@k.

    Without --run: one table per suite, counting per task only the episodes of
    the latest run that ran it (a re-run replaces, never adds); each table
    names the runs it counts. Only episodes attributed to the agent count:
    benchmark errors (failing setup, evaluator errors, no solution for the
    oracle) and infrastructure errors are counted apart in 'benchmark_errors'
    and 'infra_errors' and left out of every other number. Beside the success
    rate, 'verified_success_rate' counts only passes graded by a path the agent
    could not alter; 'unverified_passes' and 'unknown_trust_passes' count the
    others. With several epochs per task, the interval is clustered by task and
    pass@k and pass^k columns follow. --by and --compare show a breakdown or a
    run comparison instead of the leaderboard.
    """
    if fmt not in ("table", "md", "csv", "json"):
        raise CrabrayError(f"--format must be table, md, csv or json, not '{fmt}'")
    if compare is not None and (run_id is not None or by is not None or all_runs):
        raise CrabrayError(
            "--compare names its two runs; use it without --run, --by and --all-runs"
        )
    if all_runs and run_id is not None:
        raise CrabrayError("--all-runs counts every run; use it without --run")
    if html is not None:
        import importlib

        from crabray.results import check_output_dir

        check_output_dir(html, "--html")
        importlib.import_module("crabray.results.site")  # without the [site] extra: fail first
    run_id = resolve_run(root, run_id, "leaderboard")
    if compare is not None:
        first, second = (resolve_run(root, run, "leaderboard") for run in compare)
        compare = (first or compare[0], second or compare[1])
        if compare[0] == compare[1]:
            raise CrabrayError(f"--compare needs two different runs, not {compare[0]} twice")
    print_leaderboard(
        root,
        run_id,
        fmt,
        by=by,
        per_suite=per_suite,
        compare=compare,
        all_runs=all_runs,
        verified_only=verified_only,
    )
    if html is not None:
        with root.readable(whole=True) as folder:
            _write_site(folder, html, run_id, title, description, all_runs=all_runs)


def print_leaderboard(
    root: ResultsRoot,
    run_id: str | None,
    fmt: str,
    *,
    by: str | None = None,
    per_suite: bool = False,
    compare: tuple[str, str] | None = None,
    all_runs: bool = False,
    verified_only: bool = False,
) -> None:
    """Print the leaderboard of ``root`` (or a breakdown, or a comparison) in ``fmt``.

    Reads only the columns the table needs, so it stays fast on large datasets.
    Without ``run_id`` the rows are those ``latest_per_task`` keeps (every run's
    with ``all_runs``), summarised per suite; each table names the runs it counts.
    With ``verified_only`` only verified passes count as successes, and each
    title says so (a table that reads like the usual one must not count otherwise).
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
    from crabray.results.store.dataset import use_system_allocator

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
    tables = [read_episode_table(root.given, run, columns, ordered=ordered) for run in runs]
    for run, rows in zip(runs, tables, strict=True):
        if rows.num_rows == 0 and run is None:
            raise no_runs(root, "leaderboard")
        if rows.num_rows == 0:
            raise CrabrayError(f"no episodes in {root.shown} for run {run}")
    import pyarrow as pa

    episodes = pa.concat_tables(tables)
    if compare is not None:
        comparison = compare_table(episodes, *compare, verified_only=verified_only)
        _show(comparison.table, _titled("changes per task", verified_only), fmt)
        # csv and json stay machine-readable: the summary goes to stderr there.
        (console if fmt in ("table", "md") else errors).print(
            safe_text(comparison.summary), highlight=False
        )
        return
    from crabray.results.board.selection import describe_runs, latest_per_task, runs_per_suite

    if run_id is None and not all_runs:
        episodes = latest_per_task(episodes)
    suites = runs_per_suite(episodes)
    per_suite = (per_suite or run_id is None) and by != "suite"
    keys = ("agent", "model", "suite") if per_suite else ("agent", "model")
    if by is not None:
        table = breakdown_table(episodes, by, keys, verified_only=verified_only)
        title = f"success by {by}"
    else:
        table, title = leaderboard_table(episodes, keys, verified_only=verified_only), "leaderboard"
    title = _titled(title, verified_only)
    created = _created(root, [run for runs in suites.values() for run in runs])
    scope = _scope(run_id, all_runs)
    if run_id is None and fmt in ("table", "md") and per_suite:
        _show_per_suite(table, title, fmt, suites, created, scope)
        return
    _show(table, title, fmt)
    # csv and json stay machine-readable: which runs they count goes to stderr there.
    for suite, runs in suites.items():
        (console if fmt in ("table", "md") else errors).print(
            safe_text(f"{scope}, suite {suite}: {describe_runs(runs, created)}"), highlight=False
        )


def _titled(title: str, verified_only: bool) -> str:
    """A table's title, saying when only verified passes count as successes."""
    return f"{title} (verified passes only)" if verified_only else title


def _scope(run_id: str | None, all_runs: bool) -> str:
    """What a report counts, in a few words for the line that names its runs."""
    if run_id is not None:
        return f"run {run_id}"
    if all_runs:
        return "every run summed (--all-runs: a task run twice counts twice)"
    return "per task the latest run's episodes"


def _show_per_suite(
    table: pa.Table,
    title: str,
    fmt: str,
    suites: dict[str | None, list[str]],
    created: dict[str, str],
    scope: str,
) -> None:
    """One table per suite (the suite column dropped), each followed by the runs it counts."""
    import numpy as np

    from crabray.results import render, to_rich_table
    from crabray.results._numpy import to_arrow
    from crabray.results.board.selection import describe_runs

    # A few rows: compared in Python (pyarrow.compute with a Python scalar imports pandas).
    row_suites = np.array(table.column("suite").to_pylist(), dtype=object)
    for suite, runs in suites.items():
        rows = table.filter(to_arrow(row_suites == suite)).drop_columns(["suite"])
        line = f"{scope}: {describe_runs(runs, created)}"
        if fmt == "table":
            # Cells are data, shown as written: no markup (the console strips controls).
            console.print(
                to_rich_table(
                    rows, title=safe_text(f"{title} · suite {suite}"), max_width=console.width
                ),
                markup=False,
            )
            console.print(safe_text(line), highlight=False)
            console.print()
        else:
            sys.stdout.write(plain_text(f"### {title} · suite {suite}\n\n{line}\n\n"))
            sys.stdout.write(plain_text(render(rows, "md")) + "\n")
    sys.stdout.flush()


def _created(root: ResultsRoot, runs: list[str]) -> dict[str, str]:
    """When each of ``runs`` was created (from its manifest), as text; runs without a
    readable manifest are left out (and a broken manifest is logged)."""
    from crabray.results import list_runs, read_manifest
    from crabray.results.store.runs import RunManifest

    manifests: dict[str, RunManifest] = {}
    with root.readable(whole=False) as folder:
        known = set(list_runs(folder))
        for run in runs:
            if run not in known:
                continue
            try:
                manifests[run] = read_manifest(folder, run)
            except CrabrayError as exc:  # the report still counts its episodes
                logger.warning("cannot say when run %s was created: %s", run, exc)
    return {run: f"{manifest.created_at:%Y-%m-%d %H:%M} UTC" for run, manifest in manifests.items()}


def _show(table: pd.DataFrame | pa.Table, title: str, fmt: str) -> None:
    """Print a leaderboard-like table in ``fmt`` (a terminal table, md, csv or json)."""
    from crabray.results import render, to_rich_table

    if fmt == "table":
        # As wide as the terminal (80 columns off one); data: no markup.
        rich_table = to_rich_table(table, title=safe_text(title), max_width=console.width)
        console.print(rich_table, markup=False)
    else:
        sys.stdout.write(plain_text(render(table, fmt)))  # type: ignore[arg-type]
        sys.stdout.flush()


def _write_site(
    folder: Path,
    site_dir: Path,
    run_id: str | None,
    title: str | None,
    description: str | None,
    *,
    all_runs: bool = False,
) -> None:
    from crabray.results.site import build_site

    index = build_site(
        folder, site_dir, run_id, title=title, description=description, all_runs=all_runs
    )
    errors.print(f"site written: {escape(str(index))}", highlight=False)


VIEW_EXAMPLES = """Examples:

  crabray view                                 # per task the latest run's episodes

  crabray view --run latest --port 0           # the newest run, on a free port

  crabray view path/to/results

  crabray view --title "Nightly sweep" --description "desktop tasks, three models"
"""


def view(
    root: RootArg = DEFAULT_ROOT,
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

    with root.readable(whole=True) as out:
        shown = shown_root(root, out)
        if not has_results(out):
            raise no_runs(root, "view")
        run_id = resolve_run_in(out, root, run_id, "view")
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
