"""The formats a run is exported to, and where each goes by default: light, for the CLI."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path


class ExportFormat(StrEnum):
    """A format a run is exported to."""

    INSPECT = "inspect"
    """Inspect AI eval logs: one per suite, agent and model, a sample per episode."""
    ATIF = "atif"
    """Harbor's Agent Trajectory Interchange Format: a trajectory per episode."""
    JSONL = "jsonl"
    """JSON Lines: an episode a line, with its steps and messages."""


def default_out(run_id: str, fmt: ExportFormat) -> Path:
    """Where an export goes when no place is given: beside the caller, named by its run."""
    return Path(f"{run_id}.jsonl") if fmt is ExportFormat.JSONL else Path(f"{run_id}-{fmt.value}")
