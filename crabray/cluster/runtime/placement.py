"""Placement: which Ray nodes may host which sandboxes, and how many.

A node advertises each sandbox kind it hosts twice: a custom resource
``crabray_<kind>`` whose amount is its number of slots, and a label
``crabray-<kind>=yes`` (plus any labels the operator adds, such as an image
family). An environment actor asks for one slot of its kind and, if its
config says so, for nodes whose labels match a selector. Ray then never
places an actor on a node that does not host its kind and never puts more
environments of a kind on a node than it has slots.

Ray is imported only by the functions that ask the cluster, so that
``crabray.cluster.runtime.nodes`` can use the resource and label names before Ray is
imported (see ``token_auth.use_token_auth``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from crabray.backends import backend_class
from crabray.core.errors import ConfigError

if TYPE_CHECKING:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

logger = logging.getLogger(__name__)

RESOURCE_PREFIX = "crabray_"
LABEL_PREFIX = "crabray-"


def slot_resource(kind: str) -> str:
    """The custom resource that counts a node's slots for sandboxes of ``kind``."""
    return f"{RESOURCE_PREFIX}{kind}"


def kind_label(kind: str) -> str:
    """The node label that says a node hosts sandboxes of ``kind``."""
    return f"{LABEL_PREFIX}{kind}"


def node_resources(hosts: dict[str, int]) -> dict[str, float]:
    """The custom resources a node hosting ``hosts`` (kind -> slots) advertises."""
    return {slot_resource(kind): float(slots) for kind, slots in hosts.items()}


def node_labels(hosts: dict[str, int], extra: dict[str, str] | None = None) -> dict[str, str]:
    """The labels a node hosting ``hosts`` carries, with the operator's ``extra`` ones."""
    return {**{kind_label(kind): "yes" for kind in hosts}, **(extra or {})}


def sandbox_memory_mb(backend: str, settings: dict[str, Any]) -> int:
    """The memory (MiB) a sandbox of ``backend`` with ``settings`` asks Ray for.

    Its ``memory_mb`` setting when it sets one, else its backend's
    ``Backend.default_memory_mb``; none for a backend whose sandboxes live on
    another machine (``Backend.uses_node_memory``: ssh).
    """
    cls = backend_class(backend)
    limit = settings.get("memory_mb")
    if not cls.uses_node_memory:
        return 0
    if isinstance(limit, int) and limit > 0:
        return limit
    return cls.default_memory_mb


def actor_options(kind: str, label_selector: dict[str, str], memory_mb: int = 0) -> dict[str, Any]:
    """Ray options that pin an environment actor to a node hosting ``kind``.

    With ``memory_mb``, the actor also takes that much of Ray's ``memory``
    resource, so Ray never places more sandboxes on a node than its memory holds
    (``--concurrency auto``).
    """
    # SPREAD: sandboxes load every host that has slots, instead of filling one first.
    options: dict[str, Any] = {
        "resources": {slot_resource(kind): 1},
        "scheduling_strategy": "SPREAD",
    }
    if memory_mb > 0:
        options["memory"] = memory_mb * 1024 * 1024
    if label_selector:
        options["label_selector"] = dict(label_selector)
    return options


def hosts_kind(
    node: dict[str, Any], kind: str, label_selector: dict[str, str] | None = None
) -> bool:
    """Whether ``node`` (an entry of ``ray.nodes()``) is alive, has slots for ``kind``, and
    carries the labels ``label_selector`` asks for."""
    return (
        bool(node.get("Alive"))
        and node.get("Resources", {}).get(slot_resource(kind), 0) > 0
        and _matches(node.get("Labels") or {}, label_selector or {})
    )


def describe_node(node: dict[str, Any]) -> str:
    """A node of ``ray.nodes()`` as messages and result rows name it: ``<ip>/<id prefix>``."""
    return f"{node.get('NodeManagerAddress', '?')}/{node['NodeID'][:8]}"


def pinned_to(node: dict[str, Any]) -> NodeAffinitySchedulingStrategy:
    """A Ray scheduling strategy that runs a task on ``node`` and nowhere else."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)


def _matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def capacity(kind: str, label_selector: dict[str, str] | None = None, memory_mb: int = 0) -> int:
    """Slots of ``kind`` on the alive nodes whose labels match ``label_selector``.

    With ``memory_mb`` (a sandbox's, taken as Ray's ``memory`` resource), a node
    counts only the sandboxes its memory holds, if fewer than its slots.
    """
    import ray

    resource = slot_resource(kind)
    total = 0
    for node in ray.nodes():
        if node.get("Alive") and _matches(node.get("Labels") or {}, label_selector or {}):
            resources = node.get("Resources", {})
            slots = int(resources.get(resource, 0.0))
            if memory_mb > 0:
                slots = min(slots, int(resources.get("memory", 0.0) // (memory_mb * 1024 * 1024)))
            total += slots
    return total


def hosted_kinds() -> dict[str, int]:
    """Every sandbox kind the alive nodes host, with its total slots."""
    import ray

    kinds: dict[str, int] = {}
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        for resource, amount in node.get("Resources", {}).items():
            if resource.startswith(RESOURCE_PREFIX):
                kind = resource.removeprefix(RESOURCE_PREFIX)
                kinds[kind] = kinds.get(kind, 0) + int(amount)
    return kinds


def check_hostable(needs: Iterable[tuple[str, tuple[tuple[str, str], ...]]]) -> None:
    """Fail fast when no alive node can host a needed (kind, label selector).

    Raises:
        ConfigError: Naming every kind (and selector) no node hosts, what the
            cluster does host, and how to add a node that hosts it.
    """
    missing = []
    for kind, selector in sorted(set(needs)):
        if capacity(kind, dict(selector)) == 0:
            labels = f" with labels {dict(selector)}" if selector else ""
            missing.append(f"'{kind}'{labels}")
    if missing:
        hosted = ", ".join(f"{k}={n}" for k, n in sorted(hosted_kinds().items())) or "nothing"
        raise ConfigError(
            f"no node of the Ray cluster hosts sandboxes of kind {', '.join(missing)} "
            f"(the cluster hosts: {hosted}); add one with "
            f"`crabray cluster start-worker --hosts KIND=SLOTS`",
            field="host_kind",
        )
