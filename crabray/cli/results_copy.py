"""Copying a submitted run's results from the head to this machine, through small Ray jobs.

A machine that submitted a run is no node of the cluster and has no ssh to
it, so the run's files come back in the output of a job the head runs:
``crabray runs pack`` writes an archive of the run, framed and base64-encoded,
with a :class:`~crabray.results.RunListing` of every file the run has, and this
side checks the archive's digest and unpacks it. ``crabray runs fetch`` makes
one full copy; :class:`ResultsMirror` copies, every few seconds while a
followed run goes on, only the files written since its last copy, so the
results root here holds the episodes finished so far (``crabray view``,
``crabray leaderboard`` read it during the run).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
import shlex
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from crabray.core.errors import CrabrayError

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

    from crabray.results import RunListing

logger = logging.getLogger(__name__)

_PACK_BEGIN = "crabray-pack-begin"
_PACK_LISTING = "crabray-pack-listing"
_PACK_END = "crabray-pack-end"


def write_pack(out_dir: Path, run_id: str, since: float | None) -> None:
    """Write the run's files changed since ``since`` (all: ``None``) to stdout, framed.

    The frame is ``BEGIN DIGEST SIZE``, the archive in base64, the listing's JSON
    on one line, then ``END``: a job's log carries text only, and the digest tells
    a complete archive from one cut short.
    """
    from crabray.results import pack_changes

    listing, data = pack_changes(out_dir, run_id, since)
    encoded = base64.encodebytes(data).decode("ascii")
    digest = hashlib.sha256(data).hexdigest()
    sys.stdout.write(
        f"{_PACK_BEGIN} {digest} {len(data)}\n{encoded}"
        f"{_PACK_LISTING} {listing.model_dump_json()}\n{_PACK_END}\n"
    )
    sys.stdout.flush()


def read_pack(logs: str, run_id: str) -> tuple[RunListing, bytes]:
    """The listing and the archive ``write_pack`` framed in a job's output, checked.

    Raises:
        CrabrayError: No complete, intact archive in the output.
    """
    from crabray.results import RunListing

    start = logs.find(_PACK_BEGIN)
    end = logs.find(_PACK_END, start)
    listed = logs.find(_PACK_LISTING, start)
    if start < 0 or end < 0 or not start < listed < end:
        raise CrabrayError(f"the head sent no archive of run {run_id}:\n{logs.strip()[-2000:]}")
    header, _, body = logs[start:listed].partition("\n")
    _, digest, _size = header.split()
    data = base64.decodebytes(body.encode("ascii"))
    if hashlib.sha256(data).hexdigest() != digest:
        raise CrabrayError(f"the archive of run {run_id} arrived damaged; fetch it again")
    listing_line = logs[listed + len(_PACK_LISTING) : end].strip()
    return RunListing.model_validate_json(listing_line), data


@dataclass(frozen=True)
class Copied:
    """What one copy brought: its archive's bytes, and the listing it brought the run to."""

    size: int
    listing: RunListing
    complete: bool
    """Whether the run here now holds every file of the listing, at its size."""


def copy_run(
    client: JobSubmissionClient, run_id: str, source: str, out: Path, since: float | None = None
) -> Copied:
    """Bring run ``run_id`` of the head's results root ``source`` into ``out``.

    ``source`` is the root as a shell word on the head (``remote_out``). With
    ``since`` (the last copy's ``listing.taken_at``), only the files written
    since travel, and the files the head no longer has are removed here.

    Raises:
        CrabrayError: The job that packs the run failed, or its output is not a run.
    """
    from crabray.cluster.runtime.submit import delete, job_output
    from crabray.results import apply_changes

    since_arg = "" if since is None else f" --since {since!r}"
    try:
        job_id = client.submit_job(
            entrypoint=f"crabray runs pack {shlex.quote(run_id)} --from {source}{since_arg}",
            submission_id=f"crabray-fetch-{run_id}-{secrets.token_hex(3)}",
        )
        try:
            logs = job_output(client, job_id)
        finally:
            delete(client, job_id)
    except CrabrayError:
        raise
    except Exception as exc:  # Ray's job client raises RuntimeError, requests' errors
        raise CrabrayError(f"the head did not run the copy of run {run_id}: {exc}") from exc
    listing, data = read_pack(logs, run_id)
    missing = apply_changes(data, out, run_id, listing)
    if missing:
        logger.debug("copy of run %s lacks %d files, e.g. %s", run_id, len(missing), missing[0])
    return Copied(size=len(data), listing=listing, complete=not missing)


class ResultsMirror:
    """Keeps the results root here a copy of a submitted run's, while the run goes on.

    A thread copies what changed every ``every_sec`` seconds; a copy that
    failed (the run has not written its manifest yet, the head was busy) is
    tried again at the next turn, and a copy that left files missing makes
    the next one full. ``finish`` makes the last copy once the run has ended.
    """

    def __init__(self, address: str, run_id: str, source: str, out: Path, every_sec: float) -> None:
        self._address, self._run_id, self._source, self._out = address, run_id, source, out
        self.every_sec = every_sec
        self._since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="results-mirror", daemon=True)
        self.copies = 0

    def start(self) -> None:
        """Begin copying in the background (nothing when ``every_sec`` is 0)."""
        if self.every_sec > 0:
            self._thread.start()

    def finish(self, client: JobSubmissionClient) -> Copied:
        """Stop the background copies and make the last one (what the run wrote since).

        Raises:
            CrabrayError: The last copy failed.
        """
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        copied = self._copy(client)
        if not copied.complete:  # an earlier copy missed files: bring everything
            self._since = None
            copied = self._copy(client)
        return copied

    def _loop(self) -> None:
        from crabray.cluster.runtime.submit import job_client

        try:
            client = job_client(self._address)  # its own: the follower polls with the other
        except CrabrayError as exc:  # the last copy, made by ``finish``, says what is wrong
            logger.warning("results are copied here only when the run ends: %s", exc)
            return
        while not self._stop.wait(self.every_sec):
            try:
                self._copy(client)
            except CrabrayError as exc:
                logger.debug("copying run %s here failed, trying again: %s", self._run_id, exc)

    def _copy(self, client: JobSubmissionClient) -> Copied:
        copied = copy_run(client, self._run_id, self._source, self._out, self._since)
        self._since = copied.listing.taken_at if copied.complete else None
        self.copies += 1
        return copied
