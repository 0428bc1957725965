"""Run manifests: what a run was asked to do, so it can be listed, reported and resumed.

A manifest is a small JSON file, ``OUT/runs/<RUN>.json``, written atomically
when a run starts (and again when it is resumed and when it ends, with its
state). The episodes themselves live in the Parquet tables. Fields added later
have defaults: a manifest written before them still reads, and what needs them
(a resume without options) says which option to pass instead.
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, Field, ValidationError, field_validator

from crabray.core.errors import ResultsError
from crabray.core.result import utcnow
from crabray.results.store._layout import atomic_write, check_run_id, runs_dir, table_root

logger = logging.getLogger(__name__)

_MANIFEST_SUFFIX = ".json"
RUN_LOG_SUFFIX = ".log"


class RunState(StrEnum):
    """Where a run stands, as ``runs list`` shows it."""

    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"
    """Stopped by Ctrl-C or SIGTERM, or its process died: ``crabray run --resume`` it."""
    FAILED = "failed"
    """Ended by an error (its message was shown); resume it once the cause is fixed."""
    STOPPED = "stopped"
    """Stopped by its budget (``--max-cost-usd``, ``--max-tokens``) before every episode
    ran: resume it with a higher one."""


class RunManifest(BaseModel):
    """What a run executes: one suite, some agents, the options it was started with."""

    run_id: str = Field(description="Id of the run, e.g. '20261123-075300-3fa2c1'.")
    suite: str = Field(description="Path of the suite, as given on the command line.")
    suite_name: str = Field(description="Name of the suite.")
    suite_description: str = Field(
        default="", description="What the suite's benchmarks say they measure, if they say."
    )
    agents: list[str] = Field(description="Names of the agent configurations the run evaluates.")
    created_at: datetime = Field(
        default_factory=utcnow, description="When the run was first started (UTC)."
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Run options (epochs, limits, backend, ...) so a resume can reuse them.",
    )
    crabray_version: str = Field(description="Version of crabray that created the run.")
    agent_config: str | None = Field(
        default=None,
        description="The agents file (TOML, absolute path) defining the agents, if any; a "
        "resume reads it again.",
    )
    planned: int | None = Field(
        default=None, description="Episodes the run consists of (agents x tasks x epochs)."
    )
    state: RunState | None = Field(
        default=None,
        description="Where the run stands; None in manifests written before it was recorded.",
    )

    @field_validator("run_id")
    @classmethod
    def _usable_run_id(cls, value: str) -> str:
        try:
            return check_run_id(value)
        except ResultsError as exc:
            raise ValueError(str(exc)) from exc


def new_run_id() -> str:
    """A fresh run id: the UTC start time and 6 random hex digits, e.g. ``20261123-075300-3fa2c1``.

    Ids sort chronologically, and the random suffix keeps two runs started in
    the same second apart.
    """
    return f"{utcnow():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _manifest_path(out_dir: Path, run_id: str) -> Path:
    return runs_dir(out_dir) / f"{check_run_id(run_id)}{_MANIFEST_SUFFIX}"


def run_log_path(out_dir: str | Path, run_id: str) -> Path:
    """``OUT/runs/<RUN>.log``: what the run's driver logged at info level (``-v``), appended
    to by each resume of the run."""
    return runs_dir(Path(out_dir)) / f"{check_run_id(run_id)}{RUN_LOG_SUFFIX}"


def write_manifest(out_dir: str | Path, manifest: RunManifest) -> Path:
    """Write (or replace) a run's manifest atomically.

    Args:
        out_dir: The output directory.
        manifest: The manifest to store.

    Returns:
        The manifest's path.

    Raises:
        ResultsError: The file could not be written.
    """
    path = _manifest_path(Path(out_dir), manifest.run_id)
    content = manifest.model_dump_json(indent=2).encode()

    def write(handle: BinaryIO) -> None:
        handle.write(content)

    atomic_write(path, write)
    logger.debug("wrote manifest %s", path)
    return path


def list_runs(out_dir: str | Path) -> list[str]:
    """Ids of the runs with a manifest under ``out_dir``, oldest first (ids sort by time).

    Raises:
        ResultsError: ``out_dir`` is a file, not an output directory.
    """
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise ResultsError(f"{out_dir}: is a file, not a directory; give an output directory")
    directory = runs_dir(Path(out_dir))
    if not directory.is_dir():
        return []
    return sorted(
        path.stem
        for path in directory.iterdir()
        if path.suffix == _MANIFEST_SUFFIX and not path.name.startswith(".") and path.is_file()
    )


def latest_run(out_dir: str | Path) -> str | None:
    """The id of the most recently started run under ``out_dir`` (ids sort by time), if any."""
    runs = list_runs(out_dir)
    return runs[-1] if runs else None


def has_results(out_dir: str | Path) -> bool:
    """Whether ``out_dir`` holds any run: a manifest, or episodes written without one."""
    root = Path(out_dir)
    episodes = table_root(root, "episodes")
    return bool(list_runs(root)) or (episodes.is_dir() and any(episodes.iterdir()))


def nested_roots(out_dir: str | Path) -> list[Path]:
    """Folders directly under ``out_dir`` that are results roots themselves (hold runs).

    An older layout (and ``--out results/NAME``) puts a run's root one level
    down; commands that find nothing in ``out_dir`` name these so the user
    knows where the runs are.
    """
    root = Path(out_dir)
    if not root.is_dir():
        return []
    return sorted(child for child in root.iterdir() if child.is_dir() and list_runs(child))


def read_manifest(out_dir: str | Path, run_id: str) -> RunManifest:
    """The manifest of ``run_id``.

    Raises:
        ResultsError: There is no such run (the message lists the runs that exist),
            or its manifest is not a valid manifest (the message names the file).
    """
    path = _manifest_path(Path(out_dir), run_id)
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        runs = list_runs(out_dir)
        known = ", ".join(runs) if runs else "none"
        raise ResultsError(
            f"no run {run_id!r} in {out_dir} (no {path}); runs there: {known}"
        ) from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read run manifest: {exc}") from exc
    try:
        manifest = RunManifest.model_validate_json(content)
    except ValidationError as exc:
        raise ResultsError(f"{path}: not a valid run manifest: {exc}") from exc
    if manifest.run_id != run_id:
        raise ResultsError(
            f"{path}: manifest says run_id {manifest.run_id!r}, but the file is named for "
            f"{run_id!r}; rename the file or fix its run_id"
        )
    return manifest


def run_state(out_dir: str | Path, manifest: RunManifest) -> RunState | None:
    """Where ``manifest``'s run stands: its recorded state, unless the writer is gone.

    A run recorded as running whose lock nobody holds lost its process (killed,
    or the machine stopped): it is interrupted. Only a local root can tell (a
    store's lock is on the machine that writes it).
    """
    from crabray.results.store.lock import is_locked

    state = manifest.state
    local = "://" not in str(out_dir)
    if state is RunState.RUNNING and local and not is_locked(out_dir, manifest.run_id):
        return RunState.INTERRUPTED
    return state
