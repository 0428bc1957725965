"""Episode throughput: in-process versus local Ray at concurrency 1 and 2.

Generates a suite of N trivial one-action tasks on the local backend and runs
the oracle on it three ways, each writing its results to Parquet as a real run
does:

* in-process: one loop, one pooled sandbox, no Ray;
* local Ray at concurrency 1 and 2: the real scheduler, actors and episode jobs.

Ray itself is started before timing, but each Ray run starts its own pool of
environment actors (new processes), as a real run does. Prints, per mode, the
overall episodes/s, the time to the first finished episode (the cold start),
and the steady-state episodes/s after it; then the steady-state ratio of Ray at
concurrency 2 to in-process. The target on a 2-core machine: at least 1.

Usage: python scripts/bench_episodes.py [--tasks N] [--repeats R] [--smoke]

``--smoke`` (10 tasks, one repeat, a short warm-up) only shows that the
script runs on today's code; ``tests/test_bench_scripts.py`` runs it in CI.
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


class Timing:
    """When each episode of a run finished, to split cold start from steady state."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.finished: list[float] = []

    def mark(self, count: int) -> None:
        now = time.perf_counter() - self.t0
        self.finished.extend([now] * (count - len(self.finished)))

    def figures(self) -> tuple[float, float, float]:
        """Overall episodes/s, seconds to the first episode, steady-state episodes/s."""
        n, first, last = len(self.finished), self.finished[0], self.finished[-1]
        steady = (n - 1) / (last - first) if last > first else float("nan")
        return n / last, first, steady


def in_process(suite_path: Path, out: Path) -> Timing:
    """A plain loop over the tasks with one reused local sandbox, writing results."""
    from crabray.agents import agent_spec, create_agent
    from crabray.backends import create_backend
    from crabray.episode import EpisodeSettings, run_episode
    from crabray.formats import load_suite, resolve_suite
    from crabray.results import ResultSink

    suite = load_suite(resolve_suite(suite_path))
    sink = ResultSink(out, "inprocess")
    entries = list(suite.entries.values())
    timing = Timing()
    backend = create_backend(entries[0].benchmark.environments[0])
    backend.start()
    for done, entry in enumerate(entries, start=1):
        backend.reset()
        settings = EpisodeSettings(run_id="inprocess", suite="bench", agent="oracle")
        agent = create_agent(agent_spec("oracle"))
        record = run_episode(entry.benchmark, entry.task, agent, {"box": backend}, settings)
        assert record.result.success, record.result.error
        sink.write([record])
        timing.mark(done)
    backend.close()
    return timing


def on_ray(suite_path: Path, out: Path, concurrency: int) -> Timing:
    """The real runner on the connected local Ray instance."""
    from crabray.agents import agent_spec
    from crabray.run import RunSpec, run_suite

    options = RunSpec.of(suite=str(suite_path), out_dir=out, concurrency=concurrency)
    timing = Timing()
    summary = run_suite(options, [agent_spec("oracle")], on_progress=lambda p: timing.mark(p.done))
    assert summary.successes == summary.ran == summary.planned, summary
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=300, help="Tasks in the generated suite.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs of each mode.")
    parser.add_argument(
        "--smoke", action="store_true", help="A quick check that it runs: 10 tasks, 1 repeat."
    )
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.repeats = 10, 1
    logging.basicConfig(level=logging.WARNING)

    from crabray.cluster.runtime.ray_runtime import connect

    with tempfile.TemporaryDirectory(prefix="crabray-bench-") as tmp:
        root = Path(tmp)
        suite = root / "bench_suite.py"
        suite.write_text(SUITE.replace("N_TASKS", str(args.tasks)))
        warmup = root / "warmup_suite.py"
        warmup.write_text(SUITE.replace("N_TASKS", "4" if args.smoke else "20"))

        # The local instance must host the suite's sandboxes, as `run_suite` would
        # start it: two slots per episode in flight at the highest concurrency.
        connect(hosts={"local": 4})
        on_ray(warmup, root / "warmup", 2)

        modes = {
            "in-process": lambda r: in_process(suite, root / f"inproc-{r}"),
            "ray c=1": lambda r: on_ray(suite, root / f"ray1-{r}", 1),
            "ray c=2": lambda r: on_ray(suite, root / f"ray2-{r}", 2),
        }
        figures: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
        for repeat in range(args.repeats):
            for mode, run in modes.items():
                figures[mode].append(run(repeat).figures())

    print(f"{args.tasks} one-action episodes on the local backend; median of {args.repeats} runs")
    print(f"{'mode':<12} {'overall ep/s':>13} {'first episode s':>16} {'steady ep/s':>12}")
    steady: dict[str, float] = {}
    for mode, values in figures.items():
        overall, first, steady[mode] = (statistics.median(v) for v in zip(*values, strict=True))
        print(f"{mode:<12} {overall:>13.1f} {first:>16.2f} {steady[mode]:>12.1f}")
    ratio = steady["ray c=2"] / steady["in-process"]
    print(f"steady-state ray c=2 / in-process: {ratio:.2f}  (target >= 1.0)")


if __name__ == "__main__":
    main()
