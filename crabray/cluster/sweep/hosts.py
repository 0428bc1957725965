"""Watching the cluster's hosts: slots per kind, kinds that lost every host, placement.

The slots of each kind the run needs are read at most once a second
(``_CLUSTER_POLL_SEC``: each read is a call to Ray's GCS); with
``--concurrency auto`` a node counts only the sandboxes its memory holds. From
them the watch fails the run when a kind it still needs has had no host for
``host_wait_sec`` (finished episodes are on disk, so it can be resumed), fails
it at once when no node's memory holds one sandbox of a kind, and gives up the
episodes whose actors Ray has not placed within ``placement_timeout_sec``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.actors.pool import EnvironmentPool, SlotKey
from crabray.cluster.runtime.placement import capacity
from crabray.cluster.sweep.needs import SandboxNeeds
from crabray.cluster.sweep.settings import SchedulerSettings
from crabray.core.errors import ConfigError, CrabrayError
from crabray.core.words import counted

logger = logging.getLogger(__name__)

_CLUSTER_POLL_SEC = 1.0
"""How often the cluster's capacity is read and the run's status published (GCS calls)."""


class HostWatch:
    """The cluster's slots for the kinds the run needs, and what to do when they go.

    Args:
        needs: The sandboxes of each task (slot keys, memory per key).
        settings: ``host_wait_sec``, ``placement_timeout_sec`` and the run id.
        pool: The environment pool (whether an actor is placed).
        discard: Retires an actor of an episode given up.
    """

    def __init__(
        self,
        needs: SandboxNeeds,
        settings: SchedulerSettings,
        pool: EnvironmentPool,
        discard: Callable[[Any], None],
    ) -> None:
        self.needs = needs
        self.settings = settings
        self.pool = pool
        self.discard = discard
        self.capacity: dict[SlotKey, int] = {}
        """Slots of each kind the run needs, as last read."""
        self.peak: dict[SlotKey, int] = {}
        """The most slots of each kind the cluster had during the run (``never_fits``)."""
        self._starved_since: dict[SlotKey, float] = {}
        self._last_poll = -math.inf

    def poll(self, *, force: bool = False) -> bool:
        """Re-read slot capacity, at most once a second; whether it was read."""
        now = time.monotonic()
        if not force and now - self._last_poll < _CLUSTER_POLL_SEC:
            return False
        self._last_poll = now
        self.capacity = {
            key: capacity(key[0], dict(key[1]), self.needs.memory_mb.get(key, 0))
            for key in self.needs.slot_keys
        }
        for key, slots in self.capacity.items():
            self.peak[key] = max(self.peak.get(key, 0), slots)
        return True

    def check_hosts(
        self, waiting: Iterable[SweepItem], queued: int, in_flight: dict[Any, InFlight]
    ) -> None:
        """Fail the sweep when a kind it still needs has had no host for too long.

        Args:
            waiting: The episodes not started yet (queued, and retries in backoff).
            queued: How many episodes are queued (for the message).
            in_flight: The episodes in flight.

        Raises:
            CrabrayError: Naming the kind; finished episodes are on disk, so the
                run can be resumed once a node hosts it again.
        """
        starved = {key for key, slots in self.capacity.items() if slots == 0}
        for key in set(self._starved_since) - starved:
            del self._starved_since[key]
        if not starved:
            return
        needed = {key for item in waiting for key in self.needs.keys_of(item)}
        needed |= {key for flight in in_flight.values() for key in self.needs.keys_of(flight.item)}
        now = time.monotonic()
        for key in needed & starved:
            since = self._starved_since.setdefault(key, now)
            if now - since <= self.settings.host_wait_sec:
                continue
            self._abandon(key, in_flight)
            if not in_flight:
                labels = f" with labels {dict(key[1])}" if key[1] else ""
                raise CrabrayError(
                    f"no node hosts sandboxes of kind '{key[0]}'{labels} any more "
                    f"(waited {self.settings.host_wait_sec:g} s); {counted(queued, 'episode')} "
                    f"did not run. Add a node that hosts it, then resume the run with "
                    f"--resume {self.settings.run_id}"
                )

    def check_memory_fits(self) -> None:
        """Fail at once when a kind has slots but no node's memory holds one of its
        sandboxes (``--concurrency auto``: each takes its memory as Ray's resource).

        Raises:
            ConfigError: Naming the kind, the memory it takes and the setting to change.
        """
        for key, need in self.needs.memory_mb.items():
            if self.capacity.get(key) == 0 and capacity(key[0], dict(key[1])) > 0:
                raise ConfigError(
                    f"no node of the cluster has {need} MiB of Ray's memory resource for a "
                    f"sandbox of kind '{key[0]}' (its memory_mb, or its backend's default): "
                    f"lower the sandbox's memory_mb, add a node with more memory, or run with "
                    f"a fixed --concurrency N, which does not reserve memory",
                    field="memory_mb",
                )

    def check_placement(self, in_flight: dict[Any, InFlight]) -> None:
        """Give up episodes whose actors Ray has not placed within ``placement_timeout_sec``.

        The pool never plans more actors of a kind than the cluster has slots, but
        Ray may still hold a slot elsewhere (another run on the same cluster, an
        actor that has not exited yet). An episode that cannot start must not wait
        for good: its actors are killed and it comes back as an ``env_error`` row
        saying why (retried as any infrastructure failure).
        """
        now = time.monotonic()
        bound = self.settings.execution.placement_timeout_sec
        for flight in in_flight.values():
            if flight.placed or flight.unplaced is not None:
                continue
            unplaced = [
                name for name, (_, actor) in flight.actors.items() if not self.pool.placed(actor)
            ]
            if not unplaced:
                flight.placed = True
            elif now - flight.submitted > bound:
                flight.unplaced = (
                    f"the cluster did not place the environment actors of "
                    f"{', '.join(repr(n) for n in unplaced)} within {bound:g} s "
                    f"(placement_timeout_sec): their slots were held elsewhere (another run "
                    f"on this cluster, or actors that had not exited); "
                    f"`crabray cluster status` shows who holds them"
                )
                logger.warning("episode %s: %s", flight.item.task_id, flight.unplaced)
                for _, actor in flight.actors.values():
                    self.discard(actor)

    def _abandon(self, key: SlotKey, in_flight: dict[Any, InFlight]) -> None:
        """Kill the actors of in-flight episodes that need ``key``, which no node hosts.

        Their actors died with their node or wait for a placement that cannot
        happen, and Ray would hold such a call open for minutes: killed, each
        comes back at once as an ``env_error`` row, so the run can stop.
        """
        for flight in in_flight.values():
            if key in self.needs.keys_of(flight.item) and not flight.abandoned:
                logger.warning("episode %s lost its host; giving it up", flight.item.task_id)
                flight.abandoned = True
                for _, actor in flight.actors.values():
                    self.discard(actor)
