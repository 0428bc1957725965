"""Where a run's files live under the output directory, and how they are committed.

Every file of the dataset is written to a dot-prefixed temporary name in its
final directory and then renamed with ``os.replace``, which is atomic on one
file system: a reader (or a crash) sees either the whole file or nothing.
Readers ignore dot-prefixed names, so leftovers of a killed writer are inert.

::

    OUT/episodes/run_id=<RUN>/part-<timestamp_ns>-<uuid8>.parquet
    OUT/steps/run_id=<RUN>/part-<timestamp_ns>-<uuid8>.parquet
    OUT/runs/<RUN>.json
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Literal

from crabray.core.errors import ResultsError

logger = logging.getLogger(__name__)

Table = Literal["episodes", "steps"]
TABLES: tuple[Table, ...] = ("episodes", "steps")
TMP_PREFIX = ".tmp-"
PART_SUFFIX = ".parquet"
IGNORED_PREFIXES = [".", "_"]

# A run id becomes a directory name and a hive partition value, so it must be
# a plain path component that readers do not ignore (no leading dot/underscore).
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` if it is usable as a directory name, else raise.

    Raises:
        ResultsError: The id is empty, too long, or has characters other than
            letters, digits, ``.``, ``_`` and ``-`` (or starts with ``.``/``_``/``-``).
    """
    if not _RUN_ID.match(run_id):
        raise ResultsError(
            f"run id {run_id!r} is not usable as a directory name: use 1-128 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit (crabray's own ids look like "
            "'20261123-075300-3fa2c1')"
        )
    return run_id


def table_root(out_dir: Path, table: Table) -> Path:
    """The directory holding every run's partition of ``table``."""
    return out_dir / table


def partition_dir(out_dir: Path, table: Table, run_id: str) -> Path:
    """The directory holding one run's part files of ``table``."""
    return table_root(out_dir, table) / f"run_id={check_run_id(run_id)}"


def runs_dir(out_dir: Path) -> Path:
    """The directory holding run manifests."""
    return out_dir / "runs"


def new_part_stem() -> str:
    """A file stem that sorts by creation time and never collides: ``part-<ns>-<uuid8>``."""
    return f"part-{time.time_ns()}-{uuid.uuid4().hex[:8]}"


def part_files(directory: Path) -> list[Path]:
    """The committed part files of one partition, oldest first (temporaries excluded)."""
    if not directory.is_dir():
        return []
    return sorted(
        path
        for path in directory.iterdir()
        if path.suffix == PART_SUFFIX
        and not path.name.startswith(tuple(IGNORED_PREFIXES))
        and path.is_file()
    )


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX only: Windows cannot open directories)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_output_dir(out_dir: Path, option: str = "--out") -> None:
    """Make sure results can be written under ``out_dir`` before anything is recorded.

    Creates the directory if needed and writes (then removes) a probe file, so a
    path that is a file, lies under a file, or is on a read-only file system is
    refused before a run opens, not after its sandboxes started.

    Raises:
        ResultsError: ``out_dir`` cannot hold results; the message says why.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise ResultsError(
            f"{option} {out_dir}: is a file, not a directory; give a directory "
            "(it is created if missing)"
        )
    probe = out_dir / f"{TMP_PREFIX}probe-{uuid.uuid4().hex[:8]}"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ResultsError(
            f"{option} {out_dir}: cannot write results there ({exc.strerror or exc}); "
            "give a writable directory"
        ) from exc


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` so that it appears whole or not at all, even if the process is killed.

    The content goes to ``.tmp-<name>`` beside ``path``, is fsynced, then renamed
    over ``path``; the directory is fsynced so the rename survives a power loss.

    Args:
        path: The final file name.
        write: Writes the whole content to the open binary file it is given.

    Raises:
        ResultsError: The file could not be written; the temporary file is removed.
    """
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except Exception as exc:
        if tmp.parent.is_dir():  # not when the directory itself could not be made
            tmp.unlink(missing_ok=True)
        raise ResultsError(f"could not write {path}: {type(exc).__name__}: {exc}") from exc
    logger.debug("committed %s", path)
