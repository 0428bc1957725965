"""Results written to an object store: a local staging folder, uploaded as its files land.

The sink commits every file by an atomic rename and fsyncs it (``_layout``);
an object store (``s3://``, ``gs://``, ...) has neither. So a run whose
``--out`` is such a URI writes into a local staging folder exactly as it
would write any results root, and an uploader copies each file the sink
commits to the URI soon after it appears (every ``UPLOAD_INTERVAL_SEC``), in
the order the files were committed, so an episode row never reaches the store
before the steps it implies. Files the sink deletes (the parts a compaction
merged) are deleted from the store after what replaced them is uploaded.
Leaving the run (at its end, on Ctrl-C, on SIGTERM, on a failure) uploads
what is left; only a process killed outright loses the files of its last
interval, which were never recorded in the store, so a resume runs them again.

``--resume`` first downloads the run's files from the URI into the staging
folder, so the run continues from what the store holds. The run manifests of
every run are downloaded too (they are small): a new run's ``--run-id`` is
checked against them.

Any URI ``pyarrow.fs.FileSystem.from_uri`` accepts works; credentials and
endpoint come from the writing process's environment by pyarrow's rules
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, ...)
or from the URI's query (``?endpoint_override=HOST:PORT&scheme=http``).
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from crabray.core.errors import ResultsError
from crabray.results.store._fs import PYARROW_SCHEMES
from crabray.results.store._layout import TMP_PREFIX, check_run_id
from crabray.results.store._uri import is_store, shown_uri

logger = logging.getLogger(__name__)

UPLOAD_INTERVAL_SEC = 0.5
"""How often the uploader looks for files the sink committed."""
_MANIFEST_SUFFIX = ".json"
_CHUNK = 1 << 20
_BUCKET_SCHEMES = ("s3", "gs", "gcs")
"""Schemes whose URI's first path component is a bucket."""


@dataclass(frozen=True)
class RemoteRoot:
    """A results root on a pyarrow file system: where a staged run is uploaded.

    Attributes:
        filesystem: The store.
        root: The results root as a path on ``filesystem`` (``bucket/prefix``).
        uri: The URI as the user gave it, keys removed (for messages).
    """

    filesystem: pafs.FileSystem
    root: str
    uri: str

    def path(self, relative: str) -> str:
        """The store path of a file given relative to the results root ("" for the root)."""
        return posixpath.join(self.root, relative) if relative else self.root


def check_uri(uri: str, option: str = "--out") -> None:
    """Refuse a URI no store could be: unknown scheme or no bucket; no network is used.

    Raises:
        ResultsError: The scheme is not one pyarrow writes, or the URI names no bucket.
    """
    parsed = urlparse(uri)
    if parsed.scheme not in PYARROW_SCHEMES:
        raise ResultsError(
            f"{option} {shown_uri(uri)}: pyarrow cannot write {parsed.scheme}:// URIs; give a "
            "directory, or an s3://, gs://, abfs:// or hdfs:// URI"
        )
    if not parsed.netloc:
        raise ResultsError(
            f"{option} {shown_uri(uri)}: the URI names no bucket ({parsed.scheme}://BUCKET/PREFIX)"
        )


def open_remote(uri: str, option: str = "--out") -> RemoteRoot:
    """The store of ``uri``, checked writable by writing and deleting a probe object.

    Raises:
        ResultsError: The URI is malformed, the store does not answer, the bucket does
            not exist, or the credentials do not allow writing; the message says which.
    """
    remote = _connect(uri, option)
    probe = remote.path(f"{TMP_PREFIX}probe-{uuid.uuid4().hex[:8]}")
    try:
        with remote.filesystem.open_output_stream(probe) as stream:
            stream.write(b"")
        remote.filesystem.delete_file(probe)
    except OSError as exc:
        raise ResultsError(f"{option} {remote.uri}: cannot write there: {exc}") from exc
    return remote


def _connect(uri: str, option: str) -> RemoteRoot:
    """The store of ``uri``, its bucket checked to exist (nothing written).

    Raises:
        ResultsError: The URI is malformed, the store does not answer or the bucket
            does not exist; the message says which.
    """
    check_uri(uri, option)
    try:
        filesystem, root = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        raise ResultsError(f"{option} {shown_uri(uri)}: not a usable URI: {exc}") from exc
    remote = RemoteRoot(filesystem, root.rstrip("/"), shown_uri(uri))
    if urlparse(uri).scheme in _BUCKET_SCHEMES:
        _check_bucket(remote, remote.root.split("/", 1)[0], option)
    return remote


def _check_bucket(remote: RemoteRoot, bucket: str, option: str) -> None:
    """Refuse a store that does not answer, or a bucket that does not exist.

    Raises:
        ResultsError: Which of the two, and the store's words.
    """
    try:
        found = remote.filesystem.get_file_info(bucket).type != pafs.FileType.NotFound
    except OSError as exc:
        raise ResultsError(
            f"{option} {remote.uri}: the store does not answer or refuses access: {exc}"
        ) from exc
    if not found:
        raise ResultsError(
            f"{option} {remote.uri}: bucket {bucket!r} does not exist; create it first "
            "(crabray does not create buckets)"
        )


@dataclass
class Uploader:
    """Mirrors a staging folder into a ``RemoteRoot``: new and changed files up, removed ones gone.

    ``synced`` maps each file known to be in the store (relative path) to the
    (size, mtime) its staged copy had when it was uploaded or downloaded.
    """

    staging: Path
    remote: RemoteRoot
    synced: dict[str, tuple[int, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def download(self, relative: str) -> None:
        """Copy a file or folder (relative to the root) from the store into the staging folder."""
        source = self.remote.path(relative)
        info = self.remote.filesystem.get_file_info(source)
        if info.type == pafs.FileType.Directory:
            selector = pafs.FileSelector(source, recursive=True)
            files = [i.path for i in self.remote.filesystem.get_file_info(selector) if i.is_file]
        elif info.type == pafs.FileType.File:
            files = [source]
        else:
            return
        for path in files:
            name = posixpath.relpath(path, self.remote.root)
            if any(part.startswith(".") for part in name.split("/")):
                continue
            target = self.staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with self.remote.filesystem.open_input_stream(path) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
            stat = target.stat()
            self.synced[name] = (stat.st_size, stat.st_mtime_ns)

    def sync(self) -> None:
        """Upload what changed in the staging folder, oldest first; then delete what it dropped.

        Raises:
            ResultsError: A file could not be uploaded or deleted (the store's reason).
        """
        with self._lock:
            present = self._staged()
            changed = [n for n, s in present.items() if self.synced.get(n) != s]
            # Commit order: artifacts, then steps, then the episode rows that imply them.
            changed.sort(key=lambda n: (present[n][1], n.startswith("episodes/")))
            for name in changed:
                self._upload(name, present[name])
            for name in sorted(set(self.synced) - set(present)):
                try:
                    self.remote.filesystem.delete_file(self.remote.path(name))
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise ResultsError(
                        f"cannot delete {name} from {self.remote.uri}: {exc}"
                    ) from exc
                del self.synced[name]

    def _staged(self) -> dict[str, tuple[int, int]]:
        """Every committed file under the staging folder: (size, mtime); temporaries skipped."""
        found: dict[str, tuple[int, int]] = {}
        for folder, dirs, files in os.walk(self.staging):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if name.startswith("."):
                    continue
                path = Path(folder, name)
                try:
                    stat = path.stat()
                except FileNotFoundError:  # deleted by a compaction since it was listed
                    continue
                found[path.relative_to(self.staging).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        return found

    def _upload(self, name: str, stat: tuple[int, int]) -> None:
        target = self.remote.path(name)
        try:
            with (
                open(self.staging / name, "rb") as src,
                self.remote.filesystem.open_output_stream(target) as dst,
            ):
                shutil.copyfileobj(src, dst, _CHUNK)
        except FileNotFoundError:
            return  # deleted since it was listed: nothing to keep
        except OSError as exc:
            raise ResultsError(f"cannot upload {name} to {self.remote.uri}: {exc}") from exc
        self.synced[name] = stat
        logger.debug("uploaded %s to %s", name, self.remote.uri)


def _pull(uploader: Uploader, resume: str | None) -> None:
    """Bring every run manifest, and the resumed run's files, from the store into staging.

    Raises:
        ResultsError: ``resume`` is no run of the store.
    """
    remote = uploader.remote
    uploader.download("runs")
    if resume is None:
        return
    check_run_id(resume)
    manifest = f"runs/{resume}{_MANIFEST_SUFFIX}"
    if manifest not in uploader.synced:
        raise ResultsError(f"--resume {resume}: no run {resume} in {remote.uri}")
    top = pafs.FileSelector(remote.root, allow_not_found=True)
    for info in remote.filesystem.get_file_info(top):
        if info.type != pafs.FileType.Directory or info.base_name in ("runs",):
            continue
        for name in (f"run_id={resume}", resume):
            uploader.download(f"{info.base_name}/{name}")


@contextmanager
def store_copy(uri: str, *, whole: bool, option: str = "OUT") -> Iterator[Path]:
    """A temporary local copy of the results root at ``uri``, for commands that read files.

    ``runs list`` needs only the run manifests; ``view`` and ``leaderboard --html``
    read every run's tables and artifacts (``whole``). The copy is a snapshot,
    made in the cache folder and removed when the body ends; nothing is written
    to the store.

    Raises:
        ResultsError: The URI is malformed, the store does not answer, the bucket
            does not exist, or a file could not be read (the store's reason).
    """
    remote = _connect(uri, option)
    copy = Path(tempfile.mkdtemp(prefix="store-copy-", dir=_cache_dir()))
    try:
        try:
            Uploader(copy, remote).download("" if whole else "runs")
        except OSError as exc:
            raise ResultsError(f"{option} {remote.uri}: cannot read the runs: {exc}") from exc
        logger.info(
            "copied %s from %s into %s", "the runs" if whole else "the manifests", remote.uri, copy
        )
        with _sigterm_interrupts():  # a viewer stopped by SIGTERM removes its copy too
            yield copy
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _cache_dir() -> Path:
    """crabray's folder in the user's cache (``XDG_CACHE_HOME``): staging and store copies."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crabray"
    cache.mkdir(parents=True, exist_ok=True)
    return cache


@contextmanager
def staged_output(out: str | Path, resume: str | None = None) -> Iterator[str | Path]:
    """A results root the sink can write: ``out`` itself, or a staging folder uploaded to it.

    For a URI, yields a fresh local staging folder holding what ``resume`` needs,
    uploads what lands in it while the body runs and everything left when the body
    ends, however it ends (SIGTERM included: it is turned into ``KeyboardInterrupt``
    meanwhile). The folder is removed once everything is uploaded, kept otherwise.

    Raises:
        ResultsError: The store cannot be written, ``resume`` is not in it, or the
            last upload failed (the message names the folder holding the run's files).
    """
    if not is_store(out):
        yield out
        return
    remote = open_remote(str(out))
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=_cache_dir()))
    uploader = Uploader(staging, remote)
    stop = threading.Event()
    thread = threading.Thread(target=_upload_loop, args=(uploader, stop), daemon=True)
    try:
        _pull(uploader, resume)
        logger.info("staging results in %s, uploaded to %s", staging, remote.uri)
        thread.start()
        with _sigterm_interrupts():
            yield staging
    except BaseException:
        _finish(thread, stop, uploader, failing=True)
        raise
    _finish(thread, stop, uploader, failing=False)


def _finish(
    thread: threading.Thread, stop: threading.Event, uploader: Uploader, failing: bool
) -> None:
    """Stop the uploader, upload what is left, remove the staging folder once all is up.

    Raises:
        ResultsError: The last upload failed and no other error is on its way out.
    """
    stop.set()
    if thread.is_alive():
        thread.join()
    try:
        uploader.sync()
    except ResultsError as exc:
        message = (
            f"{exc}; the run's files are kept in {uploader.staging}: copy them to "
            f"{uploader.remote.uri} (e.g. `aws s3 sync`) before resuming the run"
        )
        if failing:
            logger.error("%s", message)
            return
        raise ResultsError(message) from exc
    shutil.rmtree(uploader.staging, ignore_errors=True)


def _upload_loop(uploader: Uploader, stop: threading.Event) -> None:
    """Sync every ``UPLOAD_INTERVAL_SEC`` until stopped; a failure waits for the next round."""
    while not stop.wait(UPLOAD_INTERVAL_SEC):
        try:
            uploader.sync()
        except ResultsError as exc:
            logger.warning("upload failed, retrying: %s", exc)


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM (how Ray stops a job) into ``KeyboardInterrupt``, so the body's cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if callable(signal.getsignal(signal.SIGTERM)):
        yield  # the caller handles it already (crabray run: it stops the run cleanly)
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
