"""Running a backend's preflight on every node that hosts its kind, as a small Ray task.

A sandbox runs on a node that hosts its kind, so that is where its
preflight (``Backend.preflight``: is ``bwrap`` usable, does the engine answer,
is the image there) must run: the driver's own host may have none of it. One
task per (node, distinct sandbox settings), all at once; each asks for no CPU
and is pinned to its node, like the orphan cleanup (``crabray.cluster.actors.cleanup``).
An episode's agent runs beside its (first) sandbox, so the model servers of the
run's LLM agents are asked from the same nodes (``model_servers_on_nodes``).
"""

from __future__ import annotations

import logging
from typing import Any

import ray
from pydantic import BaseModel

from crabray.agents.reachable import unanswered_servers
from crabray.backends import backend_class
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.placement import describe_node, hosts_kind, pinned_to
from crabray.cluster.runtime.ray_runtime import remote_cause
from crabray.core.errors import CrabrayError

logger = logging.getLogger(__name__)


class NodeProblem(BaseModel):
    """A sandbox one node cannot start, and why."""

    spec: SandboxSpec
    node: str
    """The node's address (``<ip>/<node id prefix>``)."""
    error: str


def _preflight_here(backend: str, settings: dict[str, Any], env_name: str) -> str | None:
    """Run the backend's preflight in this process; the message of what failed, else None.

    A ``CrabrayError`` becomes its message (the node's answer); anything else
    is a bug and reaches the driver as it is.
    """
    try:
        backend_class(backend, env_name).preflight(settings, env_name)
    except CrabrayError as exc:
        return str(exc)
    return None


_preflight_task = ray.remote(num_cpus=0, max_retries=0)(_preflight_here)
_model_servers_task = ray.remote(num_cpus=0, max_retries=0)(unanswered_servers)


class ModelServerProblem(BaseModel):
    """A model server that does not answer one node, and why."""

    base_url: str
    node: str
    """The node's address (``<ip>/<node id prefix>``)."""
    error: str


def preflight_on_nodes(specs: list[SandboxSpec]) -> list[NodeProblem]:
    """Each spec's preflight on every alive node whose resources host its kind.

    A kind no node hosts is not checked here (``check_hostable`` refuses it).

    Returns:
        One problem per (node, spec) that failed.

    Raises:
        CrabrayError: A task could not run on its node (the node died meanwhile).
    """
    pending: list[tuple[Any, SandboxSpec, str]] = []
    for node in ray.nodes():
        for spec in specs:
            if not hosts_kind(node, spec.kind, spec.label_selector):
                continue
            ref = _preflight_task.options(scheduling_strategy=pinned_to(node)).remote(
                spec.backend, spec.backend_settings, spec.name
            )
            pending.append((ref, spec, describe_node(node)))
    answers = _answers([ref for ref, _, _ in pending])
    problems = [
        NodeProblem(spec=spec, node=node, error=error)
        for (_, spec, node), error in zip(pending, answers, strict=True)
        if error is not None
    ]
    logger.debug("preflight on %d node checks: %d problems", len(pending), len(problems))
    return problems


def model_servers_on_nodes(
    specs: list[SandboxSpec], base_urls: list[str]
) -> list[ModelServerProblem]:
    """Ask each of ``base_urls`` from every alive node that hosts a kind of ``specs``
    (where the run's agents will run), one task per node, all at once.

    Returns:
        One problem per (node, server) that did not answer.

    Raises:
        CrabrayError: A task could not run on its node (the node died meanwhile).
    """
    if not base_urls:
        return []
    pending: list[tuple[Any, str]] = []
    for node in ray.nodes():
        if any(hosts_kind(node, spec.kind, spec.label_selector) for spec in specs):
            ref = _model_servers_task.options(scheduling_strategy=pinned_to(node)).remote(base_urls)
            pending.append((ref, describe_node(node)))
    answers: list[dict[str, str]] = _answers([ref for ref, _ in pending])
    return [
        ModelServerProblem(base_url=url, node=node, error=error)
        for (_, node), unanswered in zip(pending, answers, strict=True)
        for url, error in unanswered.items()
    ]


def _answers(refs: list[Any]) -> list[Any]:
    """What the preflight tasks returned, in order.

    Raises:
        CrabrayError: A task could not run on its node (the node died meanwhile).
    """
    try:
        return list(ray.get(refs))
    except ray.exceptions.RayError as exc:
        cause = remote_cause(exc)
        raise CrabrayError(
            "the preflight of the nodes failed before the run started: "
            f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"
        ) from exc
