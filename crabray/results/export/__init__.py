"""A run in the formats other tools read: Inspect AI's eval logs, Harbor's ATIF, JSON Lines.

::

    inspect  OUT/<time>_<suite>-<agent>_<id>.json      one Inspect eval log per suite, agent
                                                       and model; a sample per episode
    atif     OUT/<task>__<agent>__<epoch>/agent/trajectory.json
                                                       one ATIF trajectory per episode
    jsonl    OUT (a file)                              one episode a line, with its steps
                                                       and messages

Every format is read from the same rows (``read_episode_table``: one per
episode, its latest attempt) and states the leaderboard's attribution: an
episode that is the benchmark's or the infrastructure's error is marked so,
and not scored. ``crabray export RUN --format FORMAT`` is the command;
``export_run`` the function behind it. Each module writes one format and
holds pydantic models of the records it writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crabray.core.lazy import lazy_getattr

if TYPE_CHECKING:
    from crabray.results.export._formats import ExportFormat, default_out
    from crabray.results.export._run import ExportSummary, export_run
    from crabray.results.export._source import RunExport, read_run

__all__ = ["ExportFormat", "ExportSummary", "RunExport", "default_out", "export_run", "read_run"]

_NAMES = {
    "ExportFormat": "crabray.results.export._formats",
    "default_out": "crabray.results.export._formats",
    "ExportSummary": "crabray.results.export._run",
    "export_run": "crabray.results.export._run",
    "RunExport": "crabray.results.export._source",
    "read_run": "crabray.results.export._source",
}
# Loaded on first use (PEP 562): the command line names the formats without loading pyarrow.
__getattr__ = lazy_getattr(__name__, _NAMES)
