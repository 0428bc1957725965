"""How loaded the nodes of a cluster are: memory and CPU, read on each node.

Ray's public API reports what resources a node has and which are taken, not
how much memory its processes use (its out-of-memory killer reads that
inside the raylet). So a probe, a Ray task pinned to each node that hosts
sandboxes, reads the node's ``/proc`` (``adaptive.host_memory_used``,
``host_cpu_used``) and the driver collects the answers without waiting for
them: ``--concurrency auto`` reads the worst node of each host kind.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from crabray.cluster.runtime.placement import RESOURCE_PREFIX
from crabray.cluster.sweep.adaptive import host_cpu_used, host_memory_used

logger = logging.getLogger(__name__)

PROBE_EVERY_SEC = 5.0
"""How often each node is probed: memory grows over seconds, a probe costs a task."""


@ray.remote(num_cpus=0)
def _probe() -> tuple[float, float]:
    """This node's memory in use and CPU load (0-1 each)."""
    return host_memory_used(), host_cpu_used()


class NodeLoad:
    """The latest memory and CPU use of every alive node hosting sandboxes, by kind."""

    def __init__(self, every_sec: float = PROBE_EVERY_SEC) -> None:
        self.every_sec = every_sec
        self._kinds: dict[str, set[str]] = {}
        """Node id -> the sandbox kinds it hosts."""
        self._load: dict[str, tuple[float, float]] = {}
        self._probes: dict[Any, str] = {}
        self._last = -float("inf")

    def poll(self) -> None:
        """Take the probes that answered; send new ones when due (never blocks)."""
        if self._probes:
            ready, _ = ray.wait(list(self._probes), num_returns=len(self._probes), timeout=0)
            for ref in ready:
                node = self._probes.pop(ref)
                try:
                    self._load[node] = ray.get(ref)
                except Exception as exc:  # a node gone: its load no longer counts
                    logger.debug("probing node %s failed: %s", node[:8], exc)
                    self._load.pop(node, None)
        now = time.monotonic()
        if now - self._last < self.every_sec:
            return
        self._last = now
        self._kinds = {
            node["NodeID"]: {
                name.removeprefix(RESOURCE_PREFIX)
                for name in node.get("Resources", {})
                if name.startswith(RESOURCE_PREFIX)
            }
            for node in ray.nodes()
            if node.get("Alive")
        }
        probing = set(self._probes.values())
        for node, kinds in self._kinds.items():
            if kinds and node not in probing:
                where = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
                self._probes[_probe.options(scheduling_strategy=where).remote()] = node

    def worst(self, kind: str) -> tuple[float | None, float | None]:
        """The highest memory use and CPU load of the nodes hosting ``kind``; None: none read."""
        loads = [load for node, load in self._load.items() if kind in self._kinds.get(node, set())]
        if not loads:
            return None, None
        return max(memory for memory, _ in loads), max(cpu for _, cpu in loads)
