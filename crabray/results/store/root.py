"""A results root as the user gave it: a local directory, or the URI of a store.

Every command takes a results root (``--out``, a leaderboard's ``OUT``), as a
path or a URI. What it is (local or a store), how messages show it (without
keys), where a run writes it (locally, or through a staging folder) and where
a reader finds its files are decided here, once, from the text given. This
module imports nothing heavy: the command line parses its options with it
before any command has chosen to load pyarrow.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from crabray.core.errors import ResultsError
from crabray.results.store._uri import is_store, is_url, local_dir, shown_uri

if TYPE_CHECKING:
    import pyarrow.fs as pafs


@dataclass(frozen=True)
class ResultsRoot:
    """A results root: ``given`` as the user typed it, a path or a URI.

    Attributes:
        given: The root as given (a ``Path`` keeps no ``//`` of a URI, so this is text).
    """

    given: str

    @classmethod
    def parse(cls, value: str | Path | ResultsRoot) -> ResultsRoot:
        """The root named by ``value`` (itself when already parsed)."""
        return value if isinstance(value, ResultsRoot) else cls(str(value))

    @property
    def is_url(self) -> bool:
        """Given as a URL (``file://`` included)."""
        return is_url(self.given)

    @property
    def is_store(self) -> bool:
        """A store other than the local file system (``s3://``, ``gs://``, ``memory://``, ...)."""
        return is_store(self.given)

    @property
    def path(self) -> Path | None:
        """The local directory (a path, or a ``file://`` URL's); ``None`` for a store."""
        return local_dir(self.given)

    @property
    def shown(self) -> str:
        """How messages name the root: the path, or the URI without keys."""
        return shown_uri(self.given) if self.is_url else self.given

    @cached_property
    def _opened(self) -> tuple[pafs.FileSystem, str]:
        from crabray.results.store._fs import open_root

        return open_root(self.given)

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow file system readers list and open the root's files through (a
        local one for a path, pyarrow's own for the URIs it opens, fsspec's for others).

        Raises:
            ResultsError: The URL's scheme is unknown, or its driver is not installed.
        """
        return self._opened[0]

    def join(self, *parts: str) -> str:
        """A path under the root, on ``filesystem``."""
        return posixpath.join(self._opened[1], *parts)

    def subdirectories(self, directory: str) -> list[str]:
        """Directories directly under ``directory`` (hidden ones excluded); [] if absent."""
        from pyarrow.fs import FileType

        from crabray.results.store._fs import children

        return children(self.filesystem, directory, FileType.Directory, self.shown)

    def files(self, directory: str, suffix: str) -> list[str]:
        """Files ending in ``suffix`` directly under ``directory`` (hidden excluded), sorted."""
        from pyarrow.fs import FileType

        from crabray.results.store._fs import children

        found = children(self.filesystem, directory, FileType.File, self.shown)
        return [path for path in found if path.endswith(suffix)]

    def local(self) -> Path:
        """The local directory a writer needs.

        Raises:
            ResultsError: The root is a store: files are committed by atomic rename,
                which stores lack (a run stages a store's files: ``staged``).
        """
        if self.path is not None:
            return self.path
        scheme = urlparse(self.given).scheme
        raise ResultsError(
            f"cannot write results to {self.shown}: writing needs a local directory (or a "
            "file:// URL) because files are committed by atomic rename; copy the finished "
            f"output directory to {scheme}:// afterwards, and read it from there"
        )

    @contextmanager
    def readable(self, *, whole: bool) -> Iterator[Path]:
        """The root as a local folder: itself, or a temporary copy of the store it names.

        ``whole`` copies every run's files (the viewer and the site read them);
        else only the run manifests are copied (``runs list``).
        """
        if self.path is not None:
            yield self.path
            return
        from crabray.results.store.remote import store_copy

        with store_copy(self.given, whole=whole) as copy:
            yield copy

    @contextmanager
    def staged(self, resume: str | None = None) -> Iterator[Path]:
        """A local folder a run writes: the root itself, or a staging folder uploaded to the store.

        See ``crabray.results.store.remote.staged_output``.
        """
        if self.path is not None:
            yield self.path
            return
        from crabray.results.store.remote import staged_output

        with staged_output(self.given, resume) as staging:
            yield Path(staging)
