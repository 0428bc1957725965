"""Files in and out of a container as tar streams through the engine's archive API.

``put_file`` streams a one-file archive (header, the data in 1 MiB pieces,
padding), so the data is never copied whole; :func:`read_archive` (what
``get_file`` uses when the guest does not answer) reads the archive the engine
streams back with ``tarfile``'s stream mode.
"""

from __future__ import annotations

import posixpath
import tarfile
import time
from collections.abc import Iterator
from typing import Any

from docker.errors import APIError, NotFound

from crabray.backends.base import check_file_size
from crabray.backends.docker._engine import ENGINE_ERRORS
from crabray.core.errors import CrabrayError, SandboxError, SandboxFileError

MODE_DIR, MODE_SYMLINK = 1 << 31, 1 << 27
"""Go ``os.FileMode`` bits in the engine's path stat."""
MAX_SYMLINKS = 8
CHUNK = 1 << 20
_TAR_BLOCK = 512
_FILE_REQUEST_HINTS = (
    "no such file",
    "not a directory",
    "cannot overwrite",
    "is a directory",
    "marked read-only",  # read_only: a refusal for this path, not a broken engine
    "readlink ",  # the sandbox swapped a path component while the engine resolved it
    "file exists",  # ... or turned a directory on the path into a link as the engine made it
)


def tar_stream(name: str, data: bytes, owner: tuple[int, int] = (0, 0)) -> Iterator[bytes]:
    """A tar archive holding one file owned by ``owner`` (uid, gid), yielded in pieces so
    ``data`` is never copied whole."""
    info = tarfile.TarInfo(name)
    info.uid, info.gid = owner
    info.size = len(data)
    info.mode = 0o644
    info.mtime = int(time.time())
    yield info.tobuf(format=tarfile.PAX_FORMAT)
    view = memoryview(data)
    for offset in range(0, len(data), CHUNK):
        yield bytes(view[offset : offset + CHUNK])
    padding = -len(data) % _TAR_BLOCK
    yield b"\0" * (padding + 2 * _TAR_BLOCK)


class _ChunkReader:
    """A read-only file over an iterator of byte chunks, for ``tarfile`` stream mode."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = bytearray()

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        if size < 0:
            size = len(self._buffer)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data


def read_single_file(stream: Iterator[bytes], path: str, limit: int) -> bytes:
    """The one regular file of the archive the engine streams back for ``path``.

    Refused, before its bytes are read, when the archive's entry is over ``limit``.

    Raises:
        FileTooLargeError: The file is larger than ``limit``.
        SandboxFileError: It is not a regular file, or the archive is unreadable: the
            engine archives a file that changes meanwhile (the sandbox writing or
            swapping it) into a truncated stream, the caller's race, not the engine's.
    """
    archive: tarfile.TarFile
    try:
        # typeshed's tarfile wants a seekable, writable file object even in stream mode,
        # which only ever calls read(): the reader's missing methods are never used.
        with tarfile.open(fileobj=_ChunkReader(stream), mode="r|") as archive:  # type: ignore[call-overload]
            member = archive.next()
            if member is None or not member.isfile():
                raise SandboxFileError(f"cannot read '{path}': not a regular file")
            handle = archive.extractfile(member)
            if handle is None:
                raise SandboxFileError(f"cannot read '{path}': not a regular file")
            check_file_size(path, member.size, limit)
            return handle.read(limit + 1)
    except tarfile.TarError as exc:
        raise SandboxFileError(
            f"cannot read '{path}': it changed while it was read ({exc}); try again"
        ) from exc


def read_archive(api: Any, container_id: str, path: str, target: str, limit: int) -> bytes:
    """The bytes of ``target`` in the container, read as root through the archive API.

    Follows up to ``MAX_SYMLINKS`` symlinks of the last component (the engine resolves
    the ones above it inside the container's root).

    Raises:
        FileTooLargeError: The file is larger than ``limit``; nothing of it was read.
        SandboxFileError: ``path`` is missing, a directory or not a regular file.
        SandboxError: The engine failed.
    """
    for _ in range(MAX_SYMLINKS):
        try:
            stream, stat = api.get_archive(container_id, target, chunk_size=CHUNK)
        except ENGINE_ERRORS as exc:
            raise file_error("read", path, target, exc) from exc
        mode = int(stat.get("mode", 0))
        if mode & MODE_SYMLINK and stat.get("linkTarget"):
            stream.close()
            target = posixpath.join(posixpath.dirname(target), stat["linkTarget"])
            continue
        if mode & MODE_DIR:
            stream.close()
            raise SandboxFileError(f"cannot read '{path}': {target} is a directory, not a file")
        try:
            return read_single_file(stream, path, limit)
        except ENGINE_ERRORS as exc:
            raise file_error("read", path, target, exc) from exc
        finally:
            stream.close()
    raise SandboxFileError(f"cannot read '{path}': more than {MAX_SYMLINKS} symlinks deep")


def file_error(verb: str, path: str, target: str, exc: Exception) -> CrabrayError:
    """A bad request (missing path, directory in the way) or an engine failure."""
    text = str(exc).lower()
    if isinstance(exc, NotFound) and "no such container" not in text:
        return SandboxFileError(f"cannot {verb} '{path}': no such file in the container ({target})")
    if isinstance(exc, APIError) and any(hint in text for hint in _FILE_REQUEST_HINTS):
        return SandboxFileError(f"cannot {verb} '{path}' ({target}): {exc.explanation or exc}")
    return SandboxError(f"the engine failed to {verb} '{path}' ({target}): {exc}")
