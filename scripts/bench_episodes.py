"""Episode throughput: in-process versus local Ray at concurrency 1 and 2.

Generates a suite of N trivial one-action tasks on the local backend and runs
the oracle on it three ways, each writing its results to Parquet as a real run
does:

* in-process: one loop, one pooled sandbox, no Ray;
* local Ray at concurrency 1 and 2: the real scheduler, actors and episode jobs.

Ray is started and its workers are warmed up before timing. Prints episodes/s
for each and the ratio of Ray at concurrency 2 to in-process. The target on a
2-core machine: the ratio is at least 1.

Usage: python scripts/bench_episodes.py [--tasks N] [--repeats R]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, SHELL_ACTIONS, file_equals, run_command

    ENV = EnvironmentConfig(name="box", action_space=[*SHELL_ACTIONS, *FILE_ACTIONS])
    bench = BenchmarkConfig(
        name="bench",
        environments=[ENV],
        tasks=[
            Task(
                id=f"t{i:05d}",
                description="write the number to out.txt",
                evaluator=file_equals(path="out.txt", content=str(i)),
                solution=[run_command(command=f"echo {i} > out.txt")],
            )
            for i in range(N_TASKS)
        ],
    )
    """
)


def in_process(suite_path: Path, out: Path) -> float:
    """Episodes/s of a plain loop over the tasks with one reused local sandbox."""
    from crabray.agents import agent_spec, create_agent
    from crabray.backends import create_backend
    from crabray.episode import EpisodeSettings, run_episode
    from crabray.formats import load_suite, resolve_suite
    from crabray.results import ResultSink

    suite = load_suite(resolve_suite(suite_path))
    sink = ResultSink(out, "inprocess")
    entries = list(suite.entries.values())
    backend = create_backend(entries[0].benchmark.environments[0])
    backend.start()
    t0 = time.perf_counter()
    for entry in entries:
        backend.reset()
        settings = EpisodeSettings(run_id="inprocess", suite="bench", agent="oracle")
        agent = create_agent(agent_spec("oracle"))
        record = run_episode(entry.benchmark, entry.task, agent, {"box": backend}, settings)
        assert record.result.success, record.result.error
        sink.write([record])
    elapsed = time.perf_counter() - t0
    backend.close()
    return len(entries) / elapsed


def on_ray(suite_path: Path, out: Path, concurrency: int) -> float:
    """Episodes/s of the real runner on the connected local Ray instance."""
    from crabray.agents import agent_spec
    from crabray.cluster import RunOptions, run_suite

    options = RunOptions(
        suite=str(suite_path), agents=[agent_spec("oracle")], out_dir=out, concurrency=concurrency
    )
    t0 = time.perf_counter()
    summary = run_suite(options)
    elapsed = time.perf_counter() - t0
    assert summary.successes == summary.ran == summary.planned, summary
    return summary.ran / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=300, help="Tasks in the generated suite.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs of each mode.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from crabray.cluster.ray_runtime import connect

    with tempfile.TemporaryDirectory(prefix="crabray-bench-") as tmp:
        root = Path(tmp)
        suite = root / "bench_suite.py"
        suite.write_text(SUITE.replace("N_TASKS", str(args.tasks)))
        warmup = root / "warmup_suite.py"
        warmup.write_text(SUITE.replace("N_TASKS", "20"))

        connect()
        on_ray(warmup, root / "warmup", 2)

        rates: dict[str, list[float]] = {"in-process": [], "ray c=1": [], "ray c=2": []}
        for repeat in range(args.repeats):
            rates["in-process"].append(in_process(suite, root / f"inproc-{repeat}"))
            rates["ray c=1"].append(on_ray(suite, root / f"ray1-{repeat}", 1))
            rates["ray c=2"].append(on_ray(suite, root / f"ray2-{repeat}", 2))

    print(f"{args.tasks} one-action episodes on the local backend, {args.repeats} runs each")
    print(f"{'mode':<12} {'median ep/s':>12} {'min':>8} {'max':>8}")
    for mode, values in rates.items():
        print(
            f"{mode:<12} {statistics.median(values):>12.1f} {min(values):>8.1f} {max(values):>8.1f}"
        )
    ratio = statistics.median(rates["ray c=2"]) / statistics.median(rates["in-process"])
    print(f"ray c=2 / in-process: {ratio:.2f}  (target >= 1.0)")


if __name__ == "__main__":
    main()
