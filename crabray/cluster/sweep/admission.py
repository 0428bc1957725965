"""Which queued episodes start now: the queue, and the checks before a dispatch.

An episode is dispatched only when the pool can give it an environment of every
kind it needs without exceeding the cluster's slots (backpressure per kind), and
when every host kind it uses is below its level (``levels``). The queue is
scanned from its front for one free slot, at most ``_SCAN_LIMIT`` items, so a
kind that is blocked is skipped past without walking the whole queue.

Two kinds of episode need more than a free slot. One that needs more sandboxes
of a kind at once than the cluster ever had slots of it can never be placed:
it becomes a final ``env_error`` row (``never_fits``). One that needs several
sandboxes can be passed over for good, as single-sandbox episodes behind it
take each slot as it frees: once it has waited ``reserve_after_sec``, the slots
of its kinds are kept for it (``_keep_slots_for_overdue``).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any

from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.actors.pool import EnvironmentPool, SlotKey, slot_key
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.sweep.levels import Levels
from crabray.cluster.sweep.needs import SandboxNeeds
from crabray.core.words import counted

logger = logging.getLogger(__name__)

_SCAN_LIMIT = 64
"""Queued items looked at for one free slot: skip past blocked kinds, not the whole queue."""


class Admission:
    """The queue of episodes not started yet, and the decision to start one.

    Args:
        needs: The sandboxes of each task.
        levels: The bound on episodes in flight, overall and per host kind.
        pool: The environment pool (whether it can serve an episode now).
        reserve_after_sec: How long a multi-sandbox episode may be passed over
            before the slots of its kinds are kept for it.
    """

    def __init__(
        self,
        needs: SandboxNeeds,
        levels: Levels,
        pool: EnvironmentPool,
        reserve_after_sec: float,
    ) -> None:
        self.needs = needs
        self.levels = levels
        self.pool = pool
        self.reserve_after_sec = reserve_after_sec
        self.queue: deque[SweepItem] = deque()
        self.draining = False
        """Set by ``drain``: no episode starts any more."""
        self._passed_over: dict[int, float] = {}
        """When each waiting multi-sandbox episode (by ``id``) came within the scan's reach."""
        self._reserved: set[SlotKey] = set()
        """The kinds whose slots are kept for an episode passed over too long (``admit``)."""

    def extend(self, items: Iterable[SweepItem]) -> None:
        """Queue ``items`` behind those queued (each now needs its environments)."""
        for item in items:
            self.queue.append(item)
            self.needs.add_pending(item, +1)

    def push_front(self, item: SweepItem) -> None:
        """Queue ``item`` first: a retry that is due, or an episode that never ran."""
        self.queue.appendleft(item)
        self.needs.add_pending(item, +1)

    def drain(self) -> None:
        """Start no more episodes: the queued ones stay unrun (a resume runs them)."""
        self.draining = True
        for item in self.queue:
            self.needs.add_pending(item, -1)
        self.queue.clear()

    def admit(
        self,
        in_flight: dict[Any, InFlight],
        capacity: dict[SlotKey, int],
        peak: dict[SlotKey, int],
        start: Callable[[SweepItem], None],
        unplaceable: Callable[[SweepItem, str], None],
    ) -> None:
        """Start queued episodes while the levels and the pool allow.

        Args:
            in_flight: The episodes in flight; ``start`` adds to it.
            capacity: Slots of each kind the cluster has now.
            peak: The most slots of each kind it had during the run.
            start: Dispatches an episode taken off the queue.
            unplaceable: Records an episode that can never be placed, and why.
        """
        overdue = self._keep_slots_for_overdue()
        scanned = 0
        index = 0
        busy = self.levels.busy(in_flight)
        while index < len(self.queue) and len(in_flight) < self.levels.most_in_flight():
            if scanned >= _SCAN_LIMIT:
                break
            item = self.queue[index]
            kept_for_another = id(item) not in overdue and self.needs.keys_of(item) & self._reserved
            if not self.levels.below_level(item, busy):
                index += 1
                scanned += 1
            elif (unfit := self.never_fits(item, peak)) is not None:
                del self.queue[index]
                self.needs.add_pending(item, -1)
                unplaceable(item, unfit)
            elif not kept_for_another and self.pool.can_serve(
                self.needs.specs_of(item.task_id), capacity
            ):
                del self.queue[index]
                self.needs.add_pending(item, -1)
                start(item)
                self.levels.count(busy, item)
            else:
                index += 1
                scanned += 1

    def take_follower(self, spec: SandboxSpec) -> SweepItem | None:
        """Take off the queue the first single-sandbox episode near its front that runs
        on ``spec``'s configuration (to queue behind a running one on its actor); None
        if there is none, or if the slots of its kind are kept for an overdue episode."""
        if slot_key(spec) in self._reserved:
            return None
        for index, item in enumerate(itertools.islice(self.queue, _SCAN_LIMIT)):
            specs = self.needs.specs_of(item.task_id)
            if len(specs) == 1 and specs[0].pool_key == spec.pool_key:
                del self.queue[index]
                self.needs.add_pending(item, -1)
                return item
        return None

    def never_fits(self, item: SweepItem, peak: dict[SlotKey, int]) -> str | None:
        """Why ``item`` can never be placed: it needs more sandboxes of a kind at once than
        the cluster has ever had slots of it during this run (``peak``); None if it fits
        (or if the kind has no slot at all now: the host watch waits for a host of it)."""
        needed = Counter(slot_key(spec) for spec in self.needs.specs_of(item.task_id))
        for key, count in needed.items():
            slots = peak.get(key, 0)
            if 0 < slots < count:
                labels = f" with labels {dict(key[1])}" if key[1] else ""
                return (
                    f"task {item.task_id} needs {count} sandboxes of kind '{key[0]}'{labels} "
                    f"at once, and the cluster has {counted(slots, 'slot')} of it: it can never be "
                    f"placed. Give the cluster more slots of it (`crabray cluster start-head "
                    f"--hosts {key[0]}={count}`, or `start-worker`), then resume the run"
                )
        return None

    def _keep_slots_for_overdue(self) -> set[int]:
        """Keep the slots of the kinds of multi-sandbox episodes waiting ``reserve_after_sec``.

        Only an episode needing several sandboxes can be passed over for good: a
        single one takes any slot that frees, while several need slots free at once,
        and single-sandbox episodes behind it (and followers queued on its kinds'
        actors) would take each slot as it frees, until the queue runs dry. So
        once it has waited, nothing behind it that needs one of its kinds is
        dispatched, and no follower is queued on those kinds, until it is placed.
        Its wait counts from when it first came within the scan's reach, whether or
        not a scan ran (followers promoted on their actors keep the flight full).

        Returns:
            The ``id`` of each overdue episode, which alone may take the kept slots.
        """
        now = time.monotonic()
        self._reserved = set()
        overdue: set[int] = set()
        # Only the episodes within reach now are remembered: one dispatched, dropped or
        # pushed out of reach is forgotten, so no entry outlives its episode (whose ``id``
        # a new one could reuse).
        waited, self._passed_over = self._passed_over, {}
        for item in itertools.islice(self.queue, _SCAN_LIMIT):
            if len(self.needs.specs_of(item.task_id)) < 2:
                continue
            since = self._passed_over[id(item)] = waited.get(id(item), now)
            keys = self.needs.keys_of(item)
            if now - since >= self.reserve_after_sec and not keys & self._reserved:
                logger.debug("keeping the slots of %s for %s", keys, item.task_id)
                self._reserved |= keys
                overdue.add(id(item))
        return overdue
