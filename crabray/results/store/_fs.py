"""How a results root is read: a local directory, a URI pyarrow opens, or any fsspec URL.

``ResultsRoot`` lists and opens its files through a pyarrow ``FileSystem``,
opened here. A plain path (or a ``file://`` URL) uses pyarrow's native local
file system, the fastest; a URI pyarrow opens itself (``s3://``, ``gs://``,
``hdfs://``, ...; endpoint and credentials by pyarrow's rules) uses pyarrow's
own file system; any other URL (``memory://``, ...) goes through fsspec,
wrapped for pyarrow with ``FSSpecHandler`` (its driver package must be
installed). The sink writes locally, its crash safety resting on atomic
renames which object stores lack; ``crabray.results.store.remote`` uploads a
staged run to a URI.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from crabray.core.errors import ResultsError
from crabray.results.store._uri import is_url, local_dir, shown_uri

logger = logging.getLogger(__name__)

_IGNORED_PREFIXES = (".", "_")
PYARROW_SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")
"""URI schemes pyarrow's ``FileSystem.from_uri`` opens itself (other than ``file``)."""


def open_root(location: str | Path) -> tuple[pafs.FileSystem, str]:
    """The file system holding a results root, and the root as a path on it.

    Args:
        location: A local path, a ``file://`` URL, or any URL fsspec understands
            (``memory://results``, ``s3://bucket/results``).

    Raises:
        ResultsError: The URL's scheme is unknown to fsspec or its driver is not
            installed (the message says which package to install).
    """
    if not is_url(location):
        return pafs.LocalFileSystem(), os.path.abspath(location)
    url = str(location)
    scheme = urlparse(url).scheme
    if scheme == "file":
        return pafs.LocalFileSystem(), str(Path(local_dir(url) or url).absolute())
    if scheme in PYARROW_SCHEMES:
        try:
            filesystem, root = pafs.FileSystem.from_uri(url)
        except (pa.ArrowInvalid, OSError, ValueError) as exc:
            raise ResultsError(f"cannot open results at {shown_uri(url)}: {exc}") from exc
        return filesystem, root.rstrip("/") or "/"
    import fsspec  # deferred: only URLs need it

    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise ResultsError(f"cannot open results at {url}: {exc}") from exc
    logger.debug("reading results from %s through fsspec (%s)", url, type(fs).__name__)
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), root.rstrip("/") or "/"


def children(
    filesystem: pafs.FileSystem, directory: str, kind: pafs.FileType, shown: str
) -> list[str]:
    """The entries of ``kind`` directly under ``directory`` (hidden ones excluded), sorted;
    [] if it is absent. ``shown`` names the root in a message."""
    selector = pafs.FileSelector(directory, allow_not_found=True, recursive=False)
    try:
        infos = filesystem.get_file_info(selector)
    except (OSError, ValueError) as exc:
        raise ResultsError(
            f"cannot list {directory} ({shown}): {type(exc).__name__}: {exc}"
        ) from exc
    return sorted(
        info.path.rstrip("/")
        for info in infos
        if info.type == kind and not info.base_name.startswith(_IGNORED_PREFIXES)
    )
