"""Removing sandboxes that dead actors or drivers left behind, on every node.

Before a sweep starts, one small task runs on each node that hosts a kind the
sweep needs and asks that kind's backend to remove the abandoned sandboxes it
finds there (see ``Backend.cleanup_orphans``). On a local instance the driver
started, the only node is this host, so the driver cleans up itself: a Ray
task would first have to start a worker process, which is most of the cost
of a one-task run's start.
"""

from __future__ import annotations

import logging
from typing import Any

import ray

from crabray.backends import backend_class
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.placement import describe_node, hosts_kind, pinned_to
from crabray.cluster.runtime.ray_runtime import remote_cause
from crabray.core.errors import CrabrayError

logger = logging.getLogger(__name__)


def _cleanup_here(backend: str, settings: dict[str, Any]) -> list[str]:
    return backend_class(backend).cleanup_orphans(settings)


_cleanup_task = ray.remote(num_cpus=0, max_retries=0)(_cleanup_here)


_EARLIER_RUN = "an earlier run that ended without cleaning up"
LOST_WORKER = "a worker of this run that was killed from outside"
_MAX_NAMED = 5
"""Removed sandboxes the warning names; the rest are counted."""


def cleanup_orphans(
    specs: list[SandboxSpec], *, here: bool = False, left_by: str = _EARLIER_RUN
) -> list[str]:
    """Remove abandoned sandboxes of ``specs``' kinds on every node that hosts them.

    Args:
        specs: The sandboxes a sweep will start; one cleanup per kind and settings.
        here: The cluster is a local instance on this host: clean up in this process.
        left_by: Who left what is found, for the warning (an earlier run, or a worker of
            this run killed from outside).

    Returns:
        What was removed, over all nodes, one description each (on a cluster, with
        its node).

    Raises:
        CrabrayError: A backend refused (a ``ConfigError`` or ``SandboxError`` from
            the node, such as an unknown SSH host key), unwrapped from Ray's error.
    """
    distinct = {(s.kind, s.backend, repr(sorted(s.backend_settings.items()))): s for s in specs}
    if here:
        removed = [
            what for s in distinct.values() for what in _cleanup_here(s.backend, s.backend_settings)
        ]
        _report(removed, left_by)
        return removed
    pending = [
        (
            _cleanup_task.options(scheduling_strategy=pinned_to(node)).remote(
                spec.backend, spec.backend_settings
            ),
            describe_node(node),
        )
        for node in ray.nodes()
        for spec in distinct.values()
        if hosts_kind(node, spec.kind)
    ]
    try:
        answers = ray.get([ref for ref, _ in pending])
    except ray.exceptions.RayError as exc:
        cause = remote_cause(exc)
        if isinstance(cause, CrabrayError):
            raise cause from None
        raise CrabrayError(
            f"checking the nodes for abandoned sandboxes failed before the run started: "
            f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"
        ) from exc
    removed = [
        f"{what} on node {node}"
        for (_, node), answer in zip(pending, answers, strict=True)
        for what in answer
    ]
    _report(removed, left_by)
    return removed


def _report(removed: list[str], left_by: str) -> None:
    """Say what was removed and why, as a sentence a user can read without the code."""
    if removed:
        noun = "sandbox" if len(removed) == 1 else "sandboxes"
        named = ", ".join(removed[:_MAX_NAMED])
        more = len(removed) - _MAX_NAMED
        logger.warning(
            "removed %d %s left by %s: %s%s",
            len(removed),
            noun,
            left_by,
            named,
            f" and {more} more" if more > 0 else "",
        )
