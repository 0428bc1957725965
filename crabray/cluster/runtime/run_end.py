"""The run's end on every node: what its episodes started on a host is stopped there.

A suite format may leave something running on the hosts where episodes ran:
a task folder's services, which an episode resets on its own node before it
starts. When the run ends, however it ends, the format's ``end_run`` runs in
the driver, for the driver's host, and, for a format that has something to
stop (``SuiteFormat.ends_runs``), as a small Ray task on every other alive
node that hosts the run's sandbox kinds. A local instance has no other node,
and a format with nothing to stop costs no task, so a one-task run on a
running head starts no worker process for its end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import ray

from crabray.cluster.runtime.placement import describe_node, hosts_kind, pinned_to
from crabray.cluster.runtime.ray_runtime import remote_cause
from crabray.core.errors import CrabrayError
from crabray.formats import SuiteRef
from crabray.formats.base import suite_format

logger = logging.getLogger(__name__)

END_TIMEOUT_SEC = 600.0
"""How long the driver waits for the other nodes' ends: a stop command has its own timeout,
and a node that answers nothing by then is named, not waited for."""


def _end_run_here(ref: SuiteRef) -> str | None:
    """The format's end of the run on this host; the message of what failed, else None."""
    try:
        suite_format(ref.format).end_run(ref)
    except CrabrayError as exc:
        return str(exc)
    return None


_end_run_task = ray.remote(num_cpus=0, max_retries=0)(_end_run_here)


def end_run_everywhere(ref: SuiteRef, kinds: Iterable[str]) -> None:
    """End the run of the suite at ``ref`` here and on every other node hosting ``kinds``.

    Every node is asked, and answers, before anything is raised.

    Raises:
        CrabrayError: Something could not be stopped; one clause per host, naming it.
    """
    problems = []
    try:
        pending = _start_on_other_nodes(ref, set(kinds))
    except ray.exceptions.RayError as exc:  # the cluster itself is gone: this host still ends
        pending = {}
        problems.append(
            f"the cluster's other nodes could not be asked ({type(exc).__name__}: "
            f"{_first_line(exc)}); what episodes started there may still run"
        )
    here = _end_run_here(ref)
    if here is not None:
        problems.append(here)
    if pending:
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=END_TIMEOUT_SEC)
        for task, node in pending.items():
            answer = _answer(task) if task in ready else f"no answer in {END_TIMEOUT_SEC:g} s"
            if answer is not None:
                problems.append(f"on node {node}: {answer}")
    if problems:
        raise CrabrayError("; ".join(problems))


def _start_on_other_nodes(ref: SuiteRef, kinds: set[str]) -> dict[Any, str]:
    """The end's task on each alive node but this one that hosts one of ``kinds``, by node."""
    if not suite_format(ref.format).ends_runs or not ray.is_initialized():
        return {}
    here = ray.get_runtime_context().get_node_id()
    pending = {}
    for node in ray.nodes():
        if node["NodeID"] != here and any(hosts_kind(node, kind) for kind in kinds):
            task = _end_run_task.options(scheduling_strategy=pinned_to(node)).remote(ref)
            pending[task] = describe_node(node)
    logger.debug("ending the run on %d other nodes", len(pending))
    return pending


def _answer(task: Any) -> str | None:
    """What a node's end said: None when all was stopped, else what failed there."""
    try:
        answer: str | None = ray.get(task)
    except ray.exceptions.RayError as exc:
        cause = remote_cause(exc)
        return f"its end did not run: {type(cause).__name__}: {_first_line(cause)}"
    return answer


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else ""
