"""Run and node status of a crabray cluster, for ``crabray cluster status``.

A running sweep publishes its counts in Ray's key-value store (in the GCS,
namespace ``crabray``), so any process connected to the cluster can show
which runs are in progress. Node facts (kinds, slots, slots in use) come from
Ray's own view of the cluster.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict

import ray
from pydantic import BaseModel, Field
from ray.experimental import internal_kv

from crabray.cluster.placement import RESOURCE_PREFIX
from crabray.cluster.progress import SweepProgress

logger = logging.getLogger(__name__)

_NAMESPACE = "crabray"
_RUN_PREFIX = "run/"


class RunStatus(BaseModel):
    """What a sweep last published about itself."""

    run_id: str
    total: int
    done: int
    successes: int
    in_flight: int
    retries: int
    infra_failures: int


class NodeStatus(BaseModel):
    """One Ray node as crabray sees it."""

    node_id: str
    address: str
    alive: bool
    slots: dict[str, int] = Field(description="Kind -> slots the node hosts.")
    in_use: dict[str, int] = Field(description="Kind -> slots held by environment actors.")
    labels: dict[str, str] = Field(description="The node's crabray labels and operator labels.")


def publish_status(run_id: str, progress: SweepProgress) -> None:
    """Publish a sweep's counts (best effort: a failure is logged, the sweep goes on)."""
    counts = {k: v for k, v in asdict(progress).items() if k != "timeouts"}
    status = RunStatus(run_id=run_id, **counts)
    try:
        internal_kv._internal_kv_put(
            f"{_RUN_PREFIX}{run_id}", status.model_dump_json(), namespace=_NAMESPACE
        )
    except Exception as exc:
        logger.warning("could not publish the status of run %s: %s", run_id, exc)


def run_statuses() -> list[RunStatus]:
    """Every run that published its status on the connected cluster."""
    keys = internal_kv._internal_kv_list(_RUN_PREFIX, namespace=_NAMESPACE)
    statuses = []
    for key in sorted(keys):
        raw = internal_kv._internal_kv_get(key, namespace=_NAMESPACE)
        if raw is not None:
            statuses.append(RunStatus.model_validate(json.loads(raw)))
    return statuses


def node_statuses() -> list[NodeStatus]:
    """Every node of the connected cluster with its sandbox slots and their use."""
    available = ray.state.available_resources_per_node()
    nodes = []
    for node in ray.nodes():
        node_id = node["NodeID"]
        total = _kinds(node.get("Resources", {}))
        free = _kinds(available.get(node_id, {})) if node.get("Alive") else {}
        nodes.append(
            NodeStatus(
                node_id=node_id,
                address=node.get("NodeManagerAddress", "?"),
                alive=bool(node.get("Alive")),
                slots=total,
                in_use={kind: total[kind] - free.get(kind, 0) for kind in total},
                labels={
                    k: v
                    for k, v in (node.get("Labels") or {}).items()
                    if not k.startswith("ray.io/")
                },
            )
        )
    return nodes


def _kinds(resources: dict[str, float]) -> dict[str, int]:
    return {
        name.removeprefix(RESOURCE_PREFIX): int(amount)
        for name, amount in resources.items()
        if name.startswith(RESOURCE_PREFIX)
    }


__all__ = ["NodeStatus", "RunStatus", "node_statuses", "publish_status", "run_statuses"]
