"""Where a model limiter waits: in-process, or one named Ray actor per endpoint for a run.

``crabray run`` starts one ``ModelLimiter`` (``crabray.agents.model_limits``) per
model endpoint its LLM agents call, each in a named Ray actor
(``limiter_name``), before its first episode, and kills them at its end
(``ModelLimiters``). An agent's calls, on whichever node, find their
endpoint's actor by name and ask it for a grant before each request: the run
as a whole stays within the endpoint's limits. Where no Ray is running (an
in-process episode, ``crabray.evaluate``'s local path, unit tests) or the run
started no actor for the endpoint, the same limiter runs in the process
(``local_gate``), shared by every agent of the process that calls it.

Ray is imported inside the functions that use it: an in-process episode never
pays for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import sys
import threading
import time
from typing import Any, TypeVar

from pydantic import BaseModel

from crabray.agents.base import AgentSpec
from crabray.agents.config import LLM_KINDS, LLMSettings
from crabray.agents.model_limits import (
    LimiterState,
    ModelLimiter,
    ModelLimits,
    Outcome,
    WaitCallback,
)
from crabray.core.errors import ModelUnreachableError

logger = logging.getLogger(__name__)

_Item = TypeVar("_Item", bound=BaseModel)

NAMESPACE = "crabray-models"
"""The Ray namespace of the limiter actors: the same from the driver and every worker."""

NO_CAP = 100_000
"""``max_connections`` of a configuration that sets none (0) but limits requests or tokens."""

_POLL_SEC = 1.0
"""How often a call waiting on a limiter actor reports its wait (the episode's watchdog reads
it to leave the wait out of the time limit)."""


def endpoint_key(base_url: str, model: str) -> str:
    """One endpoint's identity: its API root and model."""
    return f"{base_url.rstrip('/')}#{model}"


def limiter_name(run_id: str, base_url: str, model: str) -> str:
    """The named actor limiting calls of run ``run_id`` to this endpoint."""
    digest = hashlib.sha256(endpoint_key(base_url, model).encode()).hexdigest()[:16]
    return f"crabray-model-limiter-{run_id}-{digest}"


def limits_of(settings: LLMSettings) -> ModelLimits | None:
    """An agent's limits, or None when it sets none (``max_connections``, ``rpm`` and
    ``tpm`` all 0: its calls go straight to the model)."""
    if not (settings.max_connections or settings.rpm or settings.tpm):
        return None
    return ModelLimits(
        max_connections=settings.max_connections or NO_CAP,
        rpm=settings.rpm,
        tpm=settings.tpm,
        adaptive=settings.adaptive,
    )


def agent_endpoints(spec: AgentSpec) -> dict[str, tuple[str, str, ModelLimits]]:
    """The endpoints an LLM agent calls (its model, a planner's), with its limits, by key."""
    if spec.kind not in LLM_KINDS:
        return {}
    settings = LLMSettings.model_validate(spec.settings)
    limits = limits_of(settings)
    models = {m for m in (spec.model, settings.planner_model) if m}
    if limits is None:
        return {}
    return {endpoint_key(settings.base_url, m): (settings.base_url, m, limits) for m in models}


class LocalGate:
    """A limiter in this process: threads wait on one condition for their grants.

    Args:
        limiter: The limiter; this gate owns it.
    """

    def __init__(self, limiter: ModelLimiter) -> None:
        self.limiter = limiter
        self._lock = threading.Condition()
        self._ready: set[int] = set()

    def acquire(self, tokens: int, lease_sec: float, on_wait: WaitCallback | None = None) -> int:
        with self._lock:
            request = self.limiter.submit(tokens, lease_sec)
            last = time.monotonic()
            try:
                while True:
                    self._pump()
                    if request in self._ready:
                        self._ready.discard(request)
                        return request
                    check = self.limiter.next_check_sec()
                    self._lock.wait(_POLL_SEC if check is None else min(check, _POLL_SEC))
                    now = time.monotonic()
                    if on_wait is not None:
                        on_wait(now - last)
                    last = now
            except BaseException:
                self._ready.discard(request)
                self.limiter.cancel(request)
                self._pump()
                raise

    def release(
        self,
        ticket: int,
        outcome: Outcome,
        *,
        latency_sec: float | None = None,
        tokens: int | None = None,
        retry_after_sec: float | None = None,
    ) -> None:
        with self._lock:
            self.limiter.release(
                ticket,
                outcome,
                latency_sec=latency_sec,
                tokens=tokens,
                retry_after_sec=retry_after_sec,
            )
            self._pump()

    def state(self) -> LimiterState:
        """What the limiter is doing now."""
        with self._lock:
            return self.limiter.state()

    def _pump(self) -> None:
        granted = self.limiter.grant()
        if granted:
            self._ready.update(granted)
            self._lock.notify_all()


_LOCAL: dict[str, LocalGate] = {}
_LOCAL_LOCK = threading.Lock()


def local_gate(base_url: str, model: str, limits: ModelLimits) -> LocalGate:
    """This process's gate of an endpoint; a second agent's limits tighten the first's."""
    key = endpoint_key(base_url, model)
    with _LOCAL_LOCK:
        gate = _LOCAL.get(key)
        if gate is None:
            gate = _LOCAL[key] = LocalGate(ModelLimiter(limits, time.monotonic, key))
        elif gate.limiter.limits != limits:
            with gate._lock:
                gate.limiter.set_limits(gate.limiter.limits.tightest(limits))
        return gate


class LimiterActor:
    """The body of a run's limiter actor for one endpoint (an asyncio actor: each waiting
    call is a coroutine, thousands of them cost no threads).

    Args:
        limits: The endpoint's limits (the tightest of the agents calling it), as a dict.
        name: The endpoint, for logs.
    """

    def __init__(self, limits: dict[str, Any], name: str) -> None:
        self.limiter = ModelLimiter(ModelLimits.model_validate(limits), time.monotonic, name)
        self._ready: set[int] = set()
        self._changed: asyncio.Condition | None = None

    async def acquire(self, tokens: int, lease_sec: float) -> int:
        """Wait for a grant; the ticket to release it with."""
        changed = self._condition()
        request = self.limiter.submit(tokens, lease_sec)
        try:
            async with changed:
                while True:
                    self._pump(changed)
                    if request in self._ready:
                        self._ready.discard(request)
                        return request
                    check = self.limiter.next_check_sec()
                    with contextlib.suppress(TimeoutError):  # time may have made room
                        await asyncio.wait_for(changed.wait(), timeout=check)
        except BaseException:  # the caller went away (cancelled): its place is freed
            self._ready.discard(request)
            self.limiter.cancel(request)
            raise

    async def release(
        self,
        ticket: int,
        outcome: str,
        latency_sec: float | None = None,
        tokens: int | None = None,
        retry_after_sec: float | None = None,
    ) -> None:
        """A granted call ended."""
        changed = self._condition()
        async with changed:
            self.limiter.release(
                ticket,
                Outcome(outcome),
                latency_sec=latency_sec,
                tokens=tokens,
                retry_after_sec=retry_after_sec,
            )
            self._pump(changed)

    async def state(self) -> dict[str, Any]:
        """What the limiter is doing now (``LimiterState`` as a dict)."""
        return self.limiter.state().model_dump()

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:  # made in the actor's event loop, on first use
            self._changed = asyncio.Condition()
        return self._changed

    def _pump(self, changed: asyncio.Condition) -> None:
        granted = self.limiter.grant()
        if granted:
            self._ready.update(granted)
            changed.notify_all()


class RayGate:
    """A run's limiter actor for one endpoint, seen from an agent on any node.

    Args:
        actor: The actor's handle.
        name: Its name, for error messages.
    """

    def __init__(self, actor: Any, name: str) -> None:
        self.actor = actor
        self.name = name

    def acquire(self, tokens: int, lease_sec: float, on_wait: WaitCallback | None = None) -> int:
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        last = time.monotonic()
        ref = self.actor.acquire.remote(tokens, lease_sec)
        try:
            while True:
                try:
                    ticket: int = ray.get(ref, timeout=_POLL_SEC)
                    return ticket
                except GetTimeoutError:
                    now = time.monotonic()
                    if on_wait is not None:
                        on_wait(now - last)
                    last = now
        except RayError as exc:
            raise ModelUnreachableError(
                f"the run's model limiter {self.name} cannot be reached: {exc}"
            ) from exc
        except BaseException:
            ray.cancel(ref)
            raise
        finally:
            if on_wait is not None:
                on_wait(time.monotonic() - last)

    def release(
        self,
        ticket: int,
        outcome: Outcome,
        *,
        latency_sec: float | None = None,
        tokens: int | None = None,
        retry_after_sec: float | None = None,
    ) -> None:
        # Not awaited: the answer is already the caller's; the actor orders the calls.
        self.actor.release.remote(ticket, outcome.value, latency_sec, tokens, retry_after_sec)


_ACTORS: dict[str, RayGate | None] = {}


def gate_for(settings: LLMSettings, model: str) -> LocalGate | RayGate | None:
    """The gate an agent's calls to ``model`` go through; None when it sets no limits.

    The run's actor of the endpoint when Ray is running here and the run started one
    (``settings.limiter_run``); else this process's own.
    """
    limits = limits_of(settings)
    if limits is None:
        return None
    if settings.limiter_run is not None and _ray_running():
        name = limiter_name(settings.limiter_run, settings.base_url, model)
        if name not in _ACTORS:
            _ACTORS[name] = _find_actor(name)
        found = _ACTORS[name]
        if found is not None:
            return found
    return local_gate(settings.base_url, model, limits)


def _ray_running() -> bool:
    """Whether this process is connected to Ray (without importing Ray where it is not)."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


def _find_actor(name: str) -> RayGate | None:
    import ray

    try:
        return RayGate(ray.get_actor(name, namespace=NAMESPACE), name)
    except ValueError:
        logger.warning(
            "no model limiter %s in this Ray cluster; this process limits its own calls", name
        )
        return None


class ModelLimiters:
    """The limiter actors of one run, one per endpoint its LLM agents call.

    Args:
        run_id: The run.
        actors: The actors, by name.
        models: The model each actor limits calls to, by actor name (for the progress
            display); the actor's name where missing.
    """

    def __init__(
        self, run_id: str, actors: dict[str, Any], models: dict[str, str] | None = None
    ) -> None:
        self.run_id = run_id
        self.actors = actors
        self.models = models or {}

    @classmethod
    def start(cls, run_id: str, agents: list[AgentSpec]) -> ModelLimiters:
        """Start an actor per endpoint of ``agents`` (the tightest of their limits each), on
        this driver's node; none without Ray (each process then limits its own calls)."""
        endpoints: dict[str, tuple[str, str, ModelLimits]] = {}
        for spec in agents:
            for key, (url, model, limits) in agent_endpoints(spec).items():
                known = endpoints.get(key)
                endpoints[key] = (
                    url,
                    model,
                    limits if known is None else known[2].tightest(limits),
                )
        if not endpoints or not _ray_running():
            return cls(run_id, {})
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        remote = ray.remote(LimiterActor)
        actors, models = {}, {}
        for key, (url, model, limits) in endpoints.items():
            name = limiter_name(run_id, url, model)
            models[name] = model
            actors[name] = remote.options(
                name=name,
                namespace=NAMESPACE,
                num_cpus=0,
                max_concurrency=100_000,
                max_restarts=-1,
                scheduling_strategy=here,
            ).remote(limits.model_dump(), key)
            logger.info("model limiter for %s: %s", key, limits)
        return cls(run_id, actors, models)

    def attach(self, items: list[_Item]) -> list[_Item]:
        """``items`` (each with an ``agent`` spec) whose agents' calls go through the actors."""
        if not self.actors:
            return items
        return [
            item.model_copy(update={"agent": self.spec(item.agent)})  # type: ignore[attr-defined]
            for item in items
        ]

    def spec(self, spec: AgentSpec) -> AgentSpec:
        """``spec`` whose calls go through this run's actors (LLM agents only)."""
        if spec.kind not in LLM_KINDS or not self.actors:
            return spec
        return spec.model_copy(update={"settings": {**spec.settings, "limiter_run": self.run_id}})

    def states(self) -> dict[str, LimiterState]:
        """What each actor is doing, by actor name (empty without actors)."""
        import ray

        names = list(self.actors)
        answers = ray.get([self.actors[n].state.remote() for n in names])
        return {n: LimiterState.model_validate(a) for n, a in zip(names, answers, strict=True)}

    def queued(self) -> bool:
        """Whether a model's calls queue now: some wait for a grant, or its limit is full.

        The scheduler asks before it cancels an episode past its driver-side deadline:
        an agent waiting for its model's turn is not stuck (the episode's own clock
        leaves such waits out, ``model_wait_sec``). A limiter that cannot be read counts
        as not queueing: the deadline then acts as it does without limiters, and the
        scheduler's loop goes on.
        """
        from ray.exceptions import RayError

        try:
            states = self.states()
        except RayError as exc:
            logger.warning("could not read the model limiters; deadlines apply as set: %s", exc)
            return False
        return any(state.waiting or state.in_flight >= state.limit for state in states.values())

    def stop(self) -> None:
        """Kill the run's actors (a failure to is logged: the run's results are written)."""
        if not self.actors:
            return
        import ray

        for name, actor in self.actors.items():
            try:
                ray.kill(actor)
            except Exception as exc:
                logger.warning("could not stop model limiter %s: %s", name, exc)
        self.actors = {}
