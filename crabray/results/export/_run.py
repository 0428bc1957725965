"""``export_run``: a run read once and written in the format asked for."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, Field

from crabray.results.export._atif import write_atif
from crabray.results.export._formats import ExportFormat
from crabray.results.export._inspect import write_inspect
from crabray.results.export._jsonl import write_jsonl
from crabray.results.export._source import read_run


class ExportSummary(BaseModel):
    """What an export wrote."""

    format: ExportFormat
    run_id: str
    out: Path = Field(description="The folder (inspect, atif) or file (jsonl) written.")
    files: list[Path] = Field(description="Every file written, in the order written.")
    episodes: int = Field(description="Episodes exported.")
    logs: int = Field(description="Eval logs written (inspect; the others: 0).")


def export_run(root: Path, run_id: str, fmt: ExportFormat, out: Path) -> ExportSummary:
    """Export run ``run_id`` of the results root ``root`` to ``out`` in ``fmt``.

    Files of the same run are named the same each time, so exporting again
    replaces them; other files in ``out`` are left alone.

    Args:
        root: A local results root (``ResultsRoot.readable`` makes one of a store).
        run_id: The run's id ('latest' is resolved by the caller).
        fmt: The format.
        out: A folder for inspect and atif (made if missing), a file for jsonl.

    Raises:
        ResultsError: The run is not in ``root`` or has no episode yet, a part
            file is unreadable, or ``out`` cannot be written.

    Example:
        >>> export_run(Path("results"), "20261123-075300-3fa2c1", ExportFormat.JSONL,
        ...            Path("run.jsonl"))  # doctest: +SKIP
    """
    version = metadata.version("crabray")  # what crabray.__version__ reads; importing it loads Ray
    run = read_run(root, run_id)
    if fmt is ExportFormat.INSPECT:
        files = write_inspect(run, out, version)
    elif fmt is ExportFormat.ATIF:
        files = write_atif(run, out, version)
    else:
        files = write_jsonl(run, out)
    return ExportSummary(
        format=fmt,
        run_id=run_id,
        out=out,
        files=files,
        episodes=len(run.episodes),
        logs=len(files) if fmt is ExportFormat.INSPECT else 0,
    )
