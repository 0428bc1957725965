"""Bench the run's model limiter: many episodes of an LLM agent against a provider with limits.

A local multi-node cluster (``crabray cluster local``) runs ``--episodes``
episodes of a multi-step LLM agent (kind ``openai``, the three-step
``deploy-config`` task of ``tasks/demo``) at ``--concurrency``, against the mock
provider ``crabray llm serve tasks/demo --max-concurrent N --latency S`` (which
answers calls past N in flight with 429), twice: with the limiter (the agent's
defaults: adaptive, one limiter for the whole run) and without it (the agents
file's benchmark switch ``max_connections = 0``, ``rpm = 0``, ``tpm = 0``: each call
goes straight to the provider, as before the limiter). One attempt per
episode, so what the rate limits cost is not hidden by the scheduler's retries.

Usage::

    .venv/bin/python scripts/bench_models.py            # 200 episodes, c=64, 3 nodes
    .venv/bin/python scripts/bench_models.py --episodes 100 --max-concurrent 4
    .venv/bin/python scripts/bench_models.py --latency 1.0   # a third of the demand
    .venv/bin/python scripts/bench_models.py --backend-setting isolation=none
    .venv/bin/python scripts/bench_models.py --smoke    # does it run (CI)

It prints, per mode: completed episodes, episodes lost to rate limits
(``ModelUnreachableError``), 429s per 100 calls (all, and after the first 30 s of calls),
and the model's throughput as a share of what the mock can serve
(``capacity_per_sec`` of its ``GET /stats``; measured between 10% and 90% of
the calls served, so the ramp and the tail do not count), and the same share
from the first to the last moment at least twice the mock's slots of
episodes were in flight (from the rows' start and end times: the calls then exceed what the
mock serves, so only the limiter can leave a slot idle), then the ratios, and how many
workers Ray's out-of-memory killer killed on the cluster's nodes (their ``raylet.out``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]

AGENTS = """
[[agents]]
name = "bench"
kind = "openai"
model = "crabray-mock"
base_url = "{url}"
{limits}
"""

WITH_LIMITER = "rpm = 0  # the mock has no rpm limit; the rest are the defaults"
WITHOUT_LIMITER = "max_connections = 0\nrpm = 0\ntpm = 0  # the benchmark switch: no limiter"


def crabray(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crabray", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )


class Mock:
    """``crabray llm serve tasks/demo FLAGS`` on a free port, polled once a second."""

    def __init__(self, flags: list[str], log: Path) -> None:
        self.log = log
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "crabray", "llm", "serve", "tasks/demo", *flags],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + 60
        while not (found := re.search(r"http://127\.0\.0\.1:\d+/v1", log.read_text())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the mock did not start:\n{log.read_text()}")
            time.sleep(0.1)
        self.url = found.group(0)
        self.samples: list[tuple[float, float, dict[str, Any]]] = []
        """(monotonic time, wall-clock time, the mock's counts), once a second."""
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def stats(self) -> dict[str, Any]:
        response = httpx.get(self.url.removesuffix("/v1") + "/stats", timeout=30)
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            self.samples.append((time.monotonic(), time.time(), self.stats()))

    def close(self) -> None:
        self._stop.set()
        self._poller.join(5)
        self.process.terminate()
        self.process.wait(30)


def figures(mock: Mock, started: float, out: Path, mock_slots: int) -> dict[str, float]:
    """What one mode did, from the rows and the mock's counts."""
    from crabray.results import read_episodes

    final = mock.stats()
    samples = [*mock.samples, (time.monotonic(), time.time(), final)]
    episodes = read_episodes(out)
    lost = int((episodes["error_type"] == "ModelUnreachableError").sum())
    completed = int((episodes["attribution"] == "agent").sum())
    refused = sum(final["rate_limited"].values())
    calls = final["requests"]
    first_call = next((t for t, _, s in samples if s["requests"]), started)
    late = [(t, s) for t, _, s in samples if t - first_call >= 30]  # 30 s after the first call
    late_refused = late_calls = 0
    if late:
        first = late[0][1]
        late_refused = refused - sum(first["rate_limited"].values())
        late_calls = calls - first["requests"]
    served = final["served"]
    low = next((t, s["served"]) for t, _, s in samples if s["served"] >= 0.1 * served)
    high = next((t, s["served"]) for t, _, s in samples if s["served"] >= 0.9 * served)
    capacity = final.get("capacity_per_sec") or 0.0
    return {
        "episodes": len(episodes),
        "completed": completed,
        "lost": lost,
        "calls": calls,
        "429s/100": 100 * refused / calls if calls else 0.0,
        "429s/100 after 30 s": 100 * late_refused / late_calls if late_calls else 0.0,
        "served/s": _rate(low, high),
        "share": _rate(low, high) / capacity if capacity else 0.0,
        "share, demand >= 2x": _demand_share(episodes, samples, 2 * mock_slots, capacity),
    }


def _rate(low: tuple[float, int], high: tuple[float, int]) -> float:
    """Calls served per second between two samples (time, calls served so far)."""
    return (high[1] - low[1]) / (high[0] - low[0]) if high[0] > low[0] else 0.0


def _demand_share(
    episodes: Any, samples: list[tuple[float, float, dict[str, Any]]], least: int, capacity: float
) -> float:
    """The share of the mock's capacity served while at least ``least`` episodes were in
    flight (from the rows' start and end times): the seconds in which the calls waiting
    exceed what the mock can serve, so that only the limiter, not the episodes' start-up
    or the last few episodes, can leave its slots idle."""
    events = sorted(
        [(ts.timestamp(), 1) for ts in episodes["started_at"]]
        + [(ts.timestamp(), -1) for ts in episodes["finished_at"]]
    )
    in_flight, spans, since = 0, [], None
    for when, step in events:
        in_flight += step
        if in_flight >= least and since is None:
            since = when
        elif in_flight < least and since is not None:
            spans.append((since, when))
            since = None
    if not spans or not capacity:
        return 0.0
    begin, end = spans[0][0], spans[-1][1]
    inside = [(wall, s["served"]) for _, wall, s in samples if begin <= wall <= end]
    if len(inside) < 2:
        return 0.0
    return _rate(inside[0], inside[-1]) / capacity


def one_mode(args: argparse.Namespace, address: str, limits: str, work: Path) -> dict[str, float]:
    flags = ["--port", "0", "--max-concurrent", str(args.max_concurrent)]
    flags += ["--latency", str(args.latency)]
    mock = Mock(flags, work / "serve.log")
    try:
        agents = work / "agents.toml"
        agents.write_text(AGENTS.format(url=mock.url, limits=limits))
        out = work / "results"
        started = time.monotonic()
        run = crabray(
            "run", "tasks/demo", "--agent-config", str(agents), "--agent", "bench",
            "--task", "deploy-config", "--epochs", str(args.episodes),
            "--concurrency", str(args.concurrency), "--max-attempts", "1",
            "--address", address, "--out", str(out),
            *(f"--backend-setting={setting}" for setting in args.backend_setting),
        )  # fmt: skip
        if run.returncode not in (0, 1):  # 1: episodes the infrastructure failed
            raise SystemExit(f"crabray run exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
        result = figures(mock, started, out, args.max_concurrent)
        result["wall s"] = time.monotonic() - started
        return result
    finally:
        mock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=3, help="Nodes of the local cluster.")
    parser.add_argument("--max-concurrent", type=int, default=8, help="The mock's limit.")
    parser.add_argument("--latency", type=float, default=0.3, help="The mock's latency (s).")
    parser.add_argument(
        "--backend-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Passed to crabray run (e.g. isolation=none: no sandbox to set up per episode).",
    )
    parser.add_argument("--smoke", action="store_true", help="Does it run: 8 episodes, 2 nodes.")
    args = parser.parse_args()
    if args.smoke:
        args.episodes, args.concurrency, args.nodes, args.max_concurrent = 8, 4, 2, 2
    slots = -(-args.concurrency // max(args.nodes - 1, 1))
    with tempfile.TemporaryDirectory(prefix="bench-models-") as tmp:
        work = Path(tmp)
        state = str(work / "nodes.json")
        started = crabray(
            "cluster", "local", "--nodes", str(args.nodes), "--hosts", f"local={slots}",
            "--num-cpus", "2", "--state-file", state,
        )  # fmt: skip
        found = re.search(r"local cluster of \d+ nodes at (\S+)", started.stdout)
        if started.returncode != 0 or found is None:
            raise SystemExit(f"the local cluster did not start:\n{started.stdout}{started.stderr}")
        address = found.group(1)
        try:
            results = {}
            for mode, limits in (("limiter", WITH_LIMITER), ("no limiter", WITHOUT_LIMITER)):
                (work / mode).mkdir()
                print(f"running {args.episodes} episodes, {mode} ...", flush=True)
                results[mode] = one_mode(args, address, limits, work / mode)
            kills = oom_kills(Path(state))  # before the stop removes the nodes' folders
        finally:
            crabray("cluster", "stop", "--state-file", state)
    print_table(args, results)
    print(f"Ray's OOM killer, both modes: {kills[0]} worker(s) killed ({kills[1]} raylet logs)")


OOM_KILL = re.compile(r"Selected (\d+) workers to kill")
"""The raylet's log line of each round of its out-of-memory killer (Ray 2.5x's wording)."""


def oom_kills(state: Path) -> tuple[int, int]:
    """Workers Ray's OOM killer killed on the nodes of the state file, from their raylet logs
    (each node keeps its own Ray folder, which ``crabray cluster stop`` removes), and how
    many logs were read."""
    from crabray.cluster.runtime.nodes import started_nodes

    folders = {node.temp_dir for node in started_nodes(state) if node.temp_dir}
    if not folders:
        raise SystemExit(f"no node of {state} has a Ray folder of its own to read its logs from")
    logs = [log for folder in folders for log in Path(folder).glob("session_*/logs/raylet*.out")]
    if not logs:
        raise SystemExit(f"no raylet.out under the nodes' Ray folders {sorted(folders)}")
    text = "".join(log.read_text(errors="replace") for log in logs)
    return sum(int(found.group(1)) for found in OOM_KILL.finditer(text)), len(logs)


def print_table(args: argparse.Namespace, results: dict[str, dict[str, float]]) -> None:
    print(
        f"\n{args.episodes} episodes of deploy-config (3 model calls each), c={args.concurrency}, "
        f"{args.nodes} nodes; mock --max-concurrent {args.max_concurrent} "
        f"--latency {args.latency}"
    )
    keys = list(next(iter(results.values())))
    print(f"{'':24}" + "".join(f"{mode:>14}" for mode in results))
    for key in keys:
        cells = "".join(
            f"{r[key]:>14.1%}" if key.startswith("share") else f"{r[key]:>14.1f}"
            for r in results.values()
        )
        print(f"{key:24}{cells}")
    with_, without = results["limiter"], results["no limiter"]
    print(
        f"ratios limiter/no limiter: completed {_ratio(with_['completed'], without['completed'])}, "
        f"429s/100 {_ratio(with_['429s/100'], without['429s/100'])}, "
        f"share {_ratio(with_['share'], without['share'])}"
    )


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


if __name__ == "__main__":
    main()
