"""Containers die with their owner: a watchdog removes them when the owning process is gone.

A container outlives the process that made it (the engine keeps it), so a
driver or actor killed with -9 would leave its containers running until the
next run's orphan cleanup. As the VM backend does for QEMU, each owning
process starts one tiny ``sh`` loop, in a session of its own and detached
from its owner (Ray kills a dying worker's children), that polls the owner
once a second; when the owner is gone it runs this module, which
removes the containers and snapshot images labelled with that owner (and
checks first that the owner is really gone, not a recycled pid). A
container stops within ``STOP_WITHIN_SEC`` of its owner's death. The loop
costs a shell, not a Python interpreter, while the owner lives.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

from crabray.backends.ownership import owner_tag

logger = logging.getLogger(__name__)

STOP_WITHIN_SEC = 10.0
"""Documented bound: a dead owner's containers are gone this long after its death."""

_SECOND_SWEEP_SEC = 2.0
"""A create the owner had in flight when it died may land after the first sweep."""

_LOOP = (
    'while kill -0 "$1" 2>/dev/null; do sleep 1; done; '
    'exec "$2" -m crabray.backends.docker._watchdog "$3"'
)

_DETACH = '/bin/sh -c "$1" crabray-docker-watchdog "$2" "$3" "$4" </dev/null >/dev/null 2>&1 &'
"""Starts the loop in the background and exits: the loop is nobody's child, so Ray, which
kills the children of a worker that exits, does not take it along with its owner."""

_lock = threading.Lock()
_watching: int | None = None
"""The pid this process started a watchdog for (a forked child must start its own)."""


def watch_owner() -> None:
    """Start this process's watchdog, once; later calls do nothing."""
    global _watching
    pid = os.getpid()
    with _lock:
        if _watching == pid:
            return
        subprocess.run(
            ["/bin/sh", "-c", _DETACH, "detach", _LOOP, str(pid), sys.executable, owner_tag()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            check=True,
        )
        _watching = pid


def _sweep(owner: str) -> None:
    from crabray.backends.docker._engine import prune

    for removed in prune(everything=False, owner=owner):
        logger.info("watchdog removed %s", removed)


if __name__ == "__main__":
    _sweep(sys.argv[1])
    time.sleep(_SECOND_SWEEP_SEC)
    _sweep(sys.argv[1])
