"""Benchmark the leaderboard on a large synthetic results dataset.

Generates episode and step rows in the real schema (``EPISODES_SCHEMA`` and
``STEPS_SCHEMA``, written in the real hive layout as large Parquet part files
(the run id the folder's name, not a column of the files, as the sink writes them),
vectorised with numpy/pyarrow), then times each reading phase in a child process
of its own, so that each phase's peak memory (``ru_maxrss``) is its own:

- ``leaderboard``: ``read_episode_table`` of the columns the leaderboard needs
  (an Arrow table, as the CLI reads them), then ``leaderboard_table()`` (pass@k
  included: every task has several epochs);
- ``breakdown-tag``: the same plus ``tags``, then ``breakdown(..., "tag")``;
- ``compare``: ``compare_runs`` between two runs;
- ``steps-one-run``: ``read_steps`` of one run (what a report reads per run);
- ``cli``: ``crabray leaderboard DATA``, the whole process a user waits for;
- ``cli-by-tag`` and ``cli-compare``: the same with ``--by tag`` and with
  ``--compare`` of two runs (on Arrow, as the plain leaderboard);
- ``duckdb``: the leaderboard's counts and means computed by DuckDB over the
  same files in a process that imports only duckdb (skipped when duckdb is not
  installed): the baseline ``cli`` is compared with (issue 16: within 1.2x).

Each phase's line shows its wall time (``process_sec``) and its CPU time
(``cpu_sec``, user + system over all threads); on a busy machine the CPU ratio
is the steadier of the two.

Targets (issue 6): the leaderboard over 1,000,000 episodes in under 5 s and 2 GB.

Usage::

    .venv/bin/python scripts/bench_leaderboard.py                       # 1M episodes, 10M steps
    .venv/bin/python scripts/bench_leaderboard.py --episodes 100000 --steps 1000000

``--smoke`` (2,000 episodes, 4,000 steps) only shows that the script runs on
today's code; ``tests/test_bench_scripts.py`` runs it in CI.

The data goes to a temporary directory that is deleted at the end (``--keep DIR``
writes it there instead and keeps it; ``--data DIR`` reuses such a directory).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from crabray.core.result import attribution_of
from crabray.results import EPISODES_SCHEMA, STEPS_SCHEMA

logger = logging.getLogger("bench_leaderboard")

RUNS = 10
AGENTS = [
    ("react-4o", "gpt-4o"),
    ("react-mini", "gpt-4o-mini"),
    ("planner-4o", "gpt-4o"),
    ("oracle", None),
]
EPOCHS = 5
TAG_POOL = ["terminal", "files", "desktop", "browser", "easy", "medium", "hard", "office", "git"]
REASONS = ["success", "agent_complete", "agent_fail", "max_steps", "timeout", "token_limit"]
INFRA_SHARE = 0.02
START_US = 1_795_000_000_000_000  # 2026-11-18, in microseconds since the epoch
TIMESTAMP = pa.timestamp("us", tz="UTC")


def _strings(prefix: str, numbers: np.ndarray) -> pa.Array:
    """``prefix<number>`` for every number, built by Arrow (no Python loop)."""
    import pyarrow.compute as pc

    digits = pc.cast(pa.array(numbers), pa.string())
    return pc.binary_join_element_wise(pa.scalar(prefix), digits, "")


def _tags_per_task(rng: np.random.Generator, tasks: int) -> pa.ListArray:
    counts = rng.integers(1, 4, size=tasks)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    values = pa.array(np.array(TAG_POOL)[rng.integers(0, len(TAG_POOL), size=offsets[-1])])
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def generate(out: Path, episodes: int, steps: int, seed: int = 0) -> None:
    """Write ``episodes`` episode rows and about ``steps`` step rows under ``out``.

    Episodes form RUNS runs x len(AGENTS) agents x tasks x EPOCHS epochs; a share
    of them (INFRA_SHARE) also has a superseded ``env_error`` attempt row, so the
    reader's deduplication has work to do. One episodes file and one steps file
    per run, as a compacted run leaves them.
    """
    rng = np.random.default_rng(seed)
    per_run = episodes // RUNS
    keys = per_run // (1 + INFRA_SHARE)
    tasks = max(1, int(keys // (len(AGENTS) * EPOCHS)))
    keyed = tasks * len(AGENTS) * EPOCHS
    retried = per_run - keyed
    task_names = _strings("task-", np.arange(tasks))
    task_tags = _tags_per_task(rng, tasks)
    task_descriptions = _strings("Do the thing number ", np.arange(tasks))
    graph = pa.array(['{"nodes": ["a", "b", "c"], "edges": [[0, 2], [1, 2]]}'] * tasks)
    difficulty = rng.random(tasks)
    steps_per_episode = max(1, round(steps / episodes))
    for run in range(RUNS):
        run_id = f"bench-{run:02d}"
        agent_index = np.repeat(np.arange(len(AGENTS)), tasks * EPOCHS)
        task_index = np.tile(np.repeat(np.arange(tasks), EPOCHS), len(AGENTS))
        epoch = np.tile(np.arange(EPOCHS), tasks * len(AGENTS))
        attempt = np.zeros(keyed, np.int64)
        # Retried episodes: an env_error row at attempt 0, the kept row at attempt 1.
        again = rng.choice(keyed, size=retried, replace=False)
        attempt[again] = 1
        agent_index = np.concatenate([agent_index, agent_index[again]])
        task_index = np.concatenate([task_index, task_index[again]])
        epoch = np.concatenate([epoch, epoch[again]])
        attempt = np.concatenate([attempt, np.zeros(retried, np.int64)])
        rows = len(attempt)
        skill = np.array([0.7, 0.5, 0.6, 1.0])[agent_index]
        success = rng.random(rows) < skill * (1.0 - 0.5 * difficulty[task_index])
        reason_index = np.where(success, 0, rng.integers(1, len(REASONS), size=rows))
        reasons = np.array(REASONS, dtype=object)[reason_index]
        # Superseded attempts, and a few episodes whose last attempt failed too.
        infra = np.concatenate([rng.random(keyed) < INFRA_SHARE / 4, np.ones(retried, bool)])
        reasons[infra] = "env_error"
        success[infra] = False
        score = np.where(success, 1.0, rng.random(rows) * 0.5)
        n_steps = rng.integers(1, 2 * steps_per_episode, size=rows)
        tokens_in = rng.integers(500, 50_000, size=rows) * (agent_index < 3)
        tokens_out = tokens_in // 10
        started = START_US + rng.integers(0, 86_400_000_000, size=rows)
        wall = rng.random(rows) * 300.0
        agent_names = np.array([name for name, _ in AGENTS], dtype=object)[agent_index]
        models = np.array([model for _, model in AGENTS], dtype=object)[agent_index]
        episode_ids = _strings(f"{run_id}-", np.arange(rows))
        columns = {
            "episode_id": episode_ids,
            "run_id": pa.array([run_id] * rows),
            "suite": pa.array(["tasks/bench"] * rows),
            "task_id": task_names.take(pa.array(task_index)),
            "tags": task_tags.take(pa.array(task_index)),
            "agent": pa.array(agent_names, pa.string()),
            "model": pa.array(models, pa.string()),
            "epoch": pa.array(epoch),
            "attempt": pa.array(attempt),
            "termination_reason": pa.array(reasons, pa.string()),
            "success": pa.array(success),
            "score": pa.array(score),
            "completeness": pa.array(np.where(success, 1.0, score)),
            "checkpoints": pa.array([[]] * rows, EPISODES_SCHEMA.field("checkpoints").type),
            "steps": pa.array(n_steps),
            "action_errors": pa.array(rng.integers(0, 3, size=rows)),
            "tokens_in": pa.array(tokens_in),
            "tokens_out": pa.array(tokens_out),
            "model_calls": pa.array(n_steps * (agent_index < 3)),
            "model_latency_sec": pa.array(n_steps * 0.8),
            "cost_usd": pa.array(tokens_in * 2.5e-6 + tokens_out * 1e-5),
            "wall_time_sec": pa.array(wall),
            "setup_time_sec": pa.array(wall * 0.1),
            "node": pa.array(["node-1"] * rows),
            "error": pa.nulls(rows, pa.string()),
            "error_type": pa.nulls(rows, pa.string()),
            # Every episode's attribution, by the one rule the sink applies.
            "attribution": pa.array(
                [attribution_of(reason, None).value for reason in reasons], pa.string()
            ),
            "description": task_descriptions.take(pa.array(task_index)),
            "graph_json": graph.take(pa.array(task_index)),
            "conversation_json": pa.array([""] * rows),
            "setup_output": pa.array([""] * rows),
            "started_at": pa.array(started, TIMESTAMP),
            "finished_at": pa.array(started + (wall * 1e6).astype(np.int64), TIMESTAMP),
        }
        for field in EPISODES_SCHEMA:  # columns added to the schema since: null
            columns.setdefault(field.name, pa.nulls(rows, field.type))
        table = pa.Table.from_pydict(columns, schema=EPISODES_SCHEMA)
        directory = out / "episodes" / f"run_id={run_id}"
        directory.mkdir(parents=True, exist_ok=True)
        written = table.drop_columns(["run_id"])  # the folder names the run, as the sink's
        pq.write_table(written, directory / "part-0-bench.parquet", compression="zstd")
        _write_steps(out, run_id, table, steps // RUNS, rng)
        logger.info("run %s: %d episode rows", run_id, rows)


def _write_steps(
    out: Path, run_id: str, episodes: pa.Table, total: int, rng: np.random.Generator
) -> None:
    """About ``total`` step rows for the episodes of one run, spread evenly over them."""
    rows = episodes.num_rows
    per = np.full(rows, total // rows, np.int64)
    per[: total - per.sum()] += 1
    owner = pa.array(np.repeat(np.arange(rows), per))
    step = np.arange(len(owner)) - np.repeat(np.cumsum(per) - per, per)
    n = len(owner)
    columns = {
        "episode_id": episodes.column("episode_id").take(owner),
        "run_id": pa.array([run_id] * n),
        "task_id": episodes.column("task_id").take(owner),
        "agent": episodes.column("agent").take(owner),
        "epoch": episodes.column("epoch").take(owner),
        "attempt": episodes.column("attempt").take(owner),
        "step": pa.array(step),
        "call_index": pa.array(np.zeros(n, np.int64)),
        "env": pa.array(["terminal"] * n),
        "action": pa.array(np.array(["shell", "write_file", "submit"])[step % 3]),
        "arguments_json": pa.array(['{"cmd": "ls -la"}'] * n),
        "result": pa.array(["total 0"] * n),
        "error": pa.nulls(n, pa.string()),
        "agent_message": pa.array(["Let me look at the files."] * n),
        "observation": pa.nulls(n, pa.string()),
        "screenshot_path": pa.nulls(n, pa.string()),
        "graph_passed": pa.ListArray.from_arrays(
            pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.int64())
        ),
        "duration_sec": pa.array(rng.random(n)),
        "graph_passed_nodes": pa.array(np.minimum(step, 3)),
        "graph_total_nodes": pa.array(np.full(n, 3, np.int64)),
        "completeness": pa.array(np.minimum(step, 3) / 3.0),
        "timestamp": pa.array(START_US + step * 1_000_000, TIMESTAMP),
    }
    table = pa.Table.from_pydict(columns, schema=STEPS_SCHEMA).drop_columns(["run_id"])
    directory = out / "steps" / f"run_id={run_id}"
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / "part-0-bench.parquet", compression="zstd")


def _phase(name: str, data: Path) -> dict[str, float]:
    """Run one phase in this process; return its timings and this process's peak RSS."""
    from crabray.results import (
        LEADERBOARD_INPUT_COLUMNS,
        breakdown,
        compare_runs,
        leaderboard_table,
        read_episode_table,
        read_episodes,
        read_steps,
    )

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if name == "leaderboard":
        from crabray.results.store.dataset import use_system_allocator

        use_system_allocator()  # what `crabray leaderboard` does first
        # As `crabray leaderboard` reads them: an Arrow table, in the files' order.
        rows = read_episode_table(data, columns=list(LEADERBOARD_INPUT_COLUMNS))
        timings["read_sec"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        board = leaderboard_table(rows)
        timings["aggregate_sec"] = time.perf_counter() - t1
        timings["rows_in"] = rows.num_rows
        timings["rows_out"] = board.num_rows
    elif name == "breakdown-tag":
        episodes = read_episodes(data, columns=[*LEADERBOARD_INPUT_COLUMNS, "tags"])
        timings["read_sec"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        table = breakdown(episodes, "tag")
        timings["aggregate_sec"] = time.perf_counter() - t1
        timings["rows_out"] = len(table)
    elif name == "compare":
        episodes = read_episodes(data, columns=list(LEADERBOARD_INPUT_COLUMNS))
        timings["read_sec"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        comparison = compare_runs(episodes, "bench-00", "bench-01")
        timings["aggregate_sec"] = time.perf_counter() - t1
        timings["rows_out"] = len(comparison.tasks)
    elif name == "steps-one-run":
        steps = read_steps(data, run_id="bench-00")
        timings["read_sec"] = time.perf_counter() - t0
        timings["rows_out"] = len(steps)
    else:
        raise SystemExit(f"unknown phase {name!r}")
    timings["total_sec"] = time.perf_counter() - t0
    timings["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return timings


DUCKDB_QUERY = """
    WITH latest AS (
        SELECT agent, model, task_id, termination_reason, success, score, completeness,
               steps, tokens_in, tokens_out, model_calls, cost_usd
        FROM read_parquet('{files}', hive_partitioning = true)
        QUALIFY row_number() OVER (
            PARTITION BY run_id, agent, task_id, epoch
            ORDER BY attempt DESC, finished_at DESC, episode_id DESC) = 1
    )
    SELECT agent, model, count(*) AS episodes,
           sum(CASE WHEN success THEN 1 ELSE 0 END) AS successes,
           avg(CASE WHEN success THEN 1.0 ELSE 0.0 END)
               FILTER (WHERE termination_reason NOT IN ({infra})) AS success_rate,
           avg(score) AS mean_score, stddev_samp(score) / sqrt(count(*)) AS score_se,
           avg(completeness), avg(steps), sum(tokens_in), sum(tokens_out),
           sum(model_calls), sum(cost_usd)
    FROM latest GROUP BY agent, model ORDER BY success_rate DESC, mean_score DESC
"""
"""The DuckDB baseline: the leaderboard's counts and means per agent and model over
the same files, the latest attempt of each episode, infrastructure failures not
graded (no pass@k). It runs in a process of its own that imports only duckdb."""

DUCKDB_PROGRAM = (
    "import duckdb, json, sys; rows = duckdb.sql(sys.argv[1]).fetchall(); "
    'print(json.dumps({"rows_out": len(rows)}))'
)


def _duckdb_command(data: Path) -> list[str]:
    from crabray.results.store.dataset import INFRA_REASONS

    infra = ", ".join(f"'{reason}'" for reason in sorted(INFRA_REASONS))
    files = str(data / "episodes" / "*" / "*.parquet")
    query = DUCKDB_QUERY.replace("{files}", files).replace("{infra}", infra)
    return [sys.executable, "-c", DUCKDB_PROGRAM, query]


PHASES = (
    "leaderboard",
    "cli",
    "duckdb",
    "cli-by-tag",
    "cli-compare",
    "breakdown-tag",
    "compare",
    "steps-one-run",
)
_CLI = [sys.executable, "-m", "crabray", "leaderboard"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1_000_000, help="episode rows")
    parser.add_argument("--steps", type=int, default=10_000_000, help="step rows")
    parser.add_argument("--keep", type=Path, help="write the data here and keep it")
    parser.add_argument("--data", type=Path, help="reuse data written by an earlier --keep")
    parser.add_argument("--smoke", action="store_true", help="2,000 episodes: does it run?")
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()
    if args.smoke:
        args.episodes, args.steps = 2_000, 4_000
    if args.phase:
        print(json.dumps(_phase(args.phase, args.data)))
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory(prefix="crabray-bench-") as tmp:
        data = args.data or args.keep or Path(tmp)
        if args.data is None:
            t0 = time.perf_counter()
            generate(data, args.episodes, args.steps)
            size = sum(f.stat().st_size for f in data.rglob("*.parquet")) / 2**20
            print(f"generate: {time.perf_counter() - t0:.1f} s, {size:.0f} MB of Parquet in {data}")
        results: dict[str, dict[str, float]] = {}
        for phase in PHASES:
            if phase == "duckdb" and importlib.util.find_spec("duckdb") is None:
                print("duckdb         skipped: not installed (`.venv/bin/pip install duckdb`)")
                continue
            started = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            command = {
                "cli": [*_CLI, str(data)],
                "cli-by-tag": [*_CLI, str(data), "--by", "tag"],
                "cli-compare": [*_CLI, str(data), "--compare", "bench-00", "bench-01"],
                "duckdb": _duckdb_command(data),
            }.get(phase, [sys.executable, __file__, "--phase", phase, "--data", str(data)])
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                print(f"{phase}: FAILED\n{done.stderr}", file=sys.stderr)
                raise SystemExit(1)
            output = ["{}"] if phase.startswith("cli") else done.stdout.strip().splitlines()
            results[phase] = result = json.loads(output[-1])
            result["process_sec"] = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU seconds (user + system, every thread): steadier than wall time on a
            # machine shared with other work, though not what a user waits for.
            result["cpu_sec"] = (after.ru_utime - before.ru_utime) + (
                after.ru_stime - before.ru_stime
            )
            details = "  ".join(
                f"{key}={value:.2f}" if isinstance(value, float) else f"{key}={value}"
                for key, value in result.items()
            )
            print(f"{phase:14s} {details}")
        board = results["leaderboard"]
        ok = board["total_sec"] < 5.0 and board["peak_rss_mb"] < 2048
        print(
            f"target (leaderboard < 5 s and < 2048 MB): {'met' if ok else 'MISSED'} "
            f"({board['total_sec']:.2f} s, {board['peak_rss_mb']:.0f} MB)"
        )
        if "duckdb" in results:
            cli, duck = results["cli"]["process_sec"], results["duckdb"]["process_sec"]
            print(
                f"`crabray leaderboard` / DuckDB, whole processes: {cli / duck:.2f} "
                f"({cli:.2f} s against {duck:.2f} s; target <= 1.2)"
            )
            cli_cpu, duck_cpu = results["cli"]["cpu_sec"], results["duckdb"]["cpu_sec"]
            print(
                f"same, CPU time (user + system): {cli_cpu / duck_cpu:.2f} "
                f"({cli_cpu:.2f} s against {duck_cpu:.2f} s)"
            )


if __name__ == "__main__":
    main()
