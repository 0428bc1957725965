"""What 100 nodes and 10,000 concurrent sandboxes would cost: measured small, extrapolated.

This machine cannot start 100 nodes (2 cores, 24 GiB), so each part of the
plan in ``docs/scale.md`` is measured here at a size it can hold, with crabray's
and Ray's real code, and extrapolated linearly to the target (the figures say
which are extrapolations):

* **GCS**: a real local cluster (a head and two workers, started by crabray's
  own node start). Lightweight actors made alive in steps (``--alive``), then
  actors that can never be placed (``--pending``: the GCS holds their records,
  no process runs): the GCS's resident memory per actor, actors created per
  second, the latency of ``ray.nodes()`` (the scheduler's once-a-second capacity
  poll) and a Ray worker's memory per alive actor (what a node pays per sandbox).
* **Driver**: per episode in flight, the driver's own records (``SweepItem``,
  ``InFlight``, the packed ``EpisodeCall``), and Ray's: one call queued on an
  unplaced actor per episode (driver memory per call), and the cost of the
  scheduler's ``ray.wait`` over every reference in flight, which it makes on
  each wake-up; then that wait pattern itself over ``--inflight`` episodes
  that end all the time (sleeps in one async actor, ``--loop-episode-sec``
  long): the driver's CPU when it wakes for each one that ends, and when it
  waits for 1% of them at once.
* **Results**: crabray's real ``ResultSink`` writing the batches a sweep of
  ``--sandboxes`` sandboxes with ``--episode-sec`` episodes produces (one batch
  per flush, every 0.5 s), then compacting them: part files per second, the
  write time per flush against its 0.5 s budget, and the compaction's time for
  two sweep lengths, extrapolated to an hour.

Every figure is printed with the machine's load. Usage:

    python scripts/sim_scale.py [--alive 10,20,40] [--pending 2000] [--inflight 10000]
                                [--minutes 2,8] [--smoke]

``--smoke`` runs every part at a tiny size (``tests/test_bench_scripts.py``).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

TARGET_SANDBOXES = 10_000
TARGET_NODES = 100
FLUSH_SEC = 0.5
"""``_FLUSH_SEC`` of ``crabray/cluster/sweep/records.py``: a batch goes to disk at most
this long after it finished."""


def load() -> str:
    """The machine's load average (1, 5, 15 min): shown beside every figure."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def rss_mb(pid: int) -> float:
    """A process's resident memory, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pss_mb(pid: int) -> float:
    """A process's proportional memory (its shared pages divided among their sharers)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def group_pids(pgid: int, name: str) -> list[int]:
    """Processes of group ``pgid`` whose command name contains ``name``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if int(rest.split()[2]) == pgid and name in comm:
            found.append(int(proc.name))
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- GCS and Ray's side of the driver ------------------------------------------------------


def gcs_part(
    alive_steps: list[int], pending: int, inflight: int, loop_episode_sec: float, loop_sec: float
) -> None:
    """Alive and unplaceable actors on a real 3-node cluster: GCS memory, rates, latencies."""
    import ray

    from crabray.cluster.runtime.nodes import NodeConfig, start_node, start_workers, stop_nodes

    with tempfile.TemporaryDirectory(prefix="crabray-sim-") as tmp:
        state = Path(tmp) / "nodes.json"
        try:
            head = start_node(NodeConfig(num_cpus=1), head_port=free_port(), state_file=state)
            workers = NodeConfig(hosts={"sim": 10_000}, num_cpus=1)
            start_workers(workers, 2, address=head.address, state_file=state)
            ray.init(address=head.address, log_to_driver=False, logging_level="ERROR")
            (gcs,) = group_pids(head.process_group, "gcs_server")
            _alive_actors(ray, gcs, alive_steps)
            _pending_actors(ray, gcs, pending, inflight)
            _wake_ups(ray, inflight, loop_episode_sec, loop_sec)
            ray.shutdown()
        finally:
            stop_nodes(state)


def _alive_actors(ray: Any, gcs: int, steps: list[int]) -> None:
    @ray.remote(num_cpus=0, resources={"crabray_sim": 1})
    class Light:
        def ping(self) -> int:
            return os.getpid()

    base = rss_mb(gcs)
    print(f"GCS resident memory with no actors: {base:.0f} MB  (load {load()})")
    print(
        f"{'alive actors':>12} {'created/s':>9} {'GCS MB':>7} {'MB/actor':>8} {'worker MB':>9} "
        f"{'ray.nodes() ms':>14}"
    )
    actors: list[Any] = []
    for target in steps:
        started = time.perf_counter()
        new = [Light.remote() for _ in range(target - len(actors))]  # type: ignore[attr-defined]
        pids = ray.get([a.ping.remote() for a in new])
        rate = len(new) / (time.perf_counter() - started)
        actors += new
        worker = statistics.median(rss_mb(pid) for pid in pids)
        worker_pss = statistics.median(pss_mb(pid) for pid in pids)
        gcs_mb = rss_mb(gcs)
        nodes_ms = _median_ms(ray.nodes, 20)
        print(
            f"{len(actors):>12} {rate:>9.1f} {gcs_mb:>7.0f} {(gcs_mb - base) / len(actors):>8.3f} "
            f"{worker:>9.0f} {worker_pss:>5.0f} {nodes_ms:>14.2f}"
        )
    for actor in actors:
        ray.kill(actor)
    print(
        f"  (load {load()}; worker MB, PSS: the median resident and proportional memory "
        "of one alive actor's process)"
    )


def _pending_actors(ray: Any, gcs: int, count: int, inflight: int) -> None:
    """Actors no node can place: their records in the GCS, their queued calls in the driver."""

    @ray.remote(num_cpus=0, resources={"crabray_nowhere": 1})
    class Never:
        def run_episode(self, call: bytes) -> bytes:
            return call

    payload = _packed_call_size()
    before_gcs, before_driver = rss_mb(gcs), rss_mb(os.getpid())
    started = time.perf_counter()
    actors = [Never.remote() for _ in range(count)]  # type: ignore[attr-defined]
    time.sleep(2.0)  # let the GCS register them
    rate = count / (time.perf_counter() - started - 2.0)
    gcs_mb, driver_mb = rss_mb(gcs), rss_mb(os.getpid())
    print(
        f"{count} unplaceable actors: submitted at {rate:.0f}/s; "
        f"GCS +{gcs_mb - before_gcs:.0f} MB ({(gcs_mb - before_gcs) * 1024 / count:.1f} KB/actor), "
        f"driver +{driver_mb - before_driver:.0f} MB "
        f"({(driver_mb - before_driver) * 1024 / count:.1f} KB/handle); ray.nodes() "
        f"{_median_ms(ray.nodes, 20):.2f} ms  (load {load()})"
    )
    refs: list[Any] = []
    print(f"{'calls in flight':>15} {'driver MB':>9} {'KB/call':>7} {'ray.wait(all) ms':>16}")
    base = rss_mb(os.getpid())
    for target in _steps(inflight):
        while len(refs) < target:
            actor = actors[len(refs) % len(actors)]
            refs.append(actor.run_episode.remote(os.urandom(payload)))
        grown = rss_mb(os.getpid()) - base
        wait_ms = _median_ms(lambda: ray.wait(refs, num_returns=len(refs), timeout=0), 5)
        print(f"{len(refs):>15} {grown:>9.0f} {grown * 1024 / len(refs):>7.2f} {wait_ms:>16.2f}")
    print(f"  (payload {payload} bytes: a packed EpisodeCall; load {load()})")
    for actor in actors:
        ray.kill(actor)


def _wake_ups(ray: Any, inflight: int, episode_sec: float, seconds: float) -> None:
    """The scheduler's wait pattern over ``inflight`` episodes that end all the time.

    The episodes are sleeps in one async actor (no process per episode), each
    started again as it ends, so ``inflight`` stay in flight and ``inflight /
    episode_sec`` end each second. The driver waits as ``Scheduler.run`` does: a
    ``ray.wait`` for one, then one over all to collect what ended, then a walk over
    all (deadlines); or for a share of them (1%) at once. Measured: the driver's CPU.
    """
    import asyncio
    import random

    @ray.remote(num_cpus=0, resources={"crabray_sim": 1})
    class Episodes:
        async def run(self, seconds: float) -> bytes:
            await asyncio.sleep(seconds)
            return b"record"

    print(f"{'wait for':>12} {'in flight':>9} {'ended/s':>7} {'driver CPU':>10} {'wake-ups/s':>10}")
    for label, share in (("one", 0), ("1% of them", 100)):
        host = Episodes.options(max_concurrency=inflight + 100).remote()  # type: ignore[attr-defined]
        flights = {host.run.remote(random.uniform(0, episode_sec)): 0.0 for _ in range(inflight)}
        ended = wakes = 0
        cpu, started = time.process_time(), time.perf_counter()
        while time.perf_counter() - started < seconds:
            waiting = list(flights)
            first = max(1, len(waiting) // share) if share else 1
            ready, _ = ray.wait(waiting, num_returns=first, timeout=1.0)
            wakes += 1
            if ready:
                ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
            _ = [deadline for deadline in flights.values() if deadline]
            for ref in ready:
                del flights[ref]
                flights[host.run.remote(episode_sec)] = 0.0
            ended += len(ready)
        wall = time.perf_counter() - started
        used = (time.process_time() - cpu) / wall
        print(f"{label:>12} {inflight:>9} {ended / wall:>7.0f} {used:>10.0%} {wakes / wall:>10.0f}")
        ray.kill(host)  # its episodes end with it
    print(
        f"  ({episode_sec:g} s episodes for {seconds:g} s; driver CPU: of one core; load {load()})"
    )


def _steps(top: int) -> list[int]:
    return sorted({max(1, top // 10), max(1, top // 2), top})


def _median_ms(call: Any, times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


# --- the driver's own records ----------------------------------------------------------------


def _episode_call(index: int) -> Any:
    from crabray.agents import agent_spec
    from crabray.cluster.actors.episode_call import EpisodeCall
    from crabray.episode import EpisodeLimits, EpisodeSettings
    from crabray.formats.suite import SuiteRef

    settings = EpisodeSettings(
        run_id="20261128-120000-abcdef",
        suite="bench",
        agent="oracle",
        epoch=0,
        attempt=0,
        limits=EpisodeLimits(),
    )
    return EpisodeCall(
        suite=SuiteRef(path="/srv/suites/bench/suite.py", format="python"),
        task_id=f"t{index:06d}",
        agent=agent_spec("oracle"),
        settings=settings,
    )


def _packed_call_size() -> int:
    from crabray.cluster.actors.episode_call import pack

    return len(pack(_episode_call(0)))


def driver_part(count: int) -> None:
    """The driver's own records per episode in flight, and a wake-up's walks over them."""
    from crabray.agents import agent_spec
    from crabray.cluster.actors.episode_call import pack
    from crabray.cluster.actors.inflight import InFlight, SweepItem

    agent = agent_spec("oracle")
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    flights = []
    for index in range(count):
        item = SweepItem(task_id=f"t{index:06d}", agent=agent)
        flight = InFlight(item, time.monotonic(), time.monotonic() + 600)
        flights.append((flight, pack(_episode_call(index))))
    per = (tracemalloc.get_traced_memory()[0] - before) / count
    tracemalloc.stop()
    now = time.monotonic()
    walk_ms = _median_ms(lambda: [f.deadline - now for f, _ in flights if f.deadline], 10)
    print(
        f"driver records per episode in flight (SweepItem, InFlight, packed EpisodeCall): "
        f"{per / 1024:.2f} KB; at {TARGET_SANDBOXES:,}: {per * TARGET_SANDBOXES / 2**20:.0f} MB. "
        f"One walk over {count:,} in flight (as _wait_timeout makes on every wake-up): "
        f"{walk_ms:.2f} ms  (load {load()})"
    )


# --- results: part files and their compaction ------------------------------------------------


def _record(run_id: str, index: int, steps: int) -> Any:
    from crabray.core.result import EpisodeRecord, EpisodeResult, StepRecord, TerminationReason

    start = datetime(2026, 11, 28, 12, 0, tzinfo=UTC) + timedelta(seconds=index / 100)
    result = EpisodeResult(
        run_id=run_id,
        suite="bench",
        task_id=f"t{index:07d}",
        agent="oracle",
        termination_reason=TerminationReason.SUCCESS,
        success=True,
        steps=steps,
        started_at=start,
        finished_at=start + timedelta(seconds=60),
    )
    records = [
        StepRecord(
            episode_id=result.episode_id,
            run_id=run_id,
            task_id=result.task_id,
            agent="oracle",
            step=step,
            env="box",
            action="run_command",
            arguments_json='{"command": "make test"}',
            timestamp=start + timedelta(seconds=step),
        )
        for step in range(steps)
    ]
    return EpisodeRecord(result=result, steps=records)


def results_part(sandboxes: int, episode_sec: float, minutes: list[float], steps: int) -> None:
    """The sink's part files at a 10,000-sandbox rate, and their compaction, for two lengths."""
    from crabray.results.store.sink import ResultSink

    rate = sandboxes / episode_sec
    batch = max(1, round(rate * FLUSH_SEC))
    print(
        f"{sandboxes:,} sandboxes, {episode_sec:g} s episodes: {rate:.0f} episodes/s, a flush of "
        f"{batch} every {FLUSH_SEC:g} s: {2 / FLUSH_SEC:.0f} part files/s "
        f"({2 * 3600 / FLUSH_SEC:,.0f} an hour)"
    )
    print(
        f"{'sweep':>8} {'episodes':>9} {'part files':>10} {'write ms p50':>12} {'p95':>6} "
        f"{'budget used':>11} {'compact s':>9}"
    )
    figures = []
    for length in minutes:
        flushes = max(2, round(length * 60 / FLUSH_SEC))
        with tempfile.TemporaryDirectory(prefix="crabray-sim-results-") as tmp:
            run_id = "20261128-120000-abcdef"
            sink = ResultSink(Path(tmp), run_id)
            writes = []
            for flush in range(flushes):
                records = [_record(run_id, flush * batch + i, steps) for i in range(batch)]
                started = time.perf_counter()
                sink.write(records)
                writes.append((time.perf_counter() - started) * 1000)
            parts = sum(1 for _ in Path(tmp).rglob("*.parquet"))
            started = time.perf_counter()
            sink.compact()
            compact = time.perf_counter() - started
        writes.sort()
        p50, p95 = statistics.median(writes), writes[int(0.95 * (len(writes) - 1))]
        figures.append((flushes * batch, compact))
        print(
            f"{length:>6g} m {flushes * batch:>9,} {parts:>10,} {p50:>12.1f} {p95:>6.1f} "
            f"{p50 / (FLUSH_SEC * 1000):>10.0%} {compact:>9.1f}"
        )
    if len(figures) > 1:
        (n1, c1), (n2, c2) = figures[0], figures[-1]
        per = (c2 - c1) / (n2 - n1)
        hour = rate * 3600
        print(
            f"compaction: {per * 1e6:.0f} µs per episode ({steps} steps); an hour at this rate "
            f"({hour:,.0f} episodes, {2 * 3600 / FLUSH_SEC:,.0f} part files): "
            f"~{c1 + per * (hour - n1):.0f} s (extrapolated)"
        )
    print(f"  (load {load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alive", default="10,20,40", help="Alive actor counts, in steps.")
    parser.add_argument("--pending", type=int, default=2000, help="Unplaceable actors.")
    parser.add_argument("--inflight", type=int, default=10_000, help="Calls queued on them.")
    parser.add_argument("--minutes", default="2,8", help="Sweep lengths for the results part.")
    parser.add_argument("--sandboxes", type=int, default=TARGET_SANDBOXES)
    parser.add_argument("--episode-sec", type=float, default=60.0)
    parser.add_argument("--steps", type=int, default=5, help="Steps per episode.")
    parser.add_argument("--loop-episode-sec", type=float, default=60.0)
    parser.add_argument("--loop-sec", type=float, default=20.0, help="Seconds per wait pattern.")
    parser.add_argument("--skip-gcs", action="store_true", help="No Ray cluster part.")
    parser.add_argument("--smoke", action="store_true", help="Every part, tiny.")
    args = parser.parse_args()
    # crabray's nodes use Ray's token authentication, which Ray reads when it is imported.
    os.environ["RAY_AUTH_MODE"] = "token"
    if args.smoke:
        args.alive, args.pending, args.inflight, args.minutes = "2,4", 50, 200, "0.05,0.1"
        args.loop_episode_sec, args.loop_sec = 1.0, 2.0
    print(
        f"target: {TARGET_NODES} nodes, {TARGET_SANDBOXES:,} concurrent sandboxes; load {load()}",
        flush=True,
    )
    print("\n== results: part files and compaction (crabray's ResultSink) ==", flush=True)
    results_part(
        args.sandboxes, args.episode_sec, [float(m) for m in args.minutes.split(",")], args.steps
    )
    print("\n== driver: its own records per episode in flight ==", flush=True)
    driver_part(args.inflight)
    if not args.skip_gcs:
        print("\n== GCS and Ray's driver side: a head and 2 workers on this machine ==", flush=True)
        alive = [int(n) for n in args.alive.split(",")]
        gcs_part(alive, args.pending, args.inflight, args.loop_episode_sec, args.loop_sec)
    print("\nsimulation done", flush=True)


if __name__ == "__main__":
    sys.exit(main())
