"""CPU and wall time of one trivial episode on a confined local sandbox, against a baseline.

An episode here is what the 2,000-task suite of ``bench_peers.py`` does to
its sandbox: a reset, then two commands (``touch`` through the shell, and
``test -e`` as an argv). The CPU counted is that of every process involved
(the Python process, the spare sandbox's thread, bubblewrap and its helpers,
the commands), read from a cgroup made for the measurement (cgroup v1
``cpuacct`` or v2, which needs root); without one, the CPU of the processes
the measuring process waited for (which misses the sandboxes' own
processes) is shown and marked so.

Each measurement runs in a child process: this checkout's, or with
``--baseline DIR`` also the checkout unpacked in DIR (say ``git archive``
of main), alternated ``--repeat`` times; the paired ratios' median is printed.

Usage: python scripts/bench_local_episode.py [--episodes 100] [--baseline DIR]
       [--repeat 3] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from cpu_group import CpuGroup, run_in  # a sibling module: the cgroup that counts every process

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, os, resource, statistics, sys, tempfile, time
from pathlib import Path
from crabray.backends.local import LocalBackend
from crabray.core.environment import EnvironmentConfig

episodes, usage = int(sys.argv[1]), sys.argv[2]

def cpu():
    if usage:
        text = Path(usage).read_text()
        if usage.endswith("cpu.stat"):
            return int(text.split("usage_usec")[1].split()[0]) / 1e6
        return int(text) / 1e9
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

settings = {"isolation": "bwrap", "root_dir": tempfile.mkdtemp(prefix="bench-local-")}
sandbox = LocalBackend(EnvironmentConfig(name="bench", backend="local", backend_settings=settings))
sandbox.start()
for _ in range(5):
    sandbox.reset(); sandbox.exec("touch a"); sandbox.exec(["test", "-e", "a"])
latencies = []
cpu0, wall0 = cpu(), time.monotonic()
for _ in range(episodes):
    sandbox.reset()
    touched = sandbox.exec("touch a")
    started = time.monotonic()
    found = sandbox.exec(["test", "-e", "a"])
    latencies.append(time.monotonic() - started)
    if touched.exit_code or found.exit_code:
        raise SystemExit(f"an episode failed: {touched} {found}")
wall = time.monotonic() - wall0
sandbox.close()
os.rmdir(settings["root_dir"])
print(json.dumps({"cpu": (cpu() - cpu0) / episodes, "wall": wall / episodes,
                  "exec_p50": statistics.median(latencies)}))
"""


def measure(episodes: int, checkout: Path | None) -> dict[str, float]:
    """One child process's figures (seconds per episode); its own cgroup when one can be made."""
    group = CpuGroup.make()
    env = {**os.environ, "PYTHONPATH": str(checkout or REPO)}
    # Run from "/": ``python -c`` puts the working directory first on sys.path, and a checkout
    # there would shadow the one PYTHONPATH names.
    command = [sys.executable, "-c", CHILD, str(episodes), str(group.usage if group else "")]
    try:
        done = run_in(group, command, env=env, cwd="/")
    finally:
        if group is not None:
            group.finish()
    if done.returncode != 0:
        raise SystemExit(f"the measurement failed:\n{done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--baseline", type=Path, help="Another checkout, measured alternately.")
    parser.add_argument("--repeat", type=int, default=3, help="Paired measurements.")
    parser.add_argument("--smoke", action="store_true", help="Does it run: 5 episodes, once.")
    args = parser.parse_args()
    if args.smoke:
        args.episodes, args.repeat = 5, 1
    counted = "every process (a cgroup)" if CpuGroup.possible() else "waited-for processes only"
    print(f"confined local sandbox, reset + 2 commands, {args.episodes} episodes; CPU: {counted}")
    print(f"{'checkout':>9} {'CPU ms':>8} {'wall ms':>8} {'exec p50 ms':>12}")
    ratios: list[float] = []
    mine: list[float] = []
    for turn in range(args.repeat):
        order: list[Path | None] = [None] if args.baseline is None else [None, args.baseline]
        if turn % 2:
            order.reverse()
        figures = {checkout: measure(args.episodes, checkout) for checkout in order}
        for checkout, seen in figures.items():
            label = "this" if checkout is None else "baseline"
            print(
                f"{label:>9} {seen['cpu'] * 1e3:>8.1f} {seen['wall'] * 1e3:>8.1f} "
                f"{seen['exec_p50'] * 1e3:>12.2f}",
                flush=True,
            )
        mine.append(figures[None]["cpu"])
        if args.baseline is not None:
            ratios.append(figures[None]["cpu"] / figures[args.baseline]["cpu"])
    print(f"CPU per episode, this checkout (median): {statistics.median(mine) * 1e3:.1f} ms")
    if ratios:
        print(
            f"CPU per episode, this / baseline (median of {len(ratios)} pairs): "
            f"{statistics.median(ratios):.2f}"
        )


if __name__ == "__main__":
    main()
