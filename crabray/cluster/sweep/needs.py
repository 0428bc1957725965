"""What sandboxes each episode of the sweep needs, read once per task.

Every other part of the scheduler asks here: admission (can the pool serve an
episode now, does it need several sandboxes at once), the host watch (which slot
kinds the run needs, and the memory each takes with ``--concurrency auto``), the
level controller (which host kinds an episode uses). A task's environments are
read from its suite once, and the slot keys they need are kept as a set, so a
check once a second never walks every task of a long sweep.
"""

from __future__ import annotations

import logging
from collections import Counter

from crabray.cluster.actors.inflight import SweepItem
from crabray.cluster.actors.pool import SlotKey, slot_key
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.placement import sandbox_memory_mb
from crabray.formats import Suite

logger = logging.getLogger(__name__)


class SandboxNeeds:
    """The sandboxes of each task, and the environments the waiting episodes still need.

    Args:
        suite: The loaded suite (the driver's copy).
        memory: With ``--concurrency auto``: note the memory each slot key's sandboxes
            take (``memory_mb``), which the capacity counts.
    """

    def __init__(self, suite: Suite, *, memory: bool) -> None:
        self.suite = suite
        self.memory = memory
        self._specs: dict[str, list[SandboxSpec]] = {}
        self.slot_keys: set[SlotKey] = set()
        """``slot_key`` of every spec read so far: the capacity poll reads these, once a
        second, and must not walk every task of a long sweep to find them."""
        self.memory_mb: dict[SlotKey, int] = {}
        """With ``memory``: the most memory (MiB) a sandbox of each slot key takes as
        Ray's ``memory`` resource; the capacity counts what nodes' memory holds."""
        self.pending: Counter[str] = Counter()
        """Environments by pool key that queued and delayed items still need (the pool
        trims idle actors no waiting episode needs)."""

    def specs_of(self, task_id: str) -> list[SandboxSpec]:
        """The sandboxes ``task_id`` runs in, its host first."""
        if task_id not in self._specs:
            entry = self.suite.entry(task_id)
            envs = entry.benchmark.task_environments(entry.task)
            self._specs[task_id] = [SandboxSpec.of(env) for env in envs]
            self.slot_keys.update(slot_key(spec) for spec in self._specs[task_id])
            if self.memory:
                for spec in self._specs[task_id]:
                    need = sandbox_memory_mb(spec.backend, spec.backend_settings)
                    key = slot_key(spec)
                    self.memory_mb[key] = max(self.memory_mb.get(key, 0), need)
        return self._specs[task_id]

    def keys_of(self, item: SweepItem) -> set[SlotKey]:
        """The slot keys (kind, label selector) ``item`` takes a slot of."""
        return {slot_key(spec) for spec in self.specs_of(item.task_id)}

    def kinds_of(self, item: SweepItem) -> set[str]:
        """The host kinds ``item`` uses."""
        return {spec.kind for spec in self.specs_of(item.task_id)}

    def add_pending(self, item: SweepItem, sign: int) -> None:
        """``item`` starts (``sign`` +1) or stops (-1) waiting for its environments."""
        for spec in self.specs_of(item.task_id):
            self.pending[spec.pool_key] += sign
