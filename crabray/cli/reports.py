"""``crabray leaderboard`` and ``crabray view``: what a results root says, in a table or pages."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from crabray.cli.options import DescriptionOpt, RunOpt, TitleOpt
from crabray.cli.roots import no_runs, readable_root, resolve_run, shown_root
from crabray.cli.terminal import console, errors
from crabray.core.errors import CrabrayError
from crabray.run.settings import DEFAULT_RESULTS

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


LEADERBOARD_EXAMPLES = """Examples:

  crabray leaderboard                          # every run under results/

  crabray leaderboard --run latest --format md

  crabray leaderboard --by tag

  crabray leaderboard --compare RUN_A RUN_B

  crabray leaderboard --html site              # a static site of every run

  crabray leaderboard s3://bucket/results --format csv
"""


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

    Only episodes attributed to the agent count: benchmark errors (failing setup,
    evaluator errors, no solution for the oracle) and infrastructure errors are
    counted apart in 'benchmark_errors' and 'infra_errors' and left out of every
    other number. With several epochs per task, pass@k and
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
    run_id = resolve_run(out, run_id, "leaderboard")
    if compare is not None:
        first, second = (resolve_run(out, run, "leaderboard") for run in compare)
        compare = (first or compare[0], second or compare[1])
        if compare[0] == compare[1]:
            raise CrabrayError(f"--compare needs two different runs, not {compare[0]} twice")
    print_leaderboard(out, run_id, fmt, by=by, per_suite=per_suite, compare=compare)
    if html is not None:
        with readable_root(out, whole=True) as root:
            _write_site(root, html, run_id, title, description)


def print_leaderboard(
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
    tables = [read_episode_table(out, run, columns, ordered=ordered) for run in runs]
    for run, rows in zip(runs, tables, strict=True):
        if rows.num_rows == 0 and run is None:
            raise no_runs(out, "leaderboard")
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


VIEW_EXAMPLES = """Examples:

  crabray view                                 # every run under results/

  crabray view --run latest --port 0           # the newest run, on a free port

  crabray view path/to/results

  crabray view --title "Nightly sweep" --description "desktop tasks, three models"
"""


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

    with readable_root(out_arg, whole=True) as out:
        shown = shown_root(out_arg, out)
        if not has_results(out):
            raise no_runs(shown, "view")
        run_id = resolve_run(out, run_id, "view")
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
