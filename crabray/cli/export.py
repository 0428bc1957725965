"""``crabray export``: a run in the formats of the tools people already use."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from crabray.cli.options import DEFAULT_ROOT, root_argument, root_option
from crabray.cli.roots import resolve_run
from crabray.cli.terminal import console
from crabray.core.errors import CrabrayError
from crabray.results.export import ExportFormat
from crabray.results.store.root import ResultsRoot

EXPORT_EXAMPLES = """Examples:

  crabray export latest --format inspect          # then: inspect view --log-dir RUN_ID-inspect

  crabray export latest --format atif --out trajectories

  crabray export 20261123-075300-3fa2c1 path/to/results --format jsonl --out run.jsonl
"""


def export(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="The run to export: its id (crabray runs list shows them) or 'latest'.",
        ),
    ],
    fmt: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            "-f",
            help="inspect: Inspect AI eval logs (one per suite, agent and model) for "
            "`inspect view`; atif: Harbor's trajectories, one per episode; jsonl: one episode "
            "a line, for Hugging Face datasets.",
        ),
    ],
    root_arg: Annotated[
        ResultsRoot | None,
        root_argument(
            "The results root holding the run, a folder or a store URI (as "
            "`crabray leaderboard OUT`); default results/.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="PATH",
            help="Where to write: a folder for inspect and atif (RUN_ID-inspect, RUN_ID-atif "
            "by default), a file for jsonl (RUN_ID.jsonl; in a folder given, RUN_ID.jsonl "
            "there).",
        ),
    ] = None,
    source: Annotated[
        ResultsRoot | None,
        root_option(
            "--from",
            metavar="OUT",
            show_default=False,
            help="The results root, as `crabray runs fetch --from` names it: OUT's other spelling.",
        ),
    ] = None,
) -> None:
    """Write a run's episodes for another tool: Inspect AI's viewer, Harbor's trajectory
    tools, or Hugging Face datasets. Each has its steps, messages, scores and token usage;
    an episode that is the benchmark's or the infrastructure's error is marked so and not
    scored, as the leaderboard counts it."""
    from crabray.results.export import default_out, export_run

    if root_arg is not None and source is not None and root_arg != source:
        raise CrabrayError(
            f"OUT {root_arg.shown} and --from {source.shown} name two results roots; give one"
        )
    root = root_arg or source or DEFAULT_ROOT
    run_id = resolve_run(root, run_id, "export") or run_id
    target = _target(out if out is not None else default_out(run_id, fmt), run_id, fmt)
    with root.readable(whole=True) as folder:
        summary = export_run(folder, run_id, fmt, target)
    console.print(
        _said(summary.format, summary.episodes, summary.logs, target),
        highlight=False,
        soft_wrap=True,
    )


def _target(out: Path, run_id: str, fmt: ExportFormat) -> Path:
    """Where the export goes, refused before anything is read if it cannot be written there:
    a folder for inspect and atif, a file for jsonl (RUN_ID.jsonl in a folder given)."""
    from crabray.results.export import default_out

    if fmt is ExportFormat.JSONL:
        return out / default_out(run_id, fmt) if out.is_dir() else out
    if out.exists() and not out.is_dir():
        raise CrabrayError(
            f"--out {out}: is a file; --format {fmt.value} writes a folder of files, "
            "give a folder (it is made if missing)"
        )
    return out


def _said(fmt: ExportFormat, episodes: int, logs: int, target: Path) -> str:
    """What the export wrote and how to open it, in a line or two."""
    counted = f"{episodes} episode{'s' if episodes != 1 else ''}"
    where = escape(str(target))
    if fmt is ExportFormat.INSPECT:
        written = f"{logs} Inspect eval log{'s' if logs != 1 else ''} ({counted}) in {where}"
        return f"wrote {written}\nopen them with: inspect view --log-dir {where}"
    if fmt is ExportFormat.ATIF:
        return f"wrote {counted} as ATIF trajectories under {where} (<trial>/agent/trajectory.json)"
    return f"wrote {counted} to {where}, one a line: datasets.load_dataset('json', data_files=...)"
