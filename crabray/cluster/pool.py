"""Pools of environment actors, one per sandbox configuration.

After an episode its actors are reset right away (``recycle``, off the
critical path) and go back to the idle set of their configuration, so the
next episode that needs the same configuration starts on a clean, warm
sandbox. An episode is bound to an actor only once that actor's reset has
finished (late binding: it never queues behind a reset on one actor while
another is ready); while every idle actor of its configuration is still
resetting, the pool grows into a free slot of the kind if there is one (up
to ``max_actors``; resets then overlap episodes instead of delaying them),
else the episode waits in the driver for the first reset to finish (``in_progress`` wakes it). A
reset that fails retires the actor; a broken actor is never handed out
again. The pool never holds more actors of a host kind than the cluster
has slots of it: when a configuration needs a slot that idle actors of
another configuration hold, one of those is retired (otherwise idle actors
could hold every slot and starve the rest of the sweep). Idle actors of a
configuration nothing needs any more are retired as the queue drains.

Unpooled, an actor's used sandbox is closed and a new one started in its
place (``renew``) instead of reset: every episode still gets a sandbox no one
used, but the actor's process (a Ray worker, with crabray imported) is kept.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import ray

from crabray.cluster.actors import RemoteEnvironmentActor
from crabray.cluster.placement import actor_options
from crabray.cluster.sandbox import SandboxSpec

logger = logging.getLogger(__name__)

_CLOSE_TIMEOUT_SEC = 60.0

SlotKey = tuple[str, tuple[tuple[str, str], ...]]
"""What competes for the same slots: a host kind and a label selector."""


def slot_key(spec: SandboxSpec) -> SlotKey:
    return (spec.kind, tuple(sorted(spec.label_selector.items())))


@dataclass
class _Member:
    actor: Any
    spec: SandboxSpec
    key: SlotKey = field(init=False)
    """``slot_key(spec)``, made once: the pool counts members by it for every queued item."""
    recycling: Any = None
    """The ``recycle`` call in flight since the actor came back, if any."""
    recycled: bool = False
    """``recycling`` has finished (remembered: asking Ray again costs a call)."""
    handed: bool = False
    """Its reset was sent with the next episode queued behind it (``hand_over``): it is
    busy, and its reset ending makes no queued episode servable."""
    node: Any = None
    """The actor's ``node`` call, made at creation: its (small, inlined) answer stays
    readable in the driver after the node is gone."""

    def __post_init__(self) -> None:
        self.key = slot_key(self.spec)


@dataclass
class PoolStats:
    """How the pool served the sweep."""

    created: int = 0
    reused: int = 0
    retired: int = 0
    failed_resets: int = 0
    queued: int = 0
    """Episodes sent to a busy actor behind its running one (``hand_over``)."""

    @property
    def hit_rate(self) -> float:
        """Share of environments served by a warm actor instead of a cold start."""
        served = self.created + self.reused
        return self.reused / served if served else 0.0


@dataclass
class EnvironmentPool:
    """Idle and busy environment actors by configuration.

    Args:
        pooling: Reuse environments across episodes; when off, every episode
            gets new sandboxes (used ones are closed; their actors' processes are
            kept and start the next sandbox ahead).
        run_id: The run the sandboxes serve; their actors see it as
            ``$CRABRAY_RUN_ID`` on any node, so what they make is labelled with it.
        control: The run's ``RunControl`` actor, handed to every actor made: its stop
            request ends their episodes after the current step.
    """

    pooling: bool = True
    run_id: str | None = None
    control: Any = None
    max_actors: int | None = None
    """Actors the pool grows to while others reset (None: the cluster's slots); more
    overlap resets with episodes, but each costs a process start (the scheduler: its
    concurrency, so an episode rather waits a few ms for a reset)."""
    stats: PoolStats = field(default_factory=PoolStats)
    _idle: dict[str, list[_Member]] = field(default_factory=lambda: defaultdict(list))
    _members: dict[int, _Member] = field(default_factory=dict)
    _retiring: list[Any] = field(default_factory=list)
    """The closes sent to retired actors: the shutdown waits for them too, so a run does
    not stop its Ray instance while a retired sandbox is still being removed."""

    def live(self) -> Counter[SlotKey]:
        """Actors alive per slot key (busy, idle or starting)."""
        return Counter(m.key for m in self._members.values())

    def can_serve(self, specs: list[SandboxSpec], capacity: dict[SlotKey, int]) -> bool:
        """Whether ``acquire`` can serve all of ``specs`` now without exceeding ``capacity``.

        A configuration whose idle actors are all still resetting is served by a
        new actor if its kind has a free slot, else not now.
        """
        needed: Counter[SlotKey] = Counter()
        live = self.live()
        for spec in specs:
            idle = self._idle[spec.pool_key]
            if any(self._is_ready(m) for m in idle):
                continue
            if idle and not self._can_grow(slot_key(spec), capacity, sum(needed.values())):
                return False  # wait for a reset rather than evict
            needed[slot_key(spec)] += 1
        for key, count in needed.items():
            evictable = sum(
                len(members)
                for pool_key, members in self._idle.items()
                if members and members[0].key == key
            )
            if live[key] + count - evictable > capacity.get(key, 0):
                return False
        return True

    def acquire(self, spec: SandboxSpec, capacity: dict[SlotKey, int]) -> Any:
        """A clean actor for ``spec``: a pooled one if any, else a new one.

        A new actor whose slot kind is full takes the slot of an idle actor of
        another configuration, which is retired.
        """
        self.refresh()
        idle = self._idle[spec.pool_key]
        key = slot_key(spec)
        while idle and (any(self._is_ready(m) for m in idle) or not self._can_grow(key, capacity)):
            member = self._take(idle)
            if member is not None:
                if self.pooling:
                    self.stats.reused += 1
                else:
                    self.stats.created += 1  # a new sandbox, in a kept process
                return member.actor
        if self.live()[key] >= capacity.get(key, 0):
            self._evict_one(key)
        return self._create(spec).actor

    def warm(self, spec: SandboxSpec, count: int, capacity: dict[SlotKey, int]) -> None:
        """Start up to ``count`` idle environments of ``spec`` ahead of demand."""
        key = slot_key(spec)
        for _ in range(count):
            if self.live()[key] >= capacity.get(key, 0):
                return
            member = self._create(spec)
            member.recycling = member.actor.warm.remote()
            self._idle[spec.pool_key].append(member)

    def release(self, actor: Any) -> None:
        """Take back a healthy actor after its episode: reset it, keep it idle."""
        member = self._members[id(actor)]
        member.recycling = actor.recycle.remote() if self.pooling else actor.renew.remote()
        member.recycled = False
        member.handed = False
        self._idle[member.spec.pool_key].append(member)

    def hand_over(self, actor: Any, *, reset: bool = True) -> Any:
        """Keep a busy pooled actor for the episode to be queued behind it
        (``crabray.cluster.pipeline``), sending it that episode's reset unless the
        episode's own call resets the sandbox (``reset=False``). Returns the reset's
        reference, or None.
        """
        member = self._members[id(actor)]
        member.recycling = actor.recycle.remote() if reset else None
        member.recycled = False
        member.handed = True
        self.stats.reused += 1
        self.stats.queued += 1
        return member.recycling

    def reset_done(self, actor: Any) -> bool:
        """Whether the actor's last reset had ended at the last ``refresh``."""
        member = self._members.get(id(actor))
        return member is None or self._is_ready(member)

    def in_progress(self) -> list[Any]:
        """The resets (and warm-ups, renewals) still running: their end can make an episode
        servable, so the scheduler waits on them as on episodes."""
        return [m.recycling for m in self._members.values() if not (m.handed or self._is_ready(m))]

    def node_call(self, actor: Any) -> Any:
        """The reference to ``actor``'s answer to where it lives (see ``node_name``)."""
        member = self._members.get(id(actor))
        return None if member is None else member.node

    def discard(self, actor: Any, *, close: bool = False) -> None:
        """End a broken actor; it is never handed out again.

        With ``close`` (the actor answered: its episode returned), its sandbox is
        closed before it ends, as a retired one is, so nothing of it is left on
        its node (a mounted disk, a cgroup); otherwise it is killed at once.
        """
        member = self._members.get(id(actor))
        if member is None:
            return
        idle = self._idle[member.spec.pool_key]
        if member in idle:
            idle.remove(member)
        self._members.pop(id(actor), None)
        if close:
            self._retiring.append(actor.close.remote())
            actor.__ray_terminate__.remote()
            return
        ray.kill(actor, no_restart=True)

    def trim(self, demand: Counter[str]) -> None:
        """Retire idle actors beyond what the remaining work (by pool key) needs."""
        for pool_key, idle in self._idle.items():
            while len(idle) > demand[pool_key]:
                self._retire(idle.pop(0))

    def shutdown(self) -> None:
        """Close every sandbox and kill every actor this pool made."""
        members = list(self._members.values())
        closing = [m.actor.close.remote() for m in members] + self._retiring
        if closing:
            done, stuck = ray.wait(closing, num_returns=len(closing), timeout=_CLOSE_TIMEOUT_SEC)
            if stuck:
                logger.warning("%d sandboxes did not close in time; killing them", len(stuck))
            for ref in done:
                try:
                    ray.get(ref)
                except Exception as exc:
                    logger.warning("closing a sandbox failed: %s", exc)
        for member in members:
            ray.kill(member.actor, no_restart=True)
        self._members.clear()
        self._idle.clear()
        self._retiring.clear()

    def _create(self, spec: SandboxSpec) -> _Member:
        options = actor_options(spec.kind, spec.label_selector)
        actor = RemoteEnvironmentActor.options(**options).remote(spec, self.run_id, self.control)
        member = _Member(actor, spec)
        member.node = member.actor.node.remote()
        self._members[id(member.actor)] = member
        self.stats.created += 1
        return member

    def _can_grow(self, key: SlotKey, capacity: dict[SlotKey, int], adding: int = 0) -> bool:
        """Whether a new actor of ``key`` may start (besides ``adding`` about to) instead of
        waiting for a reset: a free slot, within ``max_actors``."""
        if self.max_actors is not None and len(self._members) + adding >= self.max_actors:
            return False
        return self.live()[key] + adding < capacity.get(key, 0)

    def refresh(self) -> None:
        """Learn which resets (warm-ups, renewals) have finished, in one call to Ray.

        ``can_serve`` reads what the last refresh learnt (the scheduler refreshes
        once per pass over its queue); ``acquire`` refreshes itself.
        """
        pending = {
            m.recycling: m
            for m in self._members.values()
            if m.recycling is not None and not m.recycled
        }
        if pending:
            done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
            for ref in done:
                pending[ref].recycled = True

    @staticmethod
    def _is_ready(member: _Member) -> bool:
        """Whether the member's reset (or warm-up, renewal) had finished at the last refresh."""
        return member.recycling is None or member.recycled

    def _take(self, idle: list[_Member]) -> _Member | None:
        """Pop an idle member, preferring one whose reset has finished; None if it failed."""
        ready = [m for m in idle if self._is_ready(m)]
        member = ready[0] if ready else idle[0]
        idle.remove(member)
        if member.recycling is not None and self._is_ready(member):
            try:
                ray.get(member.recycling)
            except Exception as exc:
                logger.warning(
                    "resetting a '%s' sandbox failed, retiring it: %s", member.spec.name, exc
                )
                self.stats.failed_resets += 1
                self.discard(member.actor)
                return None
        member.recycling = None
        member.recycled = False
        return member

    def _evict_one(self, key: SlotKey) -> None:
        for idle in self._idle.values():
            for member in idle:
                if member.key == key:
                    idle.remove(member)
                    self._retire(member)
                    return

    def _retire(self, member: _Member) -> None:
        """Close a member's sandbox and end the actor (close runs before the kill)."""
        self._members.pop(id(member.actor), None)
        self.stats.retired += 1
        self._retiring.append(member.actor.close.remote())
        member.actor.__ray_terminate__.remote()


def node_name(call: Any) -> str | None:
    """The node a ``node_call`` reference names; None if the actor never started."""
    if call is None or not _done(call):
        return None
    try:
        node: str = ray.get(call)
    except Exception as exc:
        logger.debug("the node of an environment actor is unknown: %s", exc)
        return None
    return node


def _done(ref: Any) -> bool:
    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)
