"""Sweeps on a local multi-node Ray cluster: scaling out, throughput, dispatch, pools, memory.

The default measures scaling out (issue 26): sandbox-bound episodes (each one
action that sleeps ``--sleep`` seconds in its sandbox, so that node slots, not
this machine's cores, bound the throughput) on 1, 2, 3 and 4 worker nodes
(``--nodes``) of ``--slots`` sandboxes each, every count on a fresh cluster
started in its own process by crabray's own node start
(``crabray.cluster.runtime.nodes``, what ``crabray cluster local`` runs). It prints, per
node count:

* episodes/s at full speed (from the moment every slot had finished its first
  episode to the last episode), and its ratio to ideal: the 1-node figure
  times the nodes (target: within 1.3x);
* the start-up, in parts: the head, the worker nodes (their ``ray start``),
  the driver's connection, and the run's own start until every slot runs its
  first episode (target: no growth with the nodes);
* the same largest cluster with its worker nodes started one after another
  (how ``crabray cluster local`` started them before), measured in the same run.

All nodes share this machine's cores: a node's processes (raylet, agents, the
environment actors' workers) are started on the same 2 cores, so start-up that
does not grow on real machines still grows some here; the parts say where.

``--trivial`` runs the earlier table instead: one-action episodes that do
nothing, pooled sweeps over 2 and 4 nodes, the same unpooled, and the driver's
memory for a short and a long sweep (flat memory means the driver keeps no
per-episode state), with dispatch latency p50/p95 (from the scheduler's
submission of an episode to its first action) and the pool hit rate.

Usage: python scripts/bench_cluster.py [--nodes 1,2,3,4] [--slots 4] [--sleep 2]
       [--rounds 4] | --trivial [--episodes 300] [--memory 300,1500]
       [--backend local|docker] [--full] [--only-memory] | --smoke

``--smoke`` (one scaling sweep of 4 short episodes on 2 nodes) only shows that
the script runs; ``tests/test_bench_scripts.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

MAX_TASKS = 100
"""Tasks of the generated suite; longer sweeps run them for more epochs."""

SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, file_equals, write_file

    ENV = EnvironmentConfig(name="box", action_space=[*FILE_ACTIONS], BACKEND)
    bench = BenchmarkConfig(
        name="bench",
        environments=[ENV],
        tasks=[
            Task(
                id=f"t{i:06d}",
                description="write the number to out.txt",
                evaluator=file_equals(path="out.txt", content=str(i)),
                solution=[write_file(path="out.txt", content=str(i))],
            )
            for i in range(TASKS)
        ],
    )
    """
)


BACKENDS = {
    "local": 'backend="local"',
    "docker": 'backend="docker", backend_settings={"image": "crabray/busybox:latest"}',
}
"""How the generated suite's environment is declared, per sandbox backend."""


def one_sweep(
    nodes: int, episodes: int, pooling: bool, concurrency: int, backend: str
) -> dict[str, float]:
    """Run one sweep on a fresh cluster in this process; return its figures."""
    import ray
    from ray.cluster_utils import Cluster

    from crabray.agents import agent_spec
    from crabray.results import read_steps
    from crabray.run import RunSpec, run_suite

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(nodes):
        cluster.add_node(num_cpus=1, resources={f"crabray_{backend}": concurrency})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    submitted: dict[tuple[str, int, int], float] = {}
    tasks = min(episodes, MAX_TASKS)
    with tempfile.TemporaryDirectory(prefix="crabray-bench-cluster-") as tmp:
        suite = Path(tmp) / "suite.py"
        suite.write_text(SUITE.replace("TASKS", str(tasks)).replace("BACKEND", BACKENDS[backend]))
        options = RunSpec.of(
            suite=str(suite),
            out_dir=Path(tmp) / "out",
            concurrency=concurrency,
            pooling=pooling,
            epochs=max(1, episodes // tasks),
        )
        started = time.perf_counter()
        summary = run_suite(
            options,
            [agent_spec("oracle")],
            on_submit=lambda item, t: submitted.__setitem__(
                (item.task_id, item.epoch, item.attempt), t
            ),
        )
        elapsed = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        columns = ["task_id", "epoch", "attempt", "step", "timestamp"]
        steps = read_steps(options.results.out_dir.given, columns=columns)
    ray.shutdown()
    cluster.shutdown()
    first = steps[steps.step == 0].groupby(["task_id", "epoch", "attempt"])["timestamp"].min()
    latencies = sorted(
        (ts.to_pydatetime() - datetime.fromtimestamp(submitted[key], UTC)).total_seconds() * 1000
        for key, ts in first.items()
    )
    return {
        "episodes": summary.ran,
        "successes": summary.successes,
        "episodes_per_sec": summary.ran / elapsed,
        "dispatch_p50_ms": statistics.median(latencies),
        "dispatch_p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
        "pool_hit_rate": summary.pool_hit_rate,
        "driver_peak_mb": peak_mb,
    }


def measure(
    nodes: int, episodes: int, pooling: bool, concurrency: int, backend: str
) -> dict[str, float]:
    """``one_sweep`` in a fresh process, so its peak memory is its own."""
    command = [sys.executable, __file__, "--one", str(nodes), str(episodes), str(int(pooling))]
    command += ["--concurrency", str(concurrency), "--backend", backend]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"sweep {command[2:]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


SLEEP_SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, file_equals, run_command, write_file

    ENV = EnvironmentConfig(
        name="box", action_space=[*SHELL_ACTIONS, *FILE_ACTIONS], backend="local"
    )
    bench = BenchmarkConfig(
        name="bench",
        environments=[ENV],
        tasks=[
            Task(
                id=f"t{i:06d}",
                description="wait, then write the number to out.txt",
                evaluator=file_equals(path="out.txt", content=str(i)),
                solution=[
                    run_command(command="sleep SLEEP"),
                    write_file(path="out.txt", content=str(i)),
                ],
            )
            for i in range(TASKS)
        ],
    )
    """
)
"""Sandbox-bound episodes: a sleep in the sandbox, then the file the evaluator checks."""


def scale_sweep(
    nodes: int, serial: bool, slots: int, sleep: float, rounds: int
) -> dict[str, float]:
    """Start a head and ``nodes`` workers with crabray's node start, run a sleep sweep on them.

    The workers start together (``start_workers``), or one after another with
    ``serial`` (each ``start_node`` waits for its node to register). Every slot
    runs ``rounds`` episodes.
    """
    import ray

    from crabray.agents import agent_spec
    from crabray.cluster.runtime.nodes import NodeConfig, start_node, start_workers, stop_nodes
    from crabray.results import read_episodes, read_steps
    from crabray.run import RunSpec, run_suite

    episodes = nodes * slots * rounds
    tasks = min(episodes, MAX_TASKS)
    worker = NodeConfig(hosts={"local": slots}, num_cpus=1)
    with tempfile.TemporaryDirectory(prefix="crabray-bench-scale-") as tmp:
        state = Path(tmp) / "nodes.json"
        cpu = CpuSampler()
        t0 = time.perf_counter()
        try:
            head = start_node(NodeConfig(num_cpus=1), head_port=_free_port(), state_file=state)
            t_head = time.perf_counter()
            if serial:
                for _ in range(nodes):
                    start_node(worker, address=head.address, state_file=state)
            else:
                start_workers(worker, nodes, address=head.address, state_file=state)
            t_nodes = time.perf_counter()
            ray.init(address=head.address, log_to_driver=False, logging_level="ERROR")
            t_connect = time.perf_counter()
            suite = Path(tmp) / "suite.py"
            text = SLEEP_SUITE.replace("TASKS", str(tasks)).replace("SLEEP", f"{sleep:g}")
            suite.write_text(text)
            options = RunSpec.of(
                suite=str(suite),
                out_dir=Path(tmp) / "out",
                concurrency=nodes * slots,
                epochs=max(1, episodes // tasks),
            )
            dispatched: list[float] = []
            run_started = time.time()
            summary = run_suite(
                options, [agent_spec("oracle")], on_submit=lambda _item, t: dispatched.append(t)
            )
            t_end = time.perf_counter()
            ray.shutdown()
        finally:
            stop_nodes(state)
        first = read_steps(
            options.results.out_dir.given, columns=["task_id", "epoch", "step", "timestamp"]
        )
        ends = read_episodes(options.results.out_dir.given, columns=["finished_at"])["finished_at"]
    starts = sorted(first[first.step == 0]["timestamp"].map(lambda ts: ts.timestamp()))
    finishes = sorted(ts.timestamp() for ts in ends)
    k = nodes * slots
    busy = starts[min(k, len(starts)) - 1] - run_started  # every slot runs its first episode
    window = finishes[-1] - finishes[min(k, len(finishes)) - 1]
    return {
        "episodes": summary.ran,
        "successes": summary.successes,
        "episodes_per_sec": (len(finishes) - k) / window if window > 0 else 0.0,
        "head_sec": t_head - t0,
        "nodes_sec": t_nodes - t_head,
        "connect_sec": t_connect - t_nodes,
        "run_start_sec": busy,
        "first_dispatch_sec": min(dispatched) - run_started,
        "startup_sec": t_connect - t0 + busy,
        "startup_busy": cpu.busy(t_connect - t0 + busy),
        "whole_sec": t_end - t0,
    }


class CpuSampler:
    """This machine's CPU use over time, from /proc/stat: how busy its cores were in a window.

    All nodes of a local cluster share this machine's cores: a start-up during
    which the cores were saturated grew because of them, not because of a wait.
    """

    def __init__(self) -> None:
        import threading

        self.started = time.perf_counter()
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            fields = [float(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
            idle = fields[3] + fields[4]
            self.samples.append((time.perf_counter() - self.started, sum(fields) - idle, idle))

    def busy(self, until_sec: float) -> float:
        """The share of the machine's CPU time used from the start to ``until_sec``."""
        self._stop.set()
        window = [s for s in self.samples if s[0] <= until_sec]
        if len(window) < 2:
            return 0.0
        used = window[-1][1] - window[0][1]
        idle = window[-1][2] - window[0][2]
        return used / (used + idle) if used + idle else 0.0


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scaling(args: argparse.Namespace) -> None:
    """Episodes/s and start-up per node count, each on a fresh cluster in its own process."""
    counts = [int(n) for n in args.nodes.split(",") if n]
    runs = [(f"{n} node{'s' if n > 1 else ''}", n, False) for n in counts]
    if not args.smoke and max(counts) > 1:
        runs.append((f"{max(counts)} nodes, serial start", max(counts), True))
    print(
        f"sandbox-bound episodes (sleep {args.sleep:g} s in a local sandbox), {args.slots} slots "
        f"per node, {args.rounds} episodes per slot; load {_load()}"
    )
    rows: dict[str, dict[str, float]] = {}
    for number, (name, nodes, serial) in enumerate(runs, start=1):
        command = [sys.executable, __file__, "--scale-one", str(nodes), str(int(serial))]
        command += ["--slots", str(args.slots), "--sleep", str(args.sleep)]
        command += ["--rounds", str(args.rounds)]
        rows[name] = _child(command, {"RAY_AUTH_MODE": "token"})
        print(f"  [{number}/{len(runs)}] {name}: {rows[name]['whole_sec']:.0f} s", flush=True)
    print_scaling(rows, counts, args.slots / args.sleep)
    print(f"load after: {_load()}")


def print_scaling(rows: dict[str, dict[str, float]], counts: list[int], slot_rate: float) -> None:
    """Throughput against ideal (the 1-node figure times the nodes), and start-up in parts."""
    base = rows.get("1 node", {}).get("episodes_per_sec")
    print(
        f"{'cluster':<24} {'ep/s':>6} {'ideal/ep/s':>10} {'start-up s':>10} {'head':>6} "
        f"{'workers':>7} {'connect':>7} {'run':>6} {'1st ep':>6} {'CPU busy':>8}"
    )
    for name, r in rows.items():
        nodes = int(name.split()[0])
        ratio = (
            f"{base * nodes / r['episodes_per_sec']:.2f}" if base and r["episodes_per_sec"] else "-"
        )
        print(
            f"{name:<24} {r['episodes_per_sec']:>6.2f} {ratio:>10} {r['startup_sec']:>10.1f} "
            f"{r['head_sec']:>6.1f} {r['nodes_sec']:>7.1f} {r['connect_sec']:>7.1f} "
            f"{r['run_start_sec']:>6.1f} {r['first_dispatch_sec']:>6.1f} "
            f"{r['startup_busy']:>8.0%}"
        )
    print(
        "start-up: from nothing to every slot running its first episode: the head's and the "
        "worker nodes' `ray start`, the driver's connection, the run until then (1st ep: until "
        "its first dispatch); CPU busy: this machine's cores during it, other users included"
    )
    print(
        f"ideal/ep/s: the 1-node figure times the nodes over the measured (target <= 1.3); "
        f"slots over sleep would give {slot_rate:.2f} ep/s per node"
    )
    if len(counts) > 1:
        first, last = rows[next(iter(rows))], rows[f"{counts[-1]} nodes"]
        growth = last["startup_sec"] / first["startup_sec"]
        print(f"start-up, {counts[-1]} vs {counts[0]} nodes: {growth:.2f}x  (target: no growth)")


def _child(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run one measurement in a fresh process; its last line of output is its figures."""
    import os

    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env={**os.environ, **env}
    )
    if done.returncode != 0:
        raise SystemExit(f"sweep {command[2:]} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1,2,3,4", help="Worker node counts to scale over.")
    parser.add_argument("--slots", type=int, default=4, help="Sandboxes per worker node.")
    parser.add_argument("--sleep", type=float, default=2.0, help="Seconds each episode sleeps.")
    parser.add_argument("--rounds", type=int, default=4, help="Episodes per slot.")
    parser.add_argument("--trivial", action="store_true", help="The trivial-episode sweeps.")
    parser.add_argument("--episodes", type=int, default=300, help="Episodes per trivial sweep.")
    parser.add_argument("--memory", default="300,1500", help="Sweep sizes for the memory check.")
    parser.add_argument(
        "--full", action="store_true", help="--episodes 2000 --memory 1000,10000 (tens of minutes)."
    )
    parser.add_argument(
        "--smoke", action="store_true", help="Does it run: 4 short episodes on 2 nodes."
    )
    parser.add_argument(
        "--only-memory", action="store_true", help="Only the --memory sweeps (no throughput rows)."
    )
    parser.add_argument("--concurrency", type=int, default=4, help="Episodes in flight.")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="local")
    parser.add_argument("--one", nargs=3, type=int, metavar=("NODES", "EPISODES", "POOLED"))
    parser.add_argument("--scale-one", nargs=2, type=int, metavar=("NODES", "SERIAL"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.one:
        nodes, episodes, pooled = args.one
        print(json.dumps(one_sweep(nodes, episodes, bool(pooled), args.concurrency, args.backend)))
        return
    if args.scale_one:
        nodes, serial = args.scale_one
        figures = scale_sweep(nodes, bool(serial), args.slots, args.sleep, args.rounds)
        print(json.dumps(figures))
        return
    if args.smoke:
        args.nodes, args.slots, args.sleep, args.rounds = "2", 1, 0.2, 2
    if not (args.trivial or args.full or args.only_memory):
        scaling(args)
        return
    trivial(args)


def trivial(args: argparse.Namespace) -> None:
    """The trivial-episode sweeps: pooled and unpooled throughput, dispatch, driver memory."""
    if args.full:
        args.episodes, args.memory = 2000, "1000,10000"
    sizes = [int(s) for s in args.memory.split(",") if s]
    sweeps = [(f"{n} nodes, pooled", n, args.episodes, True) for n in (2, 4)]
    sweeps.append(("2 nodes, unpooled", 2, args.episodes, False))
    if args.only_memory:
        sweeps = []
    sweeps += [(f"2 nodes, {size} ep", 2, size, True) for size in sizes]
    print(f"one-action episodes on the {args.backend} backend, concurrency {args.concurrency}")
    print(f"{len(sweeps)} sweeps, each on a fresh local cluster:", flush=True)
    rows: dict[str, dict[str, float]] = {}
    for number, (name, nodes, episodes, pooled) in enumerate(sweeps, start=1):
        started = time.perf_counter()
        rows[name] = measure(nodes, episodes, pooled, args.concurrency, args.backend)
        print(
            f"  [{number}/{len(sweeps)}] {name}: {time.perf_counter() - started:.0f} s", flush=True
        )
    print_table(rows)
    if "2 nodes, unpooled" in rows:
        speedup = (
            rows["2 nodes, pooled"]["episodes_per_sec"]
            / rows["2 nodes, unpooled"]["episodes_per_sec"]
        )
        print(
            f"pooled / unpooled throughput: {speedup:.2f}  "
            "(target >= 3 on the docker backend; a local sandbox starts in milliseconds)"
        )
    if len(sizes) > 1:
        first, last = rows[f"2 nodes, {sizes[0]} ep"], rows[f"2 nodes, {sizes[-1]} ep"]
        growth = last["driver_peak_mb"] / first["driver_peak_mb"] - 1
        print(
            f"driver memory, {sizes[-1]} vs {sizes[0]} episodes: {growth:+.0%}  (target within 20%)"
        )


def print_table(rows: dict[str, dict[str, float]]) -> None:
    """One line per sweep: throughput, dispatch latency, pool hits, driver memory."""
    header = f"{'sweep':<20} {'episodes':>8} {'ep/s':>7} {'p50 ms':>8} {'p95 ms':>8}"
    print(header + f" {'pool hits':>9} {'driver MB':>9}")
    for name, r in rows.items():
        print(
            f"{name:<20} {r['episodes']:>8.0f} {r['episodes_per_sec']:>7.1f} "
            f"{r['dispatch_p50_ms']:>8.1f} {r['dispatch_p95_ms']:>8.1f} "
            f"{r['pool_hit_rate']:>9.2f} {r['driver_peak_mb']:>9.0f}"
        )


if __name__ == "__main__":
    main()
