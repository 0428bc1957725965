"""A run's files as one archive: how ``crabray runs fetch`` copies a run off a cluster's head.

A run lives under a results root in a few places: its manifest
(``runs/<RUN>.json``), one partition per table (``<table>/run_id=<RUN>/``) and
its artifacts (``<folder>/<RUN>/``, screenshots and handed-back files). The
archive holds exactly those, with paths relative to the root, so unpacking it
into another root gives that root the run as the first one had it.
"""

from __future__ import annotations

import io
import logging
import shutil
import tarfile
from pathlib import Path

from crabray.core.errors import ResultsError
from crabray.results.store._layout import check_run_id, runs_dir

logger = logging.getLogger(__name__)

_MANIFEST_SUFFIX = ".json"


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
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in run_paths(out_dir, run_id):
            archive.add(out_dir / path, arcname=path.as_posix())
    return buffer.getvalue()


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
