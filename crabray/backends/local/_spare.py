"""A confined sandbox built ahead, in a thread, so that a reset only swaps it in.

Starting a bubblewrap holder takes tens of milliseconds of waiting on the
kernel (namespaces, mounts) and little CPU. A reset that builds it while the
actor waits bounds how many episodes an actor serves per second; built
during the episode before, it costs the reset nothing. The spare is a new
directory and a new holder, exactly what an in-place reset makes, so
isolation between episodes is the same: nothing of the used sandbox (files,
processes, IPC objects, keyrings of its user namespace) is reachable from
the spare, and the used one is removed in the same thread.

The threads live as long as the sandbox (until ``close``): ``bwrap
--die-with-parent`` ties a holder to the thread that started it (the
parent-death signal fires when that thread ends), so a holder built here
must never outlive its thread's pool, and the pool must not end while one
of its holders serves.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from crabray.backends.local._bwrap import Holder
from crabray.core.errors import SandboxError

logger = logging.getLogger(__name__)

Built = tuple[Path, Holder]
"""A spare sandbox: its root directory on the host and its running holder."""


SPARES = 2
"""Sandboxes built ahead at most, each in its own thread: building is mostly waiting, so
two builds overlap, and an actor's resets keep up with episodes shorter than a build."""


class SpareSandbox:
    """Up to ``SPARES`` sandboxes built ahead in background threads, taken oldest first.

    Args:
        build: Makes a new sandbox directory and starts its holder; removes the
            directory itself when the holder fails.
        remove: Removes a used sandbox directory (its holder already killed).
        label: Who it serves, for messages (the environment name).
    """

    def __init__(
        self, build: Callable[[], Built], remove: Callable[[Path], None], label: str
    ) -> None:
        self._build = build
        self._remove = remove
        self._label = label
        self._pool: ThreadPoolExecutor | None = None
        self._next: deque[Future[Built]] = deque()

    def order(self, used: Path | None) -> None:
        """Build spares up to ``SPARES``; the first removes the used directory ``used`` first."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(SPARES, thread_name_prefix=f"crabray-{self._label}")
        self._next.append(self._pool.submit(self._make, used))
        while len(self._next) < SPARES:
            self._next.append(self._pool.submit(self._make, None))

    def take(self) -> Built | None:
        """The oldest spare, once built; None if none was ordered or building it failed
        (logged: the caller then builds one in place, and fails with the reason if that
        fails too)."""
        if not self._next:
            return None
        future = self._next.popleft()
        try:
            return future.result()
        except (SandboxError, OSError) as exc:
            logger.warning("building a spare sandbox of '%s' failed: %s", self._label, exc)
            return None

    def close(self) -> None:
        """Wait for the spares being built, then kill their holders and remove their directories."""
        while self._next:
            built = self.take()
            if built is not None:
                root, holder = built
                holder.kill()
                self._discard(root)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _make(self, used: Path | None) -> Built:
        if used is not None:
            self._discard(used)
        return self._build()

    def _discard(self, root: Path) -> None:
        try:
            self._remove(root)
        except OSError as exc:
            logger.warning("could not remove local sandbox %s: %s", root, exc)
