"""The driver's scheduler: episodes in flight, results as they finish, retries.

It dispatches an episode only when the pool can give it an environment of
every kind it needs without exceeding the cluster's slots (backpressure per
kind, and at most ``concurrency`` episodes in flight overall); collects
finished episodes with ``ray.wait`` in completion order; hands every batch of
finished records to ``on_records`` (which puts them on disk) before counting
them done; retries an episode whose infrastructure failed as a new attempt,
after a backoff, up to the retry policy's limit; and backs up each task's
time limit from outside (an episode ends itself at its limit; one still
running ``timeout_grace_sec`` later is cancelled, then its actors are killed).
Agent failures are results, never retried.

Interrupted (``KeyboardInterrupt``: Ctrl-C, or SIGTERM turned into one), it asks
the episodes in flight to stop after their current step (``RunControl``),
writes what they report within ``stop_grace_sec`` as ``cancelled`` rows, then
kills what is left.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any

import ray

from crabray.cluster.actors.control import start_control
from crabray.cluster.actors.episode_call import (
    CallOutcome,
    EpisodeCall,
    died_result,
    failed_result,
    pack,
    reaches_its_worker,
    unpack,
)
from crabray.cluster.actors.inflight import InFlight, SweepItem
from crabray.cluster.actors.pipeline import Followers, never_ran, resets_ended
from crabray.cluster.actors.pool import EnvironmentPool, SlotKey, node_name, slot_key
from crabray.cluster.actors.sandbox import SandboxSpec
from crabray.cluster.runtime.placement import capacity, sandbox_memory_mb
from crabray.cluster.runtime.ray_runtime import is_local_instance
from crabray.cluster.sweep.adaptive import (
    AUTO,
    KindObservation,
    LevelController,
    host_cpu_used,
    host_memory_used,
)
from crabray.cluster.sweep.node_load import NodeLoad
from crabray.cluster.sweep.progress import SweepProgress
from crabray.cluster.sweep.settings import SchedulerSettings
from crabray.cluster.sweep.status import StatusPublisher
from crabray.core.errors import (
    ConfigError,
    CrabrayError,
    HostError,
    PlacementError,
    SandboxHostError,
)
from crabray.core.result import EpisodeRecord, TerminationReason
from crabray.core.words import counted
from crabray.episode import EpisodeSettings
from crabray.formats import Suite

logger = logging.getLogger(__name__)

_SCAN_LIMIT = 64
"""Queued items looked at for one free slot: skip past blocked kinds, not the whole queue."""

_CLUSTER_POLL_SEC = 1.0
"""How often the cluster's capacity is read and the run's status published (GCS calls)."""

_FLUSH_SEC = 0.5
"""How long a finished episode may wait in the driver before its batch goes to disk."""

_FLUSH_RECORDS = 256
"""Finished episodes that go to disk at once without waiting for ``_FLUSH_SEC``.

Episodes go to disk in batches (one pair of part files, four fsyncs, per batch
instead of per finished episode, and fewer files for the final compaction); an
episode counts as done only once its batch is on disk, and a batch waits at most
``_FLUSH_SEC``, so a killed driver loses at most that much finished work, which a
resumed run redoes.
"""

_WAKE_SHARE = 100
"""With many episodes in flight, the loop wakes once 1 in this many has ended (or at its
timeout: a flush, a deadline, the capacity poll), not for each one.

Every wake-up costs a ``ray.wait`` over every reference in flight and walks over every
episode, so waking for each one that ends cost the driver a time that grows with the
square of the episodes in flight: at 10,000 in flight ending 137 a second, 48% of a core
waking for each, 11% waking for 1% of them (``scripts/sim_scale.py``, docs/scale.md). A
freed slot then waits about 1% of an episode's length for its next one, at most the
loop's timeout (1 s); below ``_WAKE_SHARE`` in flight nothing changes.
"""

RecordsCallback = Callable[[list[EpisodeRecord]], None]
ProgressCallback = Callable[[SweepProgress], None]
SubmitCallback = Callable[[SweepItem, float], None]


class Scheduler:
    """Runs sweep items as Ray actor calls of episodes with pooled, pinned environment actors.

    Args:
        suite: The loaded suite (the driver's copy, for environments, limits, tags).
        settings: Concurrency, retry, pooling and time-limit knobs.
        on_records: Persists a batch of finished records; called before they count as done.
        on_progress: Told after every batch.
        on_submit: Told when an episode is dispatched (for latency measurements).
        on_finished: Told of every batch of finished records as they come back, before
            more episodes start and before they are written (the run's budget: ``drain``).
        models_queued: Whether the run's model limiters queue calls now: an episode past
            its deadline then gets ``timeout_grace_sec`` more (its own clock leaves out
            the time its agent waits for its model).
    """

    def __init__(
        self,
        suite: Suite,
        settings: SchedulerSettings,
        on_records: RecordsCallback,
        on_progress: ProgressCallback | None = None,
        on_submit: SubmitCallback | None = None,
        on_finished: RecordsCallback | None = None,
        models_queued: Callable[[], bool] | None = None,
    ) -> None:
        self.suite = suite
        self.settings = settings
        self.on_records = on_records
        self.on_progress = on_progress or (lambda _: None)
        self.on_submit = on_submit or (lambda _item, _t: None)
        self.on_finished = on_finished or (lambda _: None)
        self.models_queued = models_queued or (lambda: False)
        self.control: Any = None
        """The run's ``RunControl`` actor, started by ``run`` (Ray is connected by then)."""
        auto = settings.concurrency == AUTO
        self.pool = EnvironmentPool(
            pooling=settings.pooling,
            run_id=settings.run_id,
            max_actors=None if isinstance(settings.concurrency, str) else settings.concurrency,
            memory=auto,
        )
        self.controller = LevelController() if auto else None
        """With ``--concurrency auto``: the level of each host kind (``_adapt``)."""
        self._fixed = settings.concurrency if isinstance(settings.concurrency, int) else 0
        """The fixed concurrency (0 with auto, where the controller decides)."""
        self._start_failures: Counter[str] = Counter()
        """Per host kind, infrastructure failures since the controller's last observation."""
        self._latencies: dict[str, list[float]] = {}
        """Per host kind, setup times of the episodes finished since then."""
        self._node_load = NodeLoad()
        """With auto on a cluster: each node's memory and CPU, probed on the node."""
        self.progress = SweepProgress(total=0)
        """The counts so far: what an interrupted run had done when it stopped."""
        self._stopping = False
        self._draining = False
        """Set by ``drain``: no episode starts any more."""
        self.followers = Followers(self.pool)
        self.status: StatusPublisher | None = None
        self._queue: deque[SweepItem] = deque()
        self._in_flight: dict[Any, InFlight] = {}
        self._specs: dict[str, list[SandboxSpec]] = {}
        self._slot_keys: set[SlotKey] = set()
        """``slot_key`` of every spec in ``_specs``: the capacity poll reads these, once a
        second, and must not walk every task of a long sweep to find them."""
        self._memory_mb: dict[SlotKey, int] = {}
        """With ``--concurrency auto``: the most memory (MiB) a sandbox of each slot key
        takes as Ray's ``memory`` resource; the capacity counts what nodes' memory holds."""
        self._capacity: dict[SlotKey, int] = {}
        self._peak: dict[SlotKey, int] = {}
        """The most slots of each kind the cluster had during the run (``_never_fits``)."""
        self._starved_since: dict[SlotKey, float] = {}
        self._passed_over: dict[int, float] = {}
        """When each waiting multi-sandbox episode (by ``id``) came within the scan's reach."""
        self._reserved: set[SlotKey] = set()
        """The kinds whose slots are kept for an episode passed over too long (``_refill``)."""
        self._delayed: list[tuple[float, int, SweepItem]] = []
        self._seq = itertools.count()
        self._pending: Counter[str] = Counter()
        """Environments by pool key that queued and delayed items still need."""
        self._last_poll = -math.inf
        self._unwritten: list[tuple[InFlight, EpisodeRecord]] = []
        """Finished episodes not on disk yet (not counted yet), oldest first."""
        self._unwritten_retries: list[SweepItem] = []
        self._unwritten_since = math.inf
        self._flushing = False

    def run(self, items: Iterable[SweepItem]) -> SweepProgress:
        """Run every item to a final result; return the final counts."""
        queue = deque(sorted(items, key=self._expected_cost, reverse=True))
        for item in queue:
            self._add_pending(item, +1)
        progress = self.progress = SweepProgress(total=len(queue))
        self.control = self.pool.control = start_control(own_worker=not is_local_instance())
        # The board is for `crabray cluster status` on a cluster that outlives the run. A
        # local instance the run started ends with it, and no crabray command reads it: a
        # board there would only cost a worker process at every start
        # (notes/performance-history.md).
        self.status = None if is_local_instance() else StatusPublisher(self.settings.run_id)
        in_flight: dict[Any, InFlight] = {}
        self._queue, self._in_flight = queue, in_flight
        self._poll_cluster(progress, force=True)
        self._check_memory_fits()
        self._warm(queue)
        try:
            while queue or in_flight or self._delayed or self._unwritten:
                self._refill(queue, in_flight)
                progress.in_flight = len(in_flight)
                # A reset finishing can make a queued episode servable: wake on those too.
                waiting = list(in_flight) + (self.pool.in_progress() if queue else [])
                timeout = self._wait_timeout(in_flight)
                if not waiting:
                    time.sleep(timeout)  # ray.wait of nothing returns at once: no busy loop
                wake_after = max(1, len(in_flight) // _WAKE_SHARE)
                ready, _ = ray.wait(waiting, num_returns=wake_after, timeout=timeout)
                if ready and in_flight:
                    ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
                    if ready:
                        self._finish(ready, queue, in_flight, progress)
                self._enforce_deadlines(in_flight)
                if self._poll_cluster(progress):
                    self._check_hosts(queue, in_flight)
                    self._check_placement(in_flight)
                self._flush(progress, force=not (queue or in_flight or self._delayed))
            if self.status is not None:
                self.status.publish(progress, final=True)
        except BaseException as exc:
            # Interrupted or failed: what finished goes to disk (unless writing is what failed).
            if isinstance(exc, KeyboardInterrupt) and not self._flushing:
                self._stop(in_flight)
            if self._unwritten and not self._flushing:
                self._flush(progress, force=True)
            raise
        finally:
            # Interrupted: the episodes still running cannot finish cleanly, and a
            # running actor task cannot be force-cancelled; their actors go.
            for flight in in_flight.values():
                for _, actor in flight.actors.values():
                    self.pool.discard(actor)
            self.pool.shutdown()
        return progress

    def drain(self) -> None:
        """Start no more episodes (the run's budget is reached): those in flight finish;
        those not started, queued or waiting to be retried, stay unrun for a resume."""
        self._draining = True
        for item in [*self._queue, *(waiting for _, _, waiting in self._delayed)]:
            self._add_pending(item, -1)
        self._queue.clear()
        self._delayed.clear()

    def _stop(self, in_flight: dict[Any, InFlight]) -> None:
        """Ask the episodes in flight to end after their step; keep what they report in time.

        Each reports within ``stop_grace_sec`` a ``cancelled`` record of everything it
        did (``crabray.episode.watch_episode``); the rest are killed by the caller.
        A second interrupt ends the wait.
        """
        if not in_flight:
            return
        logger.warning("interrupted: stopping %s in flight", counted(len(in_flight), "episode"))
        self._stopping = True
        self.control.stop.remote()
        deadline = time.monotonic() + self.settings.stop_grace_sec
        while in_flight and (left := deadline - time.monotonic()) > 0:
            try:
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=left)
            except KeyboardInterrupt:
                logger.warning("interrupted again: not waiting for the episodes in flight")
                break
            if not ready:
                break
            ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
            outcomes = [
                (flight, self._outcome(ref, flight)) for ref, flight in _pop(ready, in_flight)
            ]
            self._unwritten += [(flight, record) for flight, record in outcomes if record]
        if in_flight:
            logger.warning(
                "%s did not stop in time; killing them", counted(len(in_flight), "episode")
            )

    @property
    def pool_hit_rate(self) -> float:
        return self.pool.stats.hit_rate

    def _finish(
        self,
        ready: list[Any],
        queue: deque[SweepItem],
        in_flight: dict[Any, InFlight],
        progress: SweepProgress,
    ) -> None:
        outcomes = [(flight, self._outcome(ref, flight)) for ref, flight in _pop(ready, in_flight)]
        finished = [(flight, record) for flight, record in outcomes if record is not None]
        self._observe_finished(finished)
        self._unwritten_retries += self._retries(finished, progress)
        if not self._unwritten:
            self._unwritten_since = time.monotonic()
        self._unwritten += finished
        self.on_finished([record for _, record in finished])
        stop = _host_error([record for _, record in finished])
        if stop is not None:
            # No episode here would start either: what finished goes to disk, nothing more runs.
            self._flush(progress, force=True)
            raise stop
        # Keep the sandboxes busy before this batch goes to disk.
        self._refill(queue, in_flight)
        progress.in_flight = len(in_flight)
        self.pool.trim(self._pending)
        self._flush(progress, force=False)

    def _flush(self, progress: SweepProgress, *, force: bool) -> None:
        """Put the finished episodes on disk, then count them: when forced, when the
        oldest has waited ``_FLUSH_SEC``, or when ``_FLUSH_RECORDS`` wait."""
        if not self._unwritten:
            return
        due = time.monotonic() - self._unwritten_since >= _FLUSH_SEC
        if not (force or due or len(self._unwritten) >= _FLUSH_RECORDS):
            return
        finished, retries = self._unwritten, self._unwritten_retries
        self._flushing = True
        self.on_records([record for _, record in finished])
        self._flushing = False
        self._unwritten, self._unwritten_retries = [], []
        self._unwritten_since = math.inf
        self._count(finished, retries, progress)
        self.on_progress(progress)

    def _specs_of(self, task_id: str) -> list[SandboxSpec]:
        if task_id not in self._specs:
            entry = self.suite.entry(task_id)
            envs = entry.benchmark.task_environments(entry.task)
            self._specs[task_id] = [SandboxSpec.of(env) for env in envs]
            self._slot_keys.update(slot_key(spec) for spec in self._specs[task_id])
            if self.pool.memory:
                for spec in self._specs[task_id]:
                    need = sandbox_memory_mb(spec.backend, spec.backend_settings)
                    key = slot_key(spec)
                    self._memory_mb[key] = max(self._memory_mb.get(key, 0), need)
        return self._specs[task_id]

    def _expected_cost(self, item: SweepItem) -> tuple[float, int]:
        """Longest-expected first: by time limit, then by step budget."""
        entry = self.suite.entry(item.task_id)
        return self._time_limit(item), self.settings.limits.steps_for(entry.benchmark, entry.task)

    def _time_limit(self, item: SweepItem) -> float:
        entry = self.suite.entry(item.task_id)
        return self.settings.limits.time_limit_for(entry.benchmark, entry.task)

    def _warm(self, queue: deque[SweepItem]) -> None:
        if not self.settings.warm or not self.settings.pooling:
            return
        wanted: dict[str, SandboxSpec] = {}
        for item in queue:
            for spec in self._specs_of(item.task_id):
                wanted.setdefault(spec.pool_key, spec)
        for spec in wanted.values():
            self.pool.warm(spec, self.settings.warm, self._capacity)

    def _refill(self, queue: deque[SweepItem], in_flight: dict[Any, InFlight]) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            queue.appendleft(heapq.heappop(self._delayed)[2])
        self.pool.refresh()
        overdue = self._keep_slots_for_overdue(queue, now)
        scanned = 0
        index = 0
        busy = self._busy_kinds(in_flight) if self.controller is not None else Counter[str]()
        while index < len(queue) and len(in_flight) < self._most_in_flight():
            if scanned >= _SCAN_LIMIT:
                break
            item = queue[index]
            kept_for_another = id(item) not in overdue and self._keys_of(item) & self._reserved
            if not self._below_level(item, busy):
                index += 1
                scanned += 1
            elif (unfit := self._never_fits(item)) is not None:
                del queue[index]
                self._add_pending(item, -1)
                self._fail_unplaceable(item, unfit)
            elif not kept_for_another and self.pool.can_serve(
                self._specs_of(item.task_id), self._capacity
            ):
                del queue[index]
                self._add_pending(item, -1)
                ref, flight = self._submit(item)
                in_flight[ref] = flight
                if self.controller is not None:
                    busy.update(self._kinds_of(item))
                self._follow(flight)
            else:
                index += 1
                scanned += 1

    def _most_in_flight(self) -> int:
        """Episodes in flight at most: the fixed concurrency, or the sum of the levels."""
        if self.controller is None:
            return self._fixed
        kinds = {key[0] for key in self._slot_keys}
        return sum(self.controller.level(kind) for kind in kinds) or 1

    def _kinds_of(self, item: SweepItem) -> set[str]:
        return {spec.kind for spec in self._specs_of(item.task_id)}

    def _busy_kinds(self, in_flight: dict[Any, InFlight]) -> Counter[str]:
        """Episodes in flight per host kind they use (an episode counts once per kind)."""
        return Counter(kind for f in in_flight.values() for kind in self._kinds_of(f.item))

    def _below_level(self, item: SweepItem, busy: Counter[str]) -> bool:
        """Whether every host kind ``item`` needs is below its level (always, fixed): a
        kind at its level holds back only the episodes that need it."""
        if self.controller is None:
            return True
        return all(busy[kind] < self.controller.level(kind) for kind in self._kinds_of(item))

    def _observe_finished(self, finished: list[tuple[InFlight, EpisodeRecord]]) -> None:
        """Note, per host kind, the start failures and setup times the controller reads."""
        if self.controller is None:
            return
        for flight, record in finished:
            result = record.result
            for kind in self._kinds_of(flight.item):
                if result.termination_reason.is_infra:
                    self._start_failures[kind] += 1
                elif result.setup_time_sec:
                    self._latencies.setdefault(kind, []).append(result.setup_time_sec)

    def _adapt(self, progress: SweepProgress) -> None:
        """Give the controller what was seen of each host kind since its last look.

        Memory and CPU are this host's on a local instance; on a cluster, those of
        the worst node hosting the kind, as its probe last read them
        (``node_load.NodeLoad``).
        """
        if self.controller is None:
            return
        local = is_local_instance()
        if not local:
            self._node_load.poll()
        ceilings: Counter[str] = Counter()
        for key, slots in self._capacity.items():
            ceilings[key[0]] += slots
        busy = self._busy_kinds(self._in_flight)
        for kind, ceiling in ceilings.items():
            latencies = sorted(self._latencies.pop(kind, []))
            seen = KindObservation(
                ceiling=ceiling,
                in_flight=busy[kind],
                start_failures=self._start_failures.pop(kind, 0),
                start_latency_sec=latencies[len(latencies) // 2] if latencies else None,
                **self._load_of(kind, local),
            )
            before = self.controller.level(kind)
            level = self.controller.observe(kind, seen)
            if level != before:
                logger.info("concurrency auto: %s %d -> %d (%s)", kind, before, level, seen)
        progress.level = sum(self.controller.level(kind) for kind in ceilings)
        progress.ceiling = sum(max(1, slots) for slots in ceilings.values())

    def _load_of(self, kind: str, local: bool) -> dict[str, float | None]:
        """Memory and CPU use of the nodes hosting ``kind`` (``KindObservation`` fields)."""
        if local:
            return {"memory_used": host_memory_used(), "cpu_used": host_cpu_used()}
        memory, cpu = self._node_load.worst(kind)
        return {"memory_used": memory, "cpu_used": cpu}

    def _keep_slots_for_overdue(self, queue: deque[SweepItem], now: float) -> set[int]:
        """Keep the slots of the kinds of multi-sandbox episodes waiting ``reserve_after_sec``.

        Only an episode needing several sandboxes can be passed over for good: a
        single one takes any slot that frees, while several need slots free at once,
        and single-sandbox episodes behind it (and followers queued on its kinds'
        actors) would take each slot as it frees, until the queue runs dry. So
        once it has waited, nothing behind it that needs one of its kinds is
        dispatched, and no follower is queued on those kinds, until it is placed.
        Its wait counts from when it first came within the scan's reach, whether or
        not a scan ran (followers promoted on their actors keep the flight full).

        Returns:
            The ``id`` of each overdue episode, which alone may take the kept slots.
        """
        self._reserved = set()
        overdue: set[int] = set()
        # Only the episodes within reach now are remembered: one dispatched, dropped or
        # pushed out of reach is forgotten, so no entry outlives its episode (whose ``id``
        # a new one could reuse).
        waited, self._passed_over = self._passed_over, {}
        for item in itertools.islice(queue, _SCAN_LIMIT):
            if len(self._specs_of(item.task_id)) < 2:
                continue
            since = self._passed_over[id(item)] = waited.get(id(item), now)
            if (
                now - since >= self.settings.reserve_after_sec
                and not self._keys_of(item) & self._reserved
            ):
                logger.debug("keeping the slots of %s for %s", self._keys_of(item), item.task_id)
                self._reserved |= self._keys_of(item)
                overdue.add(id(item))
        return overdue

    def _never_fits(self, item: SweepItem) -> str | None:
        """Why ``item`` can never be placed: it needs more sandboxes of a kind at once than
        the cluster has ever had slots of it during this run; None if it fits (or if the
        kind has no slot at all now: ``_check_hosts`` waits for a host of it)."""
        needed = Counter(slot_key(spec) for spec in self._specs_of(item.task_id))
        for key, count in needed.items():
            slots = self._peak.get(key, 0)
            if 0 < slots < count:
                labels = f" with labels {dict(key[1])}" if key[1] else ""
                return (
                    f"task {item.task_id} needs {count} sandboxes of kind '{key[0]}'{labels} "
                    f"at once, and the cluster has {counted(slots, 'slot')} of it: it can never be "
                    f"placed. Give the cluster more slots of it (`crabray cluster start-head "
                    f"--hosts {key[0]}={count}`, or `start-worker`), then resume the run"
                )
        return None

    def _fail_unplaceable(self, item: SweepItem, reason: str) -> None:
        """Record ``item`` as an infrastructure failure that no retry can mend: final."""
        logger.error("%s", reason)
        call = self._call(item)
        task = self.suite.entry(item.task_id).task
        record = EpisodeRecord(result=failed_result(call, task, PlacementError(reason)))
        flight = InFlight(item, time.monotonic(), None)
        if not self._unwritten:
            self._unwritten_since = time.monotonic()
        self._unwritten.append((flight, record))
        self.progress.infra_failures += 1

    def _check_placement(self, in_flight: dict[Any, InFlight]) -> None:
        """Give up episodes whose actors Ray has not placed within ``placement_timeout_sec``.

        The pool never plans more actors of a kind than the cluster has slots, but
        Ray may still hold a slot elsewhere (another run on the same cluster, an
        actor that has not exited yet). An episode that cannot start must not wait
        for good: its actors are killed and it comes back as an ``env_error`` row
        saying why (retried as any infrastructure failure).
        """
        now = time.monotonic()
        bound = self.settings.placement_timeout_sec
        for flight in in_flight.values():
            if flight.placed or flight.unplaced is not None:
                continue
            unplaced = [
                name for name, (_, actor) in flight.actors.items() if not self.pool.placed(actor)
            ]
            if not unplaced:
                flight.placed = True
            elif now - flight.submitted > bound:
                flight.unplaced = (
                    f"the cluster did not place the environment actors of "
                    f"{', '.join(repr(n) for n in unplaced)} within {bound:g} s "
                    f"(placement_timeout_sec): their slots were held elsewhere (another run "
                    f"on this cluster, or actors that had not exited); "
                    f"`crabray cluster status` shows who holds them"
                )
                logger.warning("episode %s: %s", flight.item.task_id, flight.unplaced)
                for _, actor in flight.actors.values():
                    self._discard(actor)

    def _submit(self, item: SweepItem) -> tuple[Any, InFlight]:
        now = time.monotonic()
        deadline = now + self._time_limit(item) + self.settings.timeout_grace_sec
        flight = InFlight(item, now, deadline)
        specs = self._specs_of(item.task_id)
        for spec, actor in zip(specs, self.pool.acquire_all(specs, self._capacity), strict=True):
            flight.actors[spec.name] = (spec, actor)
        (_, host), *_ = flight.actors.values()
        flight.node_call = self.pool.node_call(host)
        others = {name: actor for name, (_, actor) in list(flight.actors.items())[1:]}
        self.on_submit(item, time.time())
        return host.run_episode.remote(pack(self._call(item)), others), flight

    def _follow(self, leader: InFlight) -> None:
        """Queue the next episode of the same configuration behind ``leader`` on its actor
        (pooled, single-environment episodes: ``crabray.cluster.actors.pipeline``)."""
        if not (self.settings.pooling and self.settings.pipeline) or len(leader.actors) != 1:
            return
        if self.followers.has(leader.host):
            return
        ((spec, _),) = leader.actors.values()
        if slot_key(spec) in self._reserved:
            return  # its slot is kept for an episode passed over too long
        for index, item in enumerate(itertools.islice(self._queue, _SCAN_LIMIT)):
            specs = self._specs_of(item.task_id)
            if len(specs) == 1 and specs[0].pool_key == spec.pool_key:
                del self._queue[index]
                self._add_pending(item, -1)
                follower = InFlight(item, time.monotonic(), None)
                self.followers.attach(leader, follower, pack(self._call(item)))
                return

    def _promote(self, actor: Any, previous: EpisodeRecord) -> None:
        """The follower queued on ``actor`` runs now: it is in flight, its time counts.

        It counts as dispatched when the episode before it finished (bench_cluster's
        dispatch latency is then its wait for the reset and its own setup).
        """
        promoted = self.followers.promote(actor, time.monotonic())
        if promoted is None:
            return
        ref, flight = promoted
        self._restart_deadline(flight)
        self._in_flight[ref] = flight
        self.on_submit(flight.item, previous.result.finished_at.timestamp())
        self._follow(flight)

    def _restart_deadline(self, flight: InFlight) -> None:
        limit = self._time_limit(flight.item) + self.settings.timeout_grace_sec
        flight.deadline = time.monotonic() + limit

    def _discard(self, actor: Any, *, close: bool = False) -> None:
        """Retire a broken actor (closing its sandbox first with ``close``); the episode
        queued behind its running one goes back to the queue with the same attempt (it
        never ran)."""
        follower = self.followers.drop(actor)
        if follower is not None:
            self._requeue(follower.item)
        self.pool.discard(actor, close=close)

    def _requeue(self, item: SweepItem) -> None:
        if self._draining:
            return
        self._queue.appendleft(item)
        self._add_pending(item, +1)

    def _call(self, item: SweepItem) -> EpisodeCall:
        entry = self.suite.entry(item.task_id)
        settings = EpisodeSettings(
            run_id=self.settings.run_id,
            suite=entry.benchmark.name,
            agent=item.agent.name,
            model=item.agent.model,
            epoch=item.epoch,
            attempt=item.attempt,
            limits=self.settings.limits,
            max_tokens=item.agent.max_tokens,
            max_cost_usd=item.agent.max_cost_usd,
        )
        return EpisodeCall(
            suite=self.suite.ref, task_id=item.task_id, agent=item.agent, settings=settings
        )

    def _wait_timeout(self, in_flight: dict[Any, InFlight]) -> float:
        """How long ``ray.wait`` may block before a deadline, a retry or a capacity check."""
        now = time.monotonic()
        wakeups = [1.0]
        wakeups += [f.deadline - now for f in in_flight.values() if f.deadline is not None]
        if self._delayed:
            wakeups.append(self._delayed[0][0] - now)
        wakeups.append(self._unwritten_since + _FLUSH_SEC - now)
        return max(min(wakeups), 0.0)

    def _enforce_deadlines(self, in_flight: dict[Any, InFlight]) -> None:
        for flight in resets_ended(list(in_flight.values())):
            if not flight.cancelled:  # a follower's time starts once its reset has ended
                self._restart_deadline(flight)
        now = time.monotonic()
        for ref, flight in in_flight.items():
            if flight.deadline is None or now < flight.deadline:
                continue
            if not flight.cancelled and self.models_queued():
                flight.deadline = now + self.settings.timeout_grace_sec
            elif not flight.cancelled:
                logger.warning("episode %s is past its time limit; cancelling", flight.item.task_id)
                ray.cancel(ref)
                flight.cancelled = True
                flight.deadline = now + self.settings.kill_grace_sec
            else:
                for _, actor in flight.actors.values():
                    self._discard(actor)
                flight.deadline = None

    def _add_pending(self, item: SweepItem, sign: int) -> None:
        for spec in self._specs_of(item.task_id):
            self._pending[spec.pool_key] += sign

    def _poll_cluster(self, progress: SweepProgress, *, force: bool = False) -> bool:
        """Re-read slot capacity and publish the run's status, at most once a second."""
        now = time.monotonic()
        if not force and now - self._last_poll < _CLUSTER_POLL_SEC:
            return False
        self._last_poll = now
        self._capacity = {
            key: capacity(key[0], dict(key[1]), self._memory_mb.get(key, 0))
            for key in self._slot_keys
        }
        for key, slots in self._capacity.items():
            self._peak[key] = max(self._peak.get(key, 0), slots)
        self._adapt(progress)
        if self.status is not None:
            self.status.publish(progress)
        return True

    def _check_hosts(self, queue: deque[SweepItem], in_flight: dict[Any, InFlight]) -> None:
        """Fail the sweep when a kind it still needs has had no host for too long.

        Raises:
            CrabrayError: Naming the kind; finished episodes are on disk, so the
                run can be resumed once a node hosts it again.
        """
        starved = {key for key, slots in self._capacity.items() if slots == 0}
        for key in set(self._starved_since) - starved:
            del self._starved_since[key]
        if not starved:
            return
        waiting = [*queue, *(item for _, _, item in self._delayed)]
        needed = {slot_key(s) for item in waiting for s in self._specs_of(item.task_id)}
        needed |= {key for flight in in_flight.values() for key in self._keys_of(flight.item)}
        now = time.monotonic()
        for key in needed & starved:
            since = self._starved_since.setdefault(key, now)
            if now - since <= self.settings.host_wait_sec:
                continue
            self._abandon(key, in_flight)
            if not in_flight:
                labels = f" with labels {dict(key[1])}" if key[1] else ""
                raise CrabrayError(
                    f"no node hosts sandboxes of kind '{key[0]}'{labels} any more "
                    f"(waited {self.settings.host_wait_sec:g} s); {counted(len(queue), 'episode')} "
                    f"did not run. Add a node that hosts it, then resume the run with "
                    f"--resume {self.settings.run_id}"
                )

    def _check_memory_fits(self) -> None:
        """Fail at once when a kind has slots but no node's memory holds one of its
        sandboxes (``--concurrency auto``: each takes its memory as Ray's resource).

        Raises:
            ConfigError: Naming the kind, the memory it takes and the setting to change.
        """
        for key, need in self._memory_mb.items():
            if self._capacity.get(key) == 0 and capacity(key[0], dict(key[1])) > 0:
                raise ConfigError(
                    f"no node of the cluster has {need} MiB of Ray's memory resource for a "
                    f"sandbox of kind '{key[0]}' (its memory_mb, or its backend's default): "
                    f"lower the sandbox's memory_mb, add a node with more memory, or run with "
                    f"a fixed --concurrency N, which does not reserve memory",
                    field="memory_mb",
                )

    def _keys_of(self, item: SweepItem) -> set[SlotKey]:
        return {slot_key(spec) for spec in self._specs_of(item.task_id)}

    def _abandon(self, key: SlotKey, in_flight: dict[Any, InFlight]) -> None:
        """Kill the actors of in-flight episodes that need ``key``, which no node hosts.

        Their actors died with their node or wait for a placement that cannot
        happen, and Ray would hold such a call open for minutes: killed, each
        comes back at once as an ``env_error`` row, so the run can stop.
        """
        for flight in in_flight.values():
            if key in self._keys_of(flight.item) and not flight.abandoned:
                logger.warning("episode %s lost its host; giving it up", flight.item.task_id)
                flight.abandoned = True
                for _, actor in flight.actors.values():
                    self._discard(actor)

    def _retries(
        self, finished: list[tuple[InFlight, EpisodeRecord]], progress: SweepProgress
    ) -> list[SweepItem]:
        """Schedule the next attempts of episodes whose infrastructure failed."""
        retries = []
        policy = self.settings.retry
        for flight, record in finished:
            result = record.result
            if not result.termination_reason.is_infra:
                continue
            progress.infra_failures += 1
            if self._draining or flight.item.attempt + 1 >= policy.max_attempts:
                continue
            retry = flight.item.model_copy(update={"attempt": flight.item.attempt + 1})
            delay = policy.backoff_sec(retry.attempt)
            logger.info(
                "retrying %s (%s) in %.1f s after infrastructure failure: %s",
                result.task_id,
                result.agent,
                delay,
                result.error,
            )
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._seq), retry))
            self._add_pending(retry, +1)
            retries.append(retry)
        return retries

    def _count(
        self,
        finished: list[tuple[InFlight, EpisodeRecord]],
        retries: list[SweepItem],
        progress: SweepProgress,
    ) -> None:
        """Count a batch that is on disk: final results are done; retried ones are not."""
        retried = {(r.agent.name, r.task_id, r.epoch) for r in retries}
        for flight, record in finished:
            item = flight.item
            if (item.agent.name, item.task_id, item.epoch) in retried:
                progress.retries += 1
                continue
            if record.result.termination_reason is TerminationReason.CANCELLED:
                progress.cancelled += 1
                continue
            progress.done += 1
            progress.successes += int(record.result.success)
            progress.timeouts += int(record.result.termination_reason is TerminationReason.TIMEOUT)

    def _outcome(self, ref: Any, flight: InFlight) -> EpisodeRecord | None:
        """The record of a finished call; a call that died becomes an error record.

        None for a follower that never ran because the reset before it failed: it
        goes back to the queue with the same attempt.
        """
        try:
            outcome = unpack(ray.get(ref), CallOutcome)
        except Exception as exc:
            if never_ran(flight, None):
                self._requeue_unrun(flight)
                return None
            call = self._call(flight.item)
            call.settings.node = node_name(flight.node_call)
            for _, actor in flight.actors.values():
                self._discard(actor)
            task = self.suite.entry(flight.item.task_id).task
            reachable = any(reaches_its_worker(s) for s in self._specs_of(flight.item.task_id))
            result = died_result(call, task, exc, flight.cancelled, flight.started_at, reachable)
            if flight.unplaced is not None:
                result = failed_result(
                    call, task, PlacementError(flight.unplaced), flight.started_at
                )
            if self._stopping:
                result.termination_reason = TerminationReason.CANCELLED
                result.error = f"the run was interrupted and the episode's call ended: {exc}"
            result.wall_time_sec = time.monotonic() - flight.submitted
            return EpisodeRecord(result=result)
        if never_ran(flight, outcome):
            self._requeue_unrun(flight)
            return None
        if flight.unplaced is not None:  # its host ran, and found another actor killed
            result = outcome.record.result
            result.termination_reason = TerminationReason.ENV_ERROR
            result.error, result.error_type = flight.unplaced, PlacementError.__name__
        for name, (_, actor) in flight.actors.items():
            if name in outcome.broken_envs:
                self._discard(actor, close=True)
            elif self.followers.has(actor) and not self._stopping:
                self._promote(actor, outcome.record)
            else:
                self.pool.release(actor)
        return outcome.record

    def _requeue_unrun(self, flight: InFlight) -> None:
        """Retire the actor whose sandbox could not be reset; its follower goes back to
        the queue."""
        self.pool.stats.failed_resets += 1
        self._discard(flight.host)
        self._requeue(flight.item)


def _host_error(records: list[EpisodeRecord]) -> HostError | None:
    """The error that ends the run when an episode found its host cannot start its sandboxes.

    A ``SandboxHostError`` (``bwrap`` or an image missing) would fail every
    episode of its kind the same way, each one costing a sandbox start: the run
    stops instead, naming the task and the fix.
    """
    for record in records:
        result = record.result
        if result.error_type == SandboxHostError.__name__:
            return HostError(
                f"task {result.task_id} found that this host cannot run its sandboxes, and no "
                f"other episode here could: {result.error}. The run stopped; what finished is "
                f"recorded: fix the host, then resume with --resume {result.run_id}"
            )
    return None


def _pop(ready: list[Any], in_flight: dict[Any, InFlight]) -> list[tuple[Any, InFlight]]:
    return [(ref, in_flight.pop(ref)) for ref in ready]
