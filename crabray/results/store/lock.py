"""One writer per run: a lock file held for as long as a run writes its results.

Two processes writing one run (two ``--resume`` of it at once) would each run
every unfinished episode and write it twice. The run that writes holds an
exclusive ``flock`` on ``OUT/runs/.RUN.lock`` for its whole life; another
refuses at once, naming the process that holds it. The kernel drops the lock
when its process dies however it dies (SIGKILL included), so a stale file never
blocks a resume.

A results root in a store (``s3://...``) is written through a local staging
folder that is new for every process; its lock is taken in the machine's
temporary folder (``/tmp/crabray-locks-UID/``), keyed by the store's URI and
the run: it keeps two writers on one machine apart, not writers on two
machines (a store has no lock to take; resume a store's run from one machine
at a time).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from crabray.core.errors import ResultsError
from crabray.results.store._layout import check_run_id, runs_dir
from crabray.results.store._uri import shown_uri


def lock_path(out: str | Path, run_id: str) -> Path:
    """The lock file of ``run_id`` under the results root ``out`` (a folder or a store URI)."""
    check_run_id(run_id)
    if "://" in str(out):
        key = hashlib.sha256(shown_uri(str(out)).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"crabray-locks-{os.getuid()}" / key / f"{run_id}.lock"
    return runs_dir(Path(out)) / f".{run_id}.lock"


@contextlib.contextmanager
def run_lock(out: str | Path, run_id: str) -> Iterator[None]:
    """Hold ``run_id``'s lock while the body writes the run.

    Raises:
        ResultsError: Another process holds it (the message names that process and
            what to do), or the lock file cannot be made.
    """
    path = lock_path(out, run_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ResultsError(f"{path}: cannot make the run's lock file: {exc.strerror}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ResultsError(f"{path}: cannot lock the run: {exc.strerror}") from exc
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise ResultsError(
                f"run {run_id} is being written by another crabray process (pid {holder}, "
                f"lock {path}); two writers would run its episodes twice. Wait for it to "
                f"end or stop it (Ctrl-C, or kill {holder}), then resume the run"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def is_locked(out: str | Path, run_id: str) -> bool:
    """Whether a live process holds ``run_id``'s lock (it is running) under a local root."""
    path = lock_path(out, run_id)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
