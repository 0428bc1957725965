"""Where a dataset is read from: a local directory, a URI pyarrow opens, or any fsspec URL.

Readers list and open files through a pyarrow ``FileSystem``. A plain path (or a
``file://`` URL) uses pyarrow's native local file system, the fastest; a URI
pyarrow opens itself (``s3://``, ``gs://``, ``hdfs://``, ...; endpoint and
credentials by pyarrow's rules) uses pyarrow's own file system; any other URL
(``memory://``, ...) goes through fsspec, wrapped for pyarrow with
``FSSpecHandler`` (its driver package must be installed). The sink writes
locally, its crash safety resting on atomic renames which object stores lack;
``crabray.results.store.remote`` uploads a staged run to a URI.
"""

from __future__ import annotations

import logging
import os
import posixpath
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Location:
    """A dataset root on some file system, with the listing readers need.

    Attributes:
        filesystem: The pyarrow file system holding the dataset.
        root: The dataset root as a path on ``filesystem`` (no trailing slash).
        shown: The location as the user gave it, for messages.
    """

    filesystem: pafs.FileSystem
    root: str
    shown: str

    def join(self, *parts: str) -> str:
        """A path under the root."""
        return posixpath.join(self.root, *parts)

    def _children(self, directory: str, kind: pafs.FileType) -> list[str]:
        selector = pafs.FileSelector(directory, allow_not_found=True, recursive=False)
        try:
            infos = self.filesystem.get_file_info(selector)
        except (OSError, ValueError) as exc:
            raise ResultsError(
                f"cannot list {directory} ({self.shown}): {type(exc).__name__}: {exc}"
            ) from exc
        return sorted(
            info.path.rstrip("/")
            for info in infos
            if info.type == kind and not info.base_name.startswith(_IGNORED_PREFIXES)
        )

    def subdirectories(self, directory: str) -> list[str]:
        """Directories directly under ``directory`` (hidden ones excluded); [] if absent."""
        return self._children(directory, pafs.FileType.Directory)

    def files(self, directory: str, suffix: str) -> list[str]:
        """Files ending in ``suffix`` directly under ``directory`` (hidden excluded), sorted."""
        return [
            path for path in self._children(directory, pafs.FileType.File) if path.endswith(suffix)
        ]

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists on the file system."""
        found: bool = self.filesystem.get_file_info(path).type != pafs.FileType.NotFound
        return found


def resolve(location: str | Path) -> Location:
    """The file system and root of a dataset location.

    Args:
        location: A local path, a ``file://`` URL, or any URL fsspec understands
            (``memory://results``, ``s3://bucket/results``).

    Raises:
        ResultsError: The URL's scheme is unknown to fsspec or its driver is not
            installed (the message says which package to install).
    """
    if not is_url(location):
        return Location(pafs.LocalFileSystem(), os.path.abspath(location), str(location))
    url = str(location)
    scheme = urlparse(url).scheme
    if scheme == "file":
        return Location(pafs.LocalFileSystem(), str(Path(local_dir(url) or url).absolute()), url)
    if scheme in PYARROW_SCHEMES:
        shown = shown_uri(url)
        try:
            filesystem, root = pafs.FileSystem.from_uri(url)
        except (pa.ArrowInvalid, OSError, ValueError) as exc:
            raise ResultsError(f"cannot open results at {shown}: {exc}") from exc
        return Location(filesystem, root.rstrip("/") or "/", shown)
    import fsspec  # deferred: only URLs need it

    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise ResultsError(f"cannot open results at {url}: {exc}") from exc
    filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    logger.debug("reading results from %s through fsspec (%s)", url, type(fs).__name__)
    return Location(filesystem, root.rstrip("/") or "/", url)
