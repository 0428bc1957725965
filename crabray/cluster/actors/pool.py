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
could hold every slot and starve the rest of the sweep). An episode gets all
its environments at once or waits holding none (``plan``): an episode holding
one slot while waiting for another that an idle actor held is how sweeps with
multi-environment tasks hung (issue 26). Idle actors of a
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

from crabray.cluster.actors.environment import RemoteEnvironmentActor
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.placement import actor_options, sandbox_memory_mb
from crabray.core.errors import PlacementError
from crabray.core.words import counted

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
class _Plan:
    """How ``EnvironmentPool.acquire_all`` serves an episode's environments at once."""

    picks: list[tuple[SandboxSpec, _Member | None]] = field(default_factory=list)
    """Each spec in order, with the idle actor it takes (None: a new actor)."""
    new: list[SandboxSpec] = field(default_factory=list)
    evict: list[_Member] = field(default_factory=list)
    """Idle actors of other configurations retired for their slots."""


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
    memory: bool = False
    """Whether each actor takes its sandbox's memory as Ray's ``memory`` resource
    (``placement.sandbox_memory_mb``; the scheduler: with ``--concurrency auto``)."""
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
        """Whether ``acquire_all`` can serve all of ``specs`` now without exceeding ``capacity``.

        A configuration whose idle actors are all still resetting is served by a
        new actor if its kind has a free slot, else not now.
        """
        return self.plan(specs, capacity) is not None

    def plan(
        self, specs: list[SandboxSpec], capacity: dict[SlotKey, int], *, behind_resets: bool = False
    ) -> _Plan | None:
        """How to serve all of ``specs`` at once within ``capacity``, or None if not now.

        All or nothing: an episode that needs several environments gets every one
        of them together or none (one holding a slot while another waits for a slot
        it holds is how a sweep hangs). Each spec takes, in order: a distinct idle
        actor of its configuration whose reset has ended; a free slot of its kind
        (not while its own configuration's resets run and ``max_actors`` is reached);
        the slot of an idle actor of another configuration, retired for it. With
        ``behind_resets``, a spec whose configuration's idle actors all still reset
        takes one of them (its episode queues behind the reset on the actor).
        """
        plan = _Plan()
        live = self.live()
        taken: set[int] = set()
        for spec in specs:
            key = slot_key(spec)
            idle = [m for m in self._idle[spec.pool_key] if id(m) not in taken]
            ready = [m for m in idle if self._is_ready(m)]
            free = live[key] < capacity.get(key, 0)
            if ready:
                member: _Member | None = ready[0]
            elif idle and not (free and self._under_max(len(plan.new))):
                if not behind_resets:
                    return None  # wait for a reset of its own rather than evict
                member = idle[0]
            elif free:
                member = None
                live[key] += 1
            else:
                victim = self._idle_of(key, taken)
                if victim is None:
                    return None
                taken.add(id(victim))
                plan.evict.append(victim)
                member = None
            if member is not None:
                taken.add(id(member))
            else:
                plan.new.append(spec)
            plan.picks.append((spec, member))
        return plan

    def acquire_all(self, specs: list[SandboxSpec], capacity: dict[SlotKey, int]) -> list[Any]:
        """Clean actors for all of ``specs``, in order, taken together (see ``plan``).

        Raises:
            PlacementError: The kind has no slot for them now (``can_serve`` said no).
        """
        self.refresh()
        plan = self.plan(specs, capacity, behind_resets=True)
        if plan is None:
            names = ", ".join(spec.name for spec in specs)
            raise PlacementError(f"no free slots for the environments {names} now")
        for victim in plan.evict:
            self._idle[victim.spec.pool_key].remove(victim)
            self._retire(victim)
        actors = []
        for spec, member in plan.picks:
            if member is None:
                actors.append(self._create(spec).actor)
                continue
            self._idle[spec.pool_key].remove(member)
            member.recycling = None
            member.recycled = False
            if self.pooling:
                self.stats.reused += 1
            else:
                self.stats.created += 1  # a new sandbox, in a kept process
            actors.append(member.actor)
        return actors

    def acquire(self, spec: SandboxSpec, capacity: dict[SlotKey, int]) -> Any:
        """A clean actor for ``spec``: a pooled one if any, else a new one (``acquire_all``)."""
        return self.acquire_all([spec], capacity)[0]

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
        (``crabray.cluster.actors.pipeline``), sending it that episode's reset unless the
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

    def placed(self, actor: Any) -> bool:
        """Whether Ray has placed ``actor`` and it runs (its ``node`` call has answered).

        An actor the pool no longer holds (discarded, retired) counts as placed: it
        waits for nothing.
        """
        member = self._members.get(id(actor))
        return member is None or member.node is None or _done(member.node)

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
                logger.warning(
                    "%s did not close in time; killing them",
                    counted(len(stuck), "sandbox", "sandboxes"),
                )
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
        memory = sandbox_memory_mb(spec.backend, spec.backend_settings) if self.memory else 0
        options = actor_options(spec.kind, spec.label_selector, memory)
        actor = RemoteEnvironmentActor.options(**options).remote(spec, self.run_id, self.control)
        member = _Member(actor, spec)
        member.node = member.actor.node.remote()
        self._members[id(member.actor)] = member
        self.stats.created += 1
        return member

    def _under_max(self, adding: int) -> bool:
        """Whether a new actor may start (besides ``adding`` about to) instead of waiting
        for a reset of its configuration: within ``max_actors``."""
        return self.max_actors is None or len(self._members) + adding < self.max_actors

    def _idle_of(self, key: SlotKey, taken: set[int]) -> _Member | None:
        """An idle actor holding a slot of ``key`` that ``taken`` does not name."""
        for idle in self._idle.values():
            for member in idle:
                if member.key == key and id(member) not in taken:
                    return member
        return None

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
                if not pending[ref].handed:
                    self._check_reset(pending[ref])

    def _check_reset(self, member: _Member) -> None:
        """Retire an idle actor whose finished reset failed: never hand it out.

        (A reset handed over with the episode queued behind it is the pipeline's to
        judge: that episode's outcome says it never ran.)
        """
        try:
            ray.get(member.recycling)
        except Exception as exc:
            logger.warning(
                "resetting a '%s' sandbox failed, retiring it: %s", member.spec.name, exc
            )
            self.stats.failed_resets += 1
            self.discard(member.actor)

    @staticmethod
    def _is_ready(member: _Member) -> bool:
        """Whether the member's reset (or warm-up, renewal) had finished at the last refresh."""
        return member.recycling is None or member.recycled

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
