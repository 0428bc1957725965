"""Sweeps on a local multi-node Ray cluster: throughput, dispatch latency, pools, memory.

Each measured sweep runs in its own process, which starts a real Ray cluster on
this machine (a head plus N worker nodes, each hosting `local` sandboxes), runs
the real runner on a suite of one-action episodes (at most 100 tasks, repeated
as epochs, so a longer sweep is more episodes of the same suite), and reports:

* episodes/s over the whole sweep;
* dispatch latency, p50 and p95: from the scheduler's submission of an
  episode to its first action (the step's timestamp);
* the pool hit rate (environments served warm / served);
* the driver's peak resident memory (ru_maxrss of the sweep's process when the
  run returns, before the figures are read back from the results).

The parent prints one table: pooled sweeps over 2 and 4 nodes, the same sweep
unpooled, and the driver's memory for a short and a long sweep (flat memory
means the driver keeps no per-episode state).

Each sweep's figures are printed as it finishes (a cluster start and a sweep
take tens of seconds on a small machine), then the table.

Usage: python scripts/bench_cluster.py [--episodes 300] [--memory 300,1500]
       [--backend local|docker] [--full | --smoke] [--only-memory]

The default is sized to finish in a few minutes on 2 cores; ``--full`` runs the
figures the issue tracks (2,000 episodes per sweep; driver memory at 1,000 and
10,000 episodes), and ``--smoke`` (one pooled sweep of 4 episodes on 1 node)
only shows that the script runs; ``tests/test_bench_scripts.py`` runs it in CI.
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
    from crabray.run import RunOptions, run_suite

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
        options = RunOptions(
            suite=str(suite),
            agents=[agent_spec("oracle")],
            out_dir=Path(tmp) / "out",
            concurrency=concurrency,
            pooling=pooling,
            epochs=max(1, episodes // tasks),
        )
        started = time.perf_counter()
        summary = run_suite(
            options,
            on_submit=lambda item, t: submitted.__setitem__(
                (item.task_id, item.epoch, item.attempt), t
            ),
        )
        elapsed = time.perf_counter() - started
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        columns = ["task_id", "epoch", "attempt", "step", "timestamp"]
        steps = read_steps(options.out_dir, columns=columns)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300, help="Episodes per sweep.")
    parser.add_argument("--memory", default="300,1500", help="Sweep sizes for the memory check.")
    parser.add_argument(
        "--full", action="store_true", help="--episodes 2000 --memory 1000,10000 (tens of minutes)."
    )
    parser.add_argument(
        "--smoke", action="store_true", help="Does it run: 12 episodes, 2 nodes, no memory check."
    )
    parser.add_argument(
        "--only-memory", action="store_true", help="Only the --memory sweeps (no throughput rows)."
    )
    parser.add_argument("--concurrency", type=int, default=4, help="Episodes in flight.")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="local")
    parser.add_argument("--one", nargs=3, type=int, metavar=("NODES", "EPISODES", "POOLED"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.one:
        nodes, episodes, pooled = args.one
        print(json.dumps(one_sweep(nodes, episodes, bool(pooled), args.concurrency, args.backend)))
        return

    if args.full:
        args.episodes, args.memory = 2000, "1000,10000"
    sizes = [int(s) for s in args.memory.split(",") if s]
    sweeps = [(f"{n} nodes, pooled", n, args.episodes, True) for n in (2, 4)]
    sweeps.append(("2 nodes, unpooled", 2, args.episodes, False))
    if args.only_memory:
        sweeps = []
    sweeps += [(f"2 nodes, {size} ep", 2, size, True) for size in sizes]
    if args.smoke:
        args.concurrency, sizes, sweeps = 2, [], [("1 node, pooled", 1, 4, True)]
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
