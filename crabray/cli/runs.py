"""``crabray runs``: the runs of a results root, and runs submitted to a cluster's head."""

from __future__ import annotations

import typer

from crabray.cli.options import DEFAULT_ROOT, RootArg
from crabray.cli.roots import no_runs, shown_root
from crabray.cli.submit import fetch, follow_run, pack, stop_run
from crabray.cli.terminal import Column, console, fitted_table, safe_text

runs_app = typer.Typer(
    help="List the runs under a results root.",
    no_args_is_help=True,
    epilog="""Example:

  crabray runs list
""",
)


@runs_app.command(
    "list",
    epilog="""Examples:

  crabray runs list                            # the runs under results/

  crabray runs list path/to/results
""",
)
def runs_list(root: RootArg = DEFAULT_ROOT) -> None:
    """List the runs recorded in OUT (a folder or a store URI): suite, agents, episodes done
    of those planned, and state (running, finished, interrupted, failed)."""
    from crabray.results import finished_keys, list_runs, read_manifest, run_state

    rows = []
    with root.readable(whole=False) as out:
        tables = root.given if root.is_store else out  # a store's tables are read in place
        for run_id in list_runs(out):
            manifest = read_manifest(out, run_id)
            done = len(finished_keys(tables, run_id))
            rows.append((manifest, done, run_state(tables, manifest)))
    if not rows:
        raise no_runs(root, "runs list")
    shown = shown_root(root, out)
    cells = [
        [
            safe_text(m.run_id),
            safe_text(m.suite_name),
            safe_text(", ".join(m.agents)),
            f"{done}/{'?' if m.planned is None else m.planned}",
            "?" if state is None else state.value,
            f"{m.created_at:%Y-%m-%d %H:%M}",
        ]
        for m, done, state in rows
    ]
    console.print(fitted_table(f"runs in {safe_text(shown)}", _RUN_COLUMNS, cells, console.width))


_RUN_COLUMNS = (
    Column("run id", whole=True),
    Column("suite"),
    Column("agents"),
    Column("done", whole=True),
    Column("state", whole=True),
    # The first to go in a narrow terminal: a run's id starts with when it was created.
    Column("created", drop=1),
)
"""``runs list``'s columns."""


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
