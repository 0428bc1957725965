"""How many episodes may be in flight, overall and per host kind.

With a fixed ``--concurrency N``, at most N, whatever kinds they use. With
``--concurrency auto``, a level per host kind that ``adaptive.LevelController``
raises and lowers: this module feeds it once a second what was seen of each kind
since its last look (start failures, setup times, episodes in flight, the
memory and CPU of the nodes hosting it, whether a model limiter of the run
queues calls) and reads its level before an episode is dispatched, so that one
kind at its level holds back only the episodes needing it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.actors.pool import SlotKey
from crabray.cluster.runtime.ray_runtime import is_local_instance
from crabray.cluster.sweep.adaptive import (
    KindObservation,
    LevelController,
    host_cpu_used,
    host_memory_used,
)
from crabray.cluster.sweep.needs import SandboxNeeds
from crabray.cluster.sweep.node_load import NodeLoad
from crabray.cluster.sweep.progress import SweepProgress
from crabray.core.result import EpisodeRecord

logger = logging.getLogger(__name__)


class Levels:
    """The bound on episodes in flight: a fixed number, or the controller's level per kind.

    Args:
        concurrency: The fixed concurrency, or None for ``--concurrency auto``.
        needs: The sandboxes of each task (which kinds an episode uses).
        models_queued: Whether the run's model limiters queue calls now (asked once per
            observation, with auto only): no level rises while one does.
    """

    def __init__(
        self,
        concurrency: int | None,
        needs: SandboxNeeds,
        models_queued: Callable[[], bool] | None = None,
    ) -> None:
        self.needs = needs
        self.models_queued = models_queued or (lambda: False)
        self.controller = LevelController() if concurrency is None else None
        """With ``--concurrency auto``: the level of each host kind (``adapt``)."""
        self._fixed = concurrency or 0
        """The fixed concurrency (0 with auto, where the controller decides)."""
        self._start_failures: Counter[str] = Counter()
        """Per host kind, infrastructure failures since the controller's last observation."""
        self._latencies: dict[str, list[float]] = {}
        """Per host kind, setup times of the episodes finished since then."""
        self._node_load = NodeLoad()
        """With auto on a cluster: each node's memory and CPU, probed on the node."""

    def most_in_flight(self) -> int:
        """Episodes in flight at most: the fixed concurrency, or the sum of the levels."""
        if self.controller is None:
            return self._fixed
        kinds = {key[0] for key in self.needs.slot_keys}
        return sum(self.controller.level(kind) for kind in kinds) or 1

    def busy(self, in_flight: dict[Any, InFlight]) -> Counter[str]:
        """Episodes in flight per host kind they use (an episode counts once per kind);
        empty with a fixed concurrency, which does not count by kind."""
        if self.controller is None:
            return Counter()
        return self._busy_kinds(in_flight)

    def count(self, busy: Counter[str], item: SweepItem) -> None:
        """``item`` was dispatched: it is busy in each kind it uses."""
        if self.controller is not None:
            busy.update(self.needs.kinds_of(item))

    def below_level(self, item: SweepItem, busy: Counter[str]) -> bool:
        """Whether every host kind ``item`` needs is below its level (always, fixed): a
        kind at its level holds back only the episodes that need it."""
        if self.controller is None:
            return True
        return all(busy[kind] < self.controller.level(kind) for kind in self.needs.kinds_of(item))

    def observe_finished(self, finished: list[tuple[InFlight, EpisodeRecord]]) -> None:
        """Note, per host kind, the start failures and setup times the controller reads."""
        if self.controller is None:
            return
        for flight, record in finished:
            result = record.result
            for kind in self.needs.kinds_of(flight.item):
                if result.termination_reason.is_infra:
                    self._start_failures[kind] += 1
                elif result.setup_time_sec:
                    self._latencies.setdefault(kind, []).append(result.setup_time_sec)

    def adapt(
        self,
        capacity: dict[SlotKey, int],
        in_flight: dict[Any, InFlight],
        progress: SweepProgress,
    ) -> None:
        """Give the controller what was seen of each host kind since its last look.

        Memory and CPU are this host's on a local instance; on a cluster, those of
        the worst node hosting the kind, as its probe last read them
        (``node_load.NodeLoad``). The model limiters are asked once for every kind: a
        model's queue holds every level (which kinds' episodes call which model is the
        agents' business, not the scheduler's).
        """
        if self.controller is None:
            return
        local = is_local_instance()
        if not local:
            self._node_load.poll()
        queued = self.models_queued()
        ceilings: Counter[str] = Counter()
        for key, slots in capacity.items():
            ceilings[key[0]] += slots
        busy = self._busy_kinds(in_flight)
        for kind, ceiling in ceilings.items():
            latencies = sorted(self._latencies.pop(kind, []))
            seen = KindObservation(
                ceiling=ceiling,
                in_flight=busy[kind],
                start_failures=self._start_failures.pop(kind, 0),
                start_latency_sec=latencies[len(latencies) // 2] if latencies else None,
                model_queued=queued,
                **self._load_of(kind, local),
            )
            before = self.controller.level(kind)
            level = self.controller.observe(kind, seen)
            if level != before:
                logger.info("concurrency auto: %s %d -> %d (%s)", kind, before, level, seen)
        progress.level = sum(self.controller.level(kind) for kind in ceilings)
        progress.held_by_models = queued
        progress.ceiling = sum(max(1, slots) for slots in ceilings.values())

    def _busy_kinds(self, in_flight: dict[Any, InFlight]) -> Counter[str]:
        return Counter(kind for f in in_flight.values() for kind in self.needs.kinds_of(f.item))

    def _load_of(self, kind: str, local: bool) -> dict[str, float | None]:
        """Memory and CPU use of the nodes hosting ``kind`` (``KindObservation`` fields)."""
        if local:
            return {"memory_used": host_memory_used(), "cpu_used": host_cpu_used()}
        memory, cpu = self._node_load.worst(kind)
        return {"memory_used": memory, "cpu_used": cpu}
