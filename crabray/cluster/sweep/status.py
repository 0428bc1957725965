"""Run and node status of a crabray cluster, for ``crabray cluster status``.

A running sweep publishes its counts to a status board: a small detached
named actor (``run-status`` in Ray namespace ``crabray``) that keeps the
latest status of each run, so any process connected to the cluster can show
which runs are in progress or finished, during a run and after its driver
has gone. A run on the local instance it started itself publishes nothing
(``crabray.cluster.sweep.scheduler``): that instance ends with the run. Only
public Ray APIs are used: a named actor created on first use
(``get_if_exists``), reached with ``ray.get_actor``. Publishing is
fire-and-forget: the driver never waits for the board, and a board that is
gone costs the sweep nothing but its status line.

The board does not leak: it holds at most the ``MAX_RUNS`` most recently
published runs, takes no CPU slot and no sandbox slot, and lives as long as
the Ray cluster: it ends with a local instance when its driver exits, and
with a cluster when ``crabray cluster stop`` (or ``ray stop``) stops its
nodes. It restarts (empty, refilled by the next publish) if its node dies.

Node facts (kinds, slots, slots in use) come from Ray's own view of the
cluster.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict
from typing import Any

import ray
from pydantic import BaseModel, Field
from ray.exceptions import GetTimeoutError, RayActorError

from crabray.cluster.runtime.placement import RESOURCE_PREFIX
from crabray.cluster.sweep.progress import SweepProgress
from crabray.core.errors import CrabrayError

logger = logging.getLogger(__name__)

NAMESPACE = "crabray"
"""The Ray namespace of crabray's named actors."""
BOARD_NAME = "run-status"
"""The status board's actor name in ``NAMESPACE``."""
MAX_RUNS = 100
"""Runs the board remembers; the least recently published one goes first."""
_READ_TIMEOUT_SEC = 30.0
_FINAL_PUBLISH_TIMEOUT_SEC = 10.0


class RunStatus(BaseModel):
    """What a sweep last published about itself."""

    run_id: str
    total: int
    done: int
    successes: int
    in_flight: int
    retries: int
    infra_failures: int

    @classmethod
    def of(cls, run_id: str, progress: SweepProgress) -> RunStatus:
        """The status of run ``run_id`` from the scheduler's counts."""
        counts = {k: v for k, v in asdict(progress).items() if k != "timeouts"}
        return cls(run_id=run_id, **counts)


class StatusBoard:
    """The latest status of each run (the body of the detached board actor)."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self.max_runs = max_runs
        self.runs: dict[str, RunStatus] = {}
        """By run id, least recently published first."""

    def put(self, status: RunStatus) -> None:
        """Record a run's latest status; forget the stalest run past ``max_runs``."""
        self.runs.pop(status.run_id, None)
        self.runs[status.run_id] = status
        while len(self.runs) > self.max_runs:
            del self.runs[next(iter(self.runs))]

    def statuses(self) -> list[RunStatus]:
        """Every remembered run, by run id."""
        return sorted(self.runs.values(), key=lambda status: status.run_id)


_RemoteStatusBoard = ray.remote(StatusBoard)


class StatusPublisher:
    """Publishes one run's status to the board: best effort, without waiting for it.

    Looking up or creating the board takes Ray a round of calls (the class
    is exported on first use, the name registered; a tenth of a second or
    more), so it happens on a background thread while the sweep starts; the
    latest counts wait for it and are sent as soon as the board is there.
    Later publishes cost one actor call submitted and not awaited. Only the
    last publish of a run waits for the board to take it: a driver that exits
    right after would otherwise drop a call still on its way.

    Args:
        run_id: The run whose status this publisher reports.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._lock = threading.Lock()
        self._board: Any = None
        self._pending: RunStatus | None = None
        self._connecting: threading.Thread | None = None

    def publish(self, progress: SweepProgress, *, final: bool = False) -> None:
        """Send the run's current counts (a failure is logged, the sweep goes on).

        Args:
            progress: The scheduler's counts.
            final: The run is over: wait (briefly) until the board has the counts.
        """
        status = RunStatus.of(self.run_id, progress)
        with self._lock:
            board, connecting = self._board, self._connecting
            if board is None:
                self._pending = status
                if connecting is None:
                    connecting = self._connecting = threading.Thread(
                        target=self._connect, name=f"crabray-status-{self.run_id}", daemon=True
                    )
                    connecting.start()
        if board is None:
            if not final or connecting is None:
                return
            connecting.join(_FINAL_PUBLISH_TIMEOUT_SEC)
            board = self._board
            if board is None:
                logger.warning("could not publish the status of run %s", self.run_id)
                return
        try:
            ref = board.put.remote(status)
            if final:
                ray.get(ref, timeout=_FINAL_PUBLISH_TIMEOUT_SEC)
        except Exception as exc:
            logger.warning("could not publish the status of run %s: %s", self.run_id, exc)

    def _connect(self) -> None:
        """Find or create the board, then send the counts published meanwhile."""
        try:
            board: Any = _RemoteStatusBoard.options(
                name=BOARD_NAME,
                namespace=NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                num_cpus=0,
                max_restarts=-1,
            ).remote()
            with self._lock:
                self._board = board
                pending, self._pending = self._pending, None
            if pending is not None:
                board.put.remote(pending)
        except Exception as exc:
            logger.warning("no status board for run %s: %s", self.run_id, exc)


def run_statuses() -> list[RunStatus]:
    """Every run that published its status on the connected cluster (and is remembered).

    Raises:
        CrabrayError: The status board exists but did not answer.
    """
    try:
        board = ray.get_actor(BOARD_NAME, namespace=NAMESPACE)
    except ValueError:
        return []
    try:
        statuses: list[RunStatus] = ray.get(board.statuses.remote(), timeout=_READ_TIMEOUT_SEC)
    except (GetTimeoutError, RayActorError) as exc:
        raise CrabrayError(
            f"the cluster's run status board ({NAMESPACE}/{BOARD_NAME}) did not answer: {exc}; "
            "node facts are still shown by `ray status`"
        ) from exc
    return statuses


class NodeStatus(BaseModel):
    """One Ray node as crabray sees it."""

    node_id: str
    address: str
    alive: bool
    slots: dict[str, int] = Field(description="Kind -> slots the node hosts.")
    in_use: dict[str, int] = Field(description="Kind -> slots held by environment actors.")
    labels: dict[str, str] = Field(description="The node's crabray labels and operator labels.")


def node_statuses() -> list[NodeStatus]:
    """Every node of the connected cluster with its sandbox slots and their use."""
    # The one private Ray call left (tests/test_ray_public_api.py lists it): Ray
    # has no public per-node free resources without its dashboard (ray.util.state
    # needs it; crabray's nodes run without one); ray.available_resources() sums
    # the whole cluster.
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


__all__ = [
    "NodeStatus",
    "RunStatus",
    "StatusBoard",
    "StatusPublisher",
    "node_statuses",
    "run_statuses",
]
