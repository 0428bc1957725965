"""A run's files as one archive: how ``crabray runs fetch`` copies a run off a cluster's head.

A run lives under a results root in a few places: its manifest
(``runs/<RUN>.json``), one partition per table (``<table>/run_id=<RUN>/``) and
its artifacts (``<folder>/<RUN>/``, screenshots and handed-back files). The
archive holds exactly those, with paths relative to the root, so unpacking it
into another root gives that root the run as the first one had it.

A copy made while the run goes on need not carry everything again: files are
written once, by an atomic rename, and never changed (a compaction writes new
ones and removes the old), so :func:`pack_changes` packs only the files
modified since the last copy began, with a :class:`RunListing` of every file
the run has; :func:`apply_changes` adds them and removes what the other side
no longer has, and names what is still missing, for a full copy to bring.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

from crabray.core.errors import ResultsError
from crabray.results.store._layout import check_run_id, runs_dir

logger = logging.getLogger(__name__)

_MANIFEST_SUFFIX = ".json"
_CLOCK_SLACK_SEC = 2.0
"""How far before the last copy's start a file's modification time may lie and it is
still packed again: a file written (then renamed into place) just as the last listing
ran may have been missed by it."""


class RunListing(BaseModel):
    """Every file of a run on the packing side, so the other side can mirror it exactly."""

    taken_at: float = Field(
        description="The packing side's clock when it began listing: the next copy's `since`."
    )
    files: dict[str, int] = Field(
        description="Each file's path relative to the results root, and its size in bytes."
    )


def run_paths(out_dir: Path, run_id: str) -> list[Path]:
    """The files and folders of one run under ``out_dir``, relative to it.

    Raises:
        ResultsError: ``out_dir`` holds no run ``run_id``.
    """
    check_run_id(run_id)
    manifest = runs_dir(out_dir) / f"{run_id}{_MANIFEST_SUFFIX}"
    if not manifest.is_file():
        raise ResultsError(f"no run {run_id} in {out_dir}")
    paths = [manifest.relative_to(out_dir)]
    for top in sorted(p for p in out_dir.iterdir() if p.is_dir() and p != runs_dir(out_dir)):
        for part in (top / f"run_id={run_id}", top / run_id):
            if part.is_dir():
                paths.append(part.relative_to(out_dir))
    return paths


def pack_run(out_dir: Path, run_id: str) -> bytes:
    """A gzipped tar of the run's files, paths relative to ``out_dir``.

    Raises:
        ResultsError: ``out_dir`` holds no run ``run_id``.
    """
    return pack_changes(out_dir, run_id, since=None)[1]


def pack_changes(out_dir: Path, run_id: str, since: float | None) -> tuple[RunListing, bytes]:
    """Every file of the run, and a gzipped tar of those modified since ``since``.

    ``since`` is the ``taken_at`` of the last copy's listing (``None``: every
    file). The manifest is always packed: it is rewritten in place as the run
    goes on.

    Raises:
        ResultsError: ``out_dir`` holds no run ``run_id``.
    """
    taken_at = time.time()
    files: dict[str, int] = {}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in _run_files(out_dir, run_id):
            try:
                stat = (out_dir / path).stat()
            except FileNotFoundError:
                continue  # compacted away while listing
            name = path.as_posix()
            files[name] = stat.st_size
            is_manifest = path.parent == runs_dir(out_dir).relative_to(out_dir)
            if since is None or is_manifest or stat.st_mtime >= since - _CLOCK_SLACK_SEC:
                _add(archive, out_dir / path, name)
    return RunListing(taken_at=taken_at, files=files), buffer.getvalue()


def _run_files(out_dir: Path, run_id: str) -> list[Path]:
    """The run's files (not folders) under ``out_dir``, relative to it."""
    found: list[Path] = []
    for path in run_paths(out_dir, run_id):
        full = out_dir / path
        if full.is_dir():
            found.extend(p.relative_to(out_dir) for p in sorted(full.rglob("*")) if p.is_file())
        else:
            found.append(path)
    return found


def _add(archive: tarfile.TarFile, path: Path, name: str) -> None:
    """Add one file; one that a compaction removed meanwhile is left out."""
    try:
        archive.add(path, arcname=name)
    except FileNotFoundError:
        logger.debug("%s went away while packing", path)


def unpack_run(data: bytes, out_dir: Path, run_id: str) -> None:
    """Replace the run ``run_id`` in ``out_dir`` by the one ``data`` (``pack_run``'s) holds.

    The run's files already in ``out_dir`` (an earlier fetch) are removed
    first, so files the other side compacted away do not linger as duplicates.

    Raises:
        ResultsError: ``data`` is no such archive, or a member would land outside
            ``out_dir`` or outside the run.
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            _check_members(archive.getmembers(), run_id)
            out_dir.mkdir(parents=True, exist_ok=True)
            if runs_dir(out_dir).joinpath(f"{run_id}{_MANIFEST_SUFFIX}").exists():
                for path in run_paths(out_dir, run_id):
                    _remove(out_dir / path)
            archive.extractall(out_dir, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise ResultsError(f"cannot unpack run {run_id} into {out_dir}: {exc}") from exc
    logger.debug("unpacked run %s into %s", run_id, out_dir)


def apply_changes(data: bytes, out_dir: Path, run_id: str, listing: RunListing) -> list[str]:
    """Bring the run in ``out_dir`` to ``listing``: add ``data``'s files, remove the others.

    Returns:
        The files of ``listing`` that ``out_dir`` still lacks, or holds at another
        size (packed by neither this copy nor an earlier one): a full copy brings them.

    Raises:
        ResultsError: ``data`` is no archive of the run, or cannot be unpacked.
    """
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            members = archive.getmembers()
            if members:
                _check_members(members, run_id)
            out_dir.mkdir(parents=True, exist_ok=True)
            _extract_atomically(archive, out_dir)
    except (tarfile.TarError, OSError) as exc:
        raise ResultsError(f"cannot unpack run {run_id} into {out_dir}: {exc}") from exc
    if not runs_dir(out_dir).joinpath(f"{run_id}{_MANIFEST_SUFFIX}").exists():
        return sorted(listing.files)
    for path in _run_files(out_dir, run_id):
        if path.as_posix() not in listing.files:
            (out_dir / path).unlink(missing_ok=True)
    return [
        name
        for name, size in sorted(listing.files.items())
        if not (out_dir / name).is_file() or (out_dir / name).stat().st_size != size
    ]


def _extract_atomically(archive: tarfile.TarFile, out_dir: Path) -> None:
    """Extract beside ``out_dir``'s files, then rename each into place.

    A reader of the root (``crabray view`` during the run) sees each file whole
    or not at all, never one half written.
    """
    with tempfile.TemporaryDirectory(prefix=".incoming-", dir=out_dir) as incoming:
        archive.extractall(incoming, filter="data")
        for member in archive.getmembers():
            if member.isfile():
                target = out_dir / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(Path(incoming, member.name), target)


def _check_members(members: list[tarfile.TarInfo], run_id: str) -> None:
    """Refuse an archive holding anything but the run's manifest, partitions and artifacts."""
    tops = {Path(m.name).parts[:2] for m in members if len(Path(m.name).parts) >= 2}
    allowed = {f"run_id={run_id}", run_id, f"{run_id}{_MANIFEST_SUFFIX}"}
    stray = sorted("/".join(t) for t in tops if t[1] not in allowed)
    if stray or not members:
        raise ResultsError(f"the archive of run {run_id} holds other files: {stray}")


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
