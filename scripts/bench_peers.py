"""crabray against its peers, CRAB and Inspect AI, on the same trivial task, in one run.

Each task: one action that touches a file in the sandbox, then one check
that the file exists. For every task count, three whole processes are timed
(start to exit, as a user waits for them):

* CRAB (PyPI ``crab-framework``): its in-process loop, ``start_task``, one
  ``step`` (the touch), the evaluator, ``close_task``, per task;
* Inspect AI (PyPI ``inspect-ai``): ``eval`` of one sample per task with its
  ``local`` sandbox and the ``mockllm`` model; a solver runs the touch through
  the sandbox and a scorer checks the file through it;
* crabray: ``crabray run`` of the same tasks on a local Ray instance with the
  local backend and the oracle agent.

The peers are installed into their own virtual environments under a cache
directory (``~/.cache/crabray/peers`` by default), never into crabray's; a
peer that cannot be installed here is reported as such, and crabray's figures
are printed anyway. Prints seconds per run and the ratios crabray/CRAB and
crabray/Inspect (below 1: crabray is faster), then the CPU seconds of every
process each run started (Ray's daemons and workers and the sandboxes'
processes included), counted by a cgroup made for the run (root only;
elsewhere the processes the run waited for, which misses most of a
``crabray run``'s, and the table says so).

Usage: python scripts/bench_peers.py [--tasks 1,300,2000] [--cache DIR] [--smoke]
       [--baseline DIR [--repeat N]]

``--baseline DIR`` (a checkout of another commit, e.g. ``git archive`` of
main unpacked into DIR) times that checkout's ``crabray run`` beside this
one's, alternately, ``--repeat`` times per task count (the same Python and
packages, DIR first on ``PYTHONPATH``), and prints both medians and the
median of the paired ratios: on a loaded machine the ratio of runs made
side by side says more than either time.

A one-task run is also set against its floor: a bare ``ray.init(address="local")`` and
``ray.shutdown()`` timed in the same run (the last line, crabray/bare Ray).

``--smoke`` (1 and 20 tasks) only shows that the script runs;
``tests/test_bench_scripts.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cpu_group import (  # a sibling module: the cgroup that counts every process
    CpuGroup,
    Sampler,
    run_in,
)

PEERS = {"CRAB": ["crab-framework", "httpx", "pyyaml", "openai"], "Inspect": ["inspect-ai"]}
"""Each peer's name in the table and what to install from PyPI (CRAB 0.1.2 imports
httpx, yaml and openai without declaring them)."""

CRAB_PROGRAM = textwrap.dedent(
    """
    import os, subprocess, sys, tempfile
    from crab import BenchmarkConfig, EnvironmentConfig, Task, action, create_benchmark, evaluator

    ROOT = tempfile.mkdtemp(prefix="crab-peer-")

    @action
    def touch(name: str) -> None:
        \"\"\"Create an empty file.

        Args:
            name: the file's name
        \"\"\"
        subprocess.run(["touch", name], cwd=ROOT, check=True)  # a process, as in the others

    @evaluator
    def exists(name: str) -> bool:
        return os.path.exists(os.path.join(ROOT, name))

    n = int(sys.argv[1])
    env = EnvironmentConfig(name="box", action_space=[touch], observation_space=[])
    tasks = [
        Task(id=str(i), description="touch a file", evaluator=exists(name=f"f{i}"))
        for i in range(n)
    ]
    bench = create_benchmark(BenchmarkConfig(name="peer", tasks=tasks, environments=[env]))
    passed = 0
    for i in range(n):
        bench.start_task(str(i))
        result = bench.step("touch", {"name": f"f{i}"})
        passed += int(result.evaluation_results["completeness"] == 1.0)
        if bench.current_task is not None:  # CRAB closes a task whose evaluator passed
            bench.close_task()
    assert passed == n, f"{passed} of {n} tasks passed"
    """
)

INSPECT_PROGRAM = textwrap.dedent(
    """
    import sys, tempfile
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer
    from inspect_ai.solver import solver
    from inspect_ai.util import sandbox

    @solver
    def touch():
        async def solve(state, generate):
            await sandbox().exec(["touch", f"f{state.sample_id}"])
            return state
        return solve

    @scorer(metrics=[accuracy()])
    def exists():
        async def score(state, target):
            done = await sandbox().exec(["test", "-e", f"f{state.sample_id}"])
            return Score(value=CORRECT if done.success else INCORRECT)
        return score

    n = int(sys.argv[1])
    task = Task(
        dataset=[Sample(id=i, input="touch a file") for i in range(n)],
        solver=touch(),
        scorer=exists(),
        sandbox="local",
    )
    logs = eval(task, model="mockllm/model", display="none", log_dir=tempfile.mkdtemp())
    accuracy = logs[0].results.scores[0].metrics["accuracy"].value
    assert logs[0].status == "success" and accuracy == 1.0, (logs[0].status, accuracy)
    """
)

CRABRAY_SUITE = textwrap.dedent(
    """
    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import SHELL_ACTIONS, path_exists, run_command

    ENV = EnvironmentConfig(name="box", action_space=SHELL_ACTIONS)
    bench = BenchmarkConfig(
        name="peer",
        environments=[ENV],
        tasks=[
            Task(
                id=f"t{i}",
                description="touch a file",
                evaluator=path_exists(path=f"f{i}"),
                solution=[run_command(command=f"touch f{i}")],
            )
            for i in range(N_TASKS)
        ],
    )
    """
)


def peer_python(cache: Path, name: str) -> Path | str:
    """The Python of the peer's own virtual environment, or why it cannot be had here."""
    venv = cache / name.lower()
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists() and marker.read_text() == " ".join(PEERS[name]):
        return python
    print(f"installing {' '.join(PEERS[name])} into {venv} ...", flush=True)
    steps = [[sys.executable, "-m", "venv", str(venv)]]
    steps.append([str(python), "-m", "pip", "install", "--quiet", *PEERS[name]])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            reason = (done.stderr or done.stdout).strip()[-300:]
            return f"cannot install {' '.join(PEERS[name])}: {reason}"
    marker.write_text(" ".join(PEERS[name]))
    return python


@dataclass
class Timing:
    """One whole process, timed as a user waits for it."""

    wall: float | str
    """Seconds from start to exit, or the command's error when it failed."""
    cpu: float
    """CPU seconds (user and system): every process it started when a cgroup counted them."""
    shares: dict[str, float] = field(default_factory=dict)
    """The CPU seconds by kind of process, when asked for and a cgroup counted them."""


Kinds = tuple[Callable[[str], str], Callable[[str], str]]
"""How to name a process's kind from its command line: its own, its children's
(``cpu_group.Sampler.shares``)."""


def crabray_kind(name: str) -> str:
    """The part of a ``crabray run`` a process is, by its command line ("": its parent's)."""
    if name.startswith(("ray::DashboardAgent", "ray::RuntimeEnvAgent")):
        return "Ray's Python daemons"
    if name.startswith("ray::") or "default_worker.py" in name:
        return "actors' workers (Python)"
    if "gcs_server" in name or "/raylet" in name:
        return "Ray's GCS and raylet"
    if "site-packages/ray/" in name:
        return "Ray's Python daemons"
    if "-m crabray" in name:
        return "driver (crabray run)"
    return ""


def crabray_reaped_kind(name: str) -> str:
    """What a process's children are: an actor's, and a sandbox guest's (its commands), are
    the sandbox's processes."""
    if crabray_kind(name) == "actors' workers (Python)" or "crabray-guest" in name:
        return "sandboxes (bwrap, entries, commands)"
    return "other (reaped after their last sample)"


CRABRAY_KINDS: Kinds = (crabray_kind, crabray_reaped_kind)


CPU_COUNTED = "every process of the run (a cgroup)"
CPU_WAITED = "only the processes the run waited for (no cgroup: run as root to count them all)"


SMOKE_TIMEOUT_SEC = 180.0
"""In smoke mode, how long a measured command may run before it is killed and reported
failed: a hang shows as a failed row with its output, not as a script that never ends."""


def timed(
    command: list[str],
    cwd: Path,
    pythonpath: Path | None = None,
    kinds: Kinds | None = None,
    timeout: float | None = None,
) -> Timing:
    """Time ``command`` and count its CPU, in a cgroup of its own where one can be made.

    With ``kinds`` (and a cgroup), the CPU is also split by kind of process
    (:attr:`Timing.shares`), from ``/proc`` sampled while the command runs.
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    group = CpuGroup.make()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        with Sampler(group) if group and kinds else contextlib.nullcontext() as sampler:
            done = run_in(group, command, timeout, cwd=cwd, env=env)
        elapsed = time.perf_counter() - started
    finally:
        cpu = group.finish() if group else 0.0
    if group is None:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    elif group.lingered:
        print(f"{group.lingered} processes outlived {command[:3]}; killed", flush=True)
    shares = sampler.shares(*kinds) if sampler is not None and kinds else {}
    if done.returncode != 0:
        return Timing(f"failed: {(done.stderr or done.stdout).strip()[-300:]}", cpu, shares)
    return Timing(elapsed, cpu, shares)


def run_peer(
    python: Path, program: str, tasks: int, work: Path, timeout: float | None = None
) -> Timing:
    script = work / "peer.py"
    script.write_text(program)
    return timed([str(python), str(script), str(tasks)], work, timeout=timeout)


def run_crabray(
    tasks: int, work: Path, checkout: Path | None = None, timeout: float | None = None
) -> Timing:
    """``crabray run`` of the trivial suite: this checkout's, or ``checkout``'s."""
    suite = work / "suite.py"
    suite.write_text(CRABRAY_SUITE.replace("N_TASKS", str(tasks)))
    command = [sys.executable, "-m", "crabray", "run", str(suite), "--agent", "oracle"]
    command = [*command, "--out", str(work / "out")]
    return timed(command, work, checkout, CRABRAY_KINDS, timeout)


def paired(counts: list[int], baseline: Path, repeat: int, timeout: float | None) -> None:
    """This checkout's ``crabray run`` against ``baseline``'s, alternated; medians and ratio."""
    print("this checkout against the baseline, alternated; ratios below 1: this one is faster")
    print(f"(CPU: seconds of {CPU_COUNTED if CpuGroup.possible() else CPU_WAITED})")
    header = f"{'tasks':>6} {'runs':>5} {'this s':>10} {'baseline s':>11} {'paired ratio':>13}"
    print(f"{header} {'this CPU s':>11} {'baseline CPU s':>15}")
    for count in counts:
        runs: dict[Path | None, list[Timing]] = {None: [], baseline: []}
        for turn in range(repeat):
            # Who goes first alternates too, so neither always follows the other.
            order = [None, baseline] if turn % 2 == 0 else [baseline, None]
            for checkout in order:
                with tempfile.TemporaryDirectory(prefix="crabray-peers-") as tmp:
                    runs[checkout].append(run_crabray(count, Path(tmp), checkout, timeout))
            mine, theirs = runs[None][-1].wall, runs[baseline][-1].wall
            if isinstance(mine, str) or isinstance(theirs, str):
                raise SystemExit(f"{count} tasks: {mine} / baseline {theirs}")
            print(f"  pair {turn + 1}: {mine:.2f} s against {theirs:.2f} s", flush=True)
        walls = {key: [float(run.wall) for run in value] for key, value in runs.items()}
        cpus = {key: [run.cpu for run in value] for key, value in runs.items()}
        ratios = [a / b for a, b in zip(walls[None], walls[baseline], strict=True)]
        print(
            f"{count:>6} {repeat:>5} {statistics.median(walls[None]):>10.2f} "
            f"{statistics.median(walls[baseline]):>11.2f} {statistics.median(ratios):>13.2f} "
            f"{statistics.median(cpus[None]):>11.2f} {statistics.median(cpus[baseline]):>15.2f}",
            flush=True,
        )


def cell(value: float | str | None) -> str:
    return f"{value:>10.2f}" if isinstance(value, float) else f"{'-':>10}"


def ratio(mine: float | str | None, theirs: float | str | None) -> str:
    if isinstance(mine, float) and isinstance(theirs, float):
        return f"{mine / theirs:>14.2f}"
    return f"{'-':>14}"


BARE_RAY = "import ray; ray.init(address='local', include_dashboard=False); ray.shutdown()"
"""The floor of a one-task run: a Ray instance started and stopped, nothing run on it.

``address='local'``, as ``crabray run`` starts its own: without it ``ray.init()``
joins the cluster last started on this machine (``/tmp/ray/ray_current_cluster``),
and waits for good when that cluster has gone (a test's head, killed)."""


def run_bare_ray(work: Path, timeout: float | None = None) -> Timing:
    """A bare ``ray.init(address="local")`` and ``ray.shutdown()`` in a process of its own."""
    return timed([sys.executable, "-c", BARE_RAY], work, timeout=timeout)


def print_floor(rows: list[tuple[int, dict[str, Timing]]], bare: Timing) -> None:
    """The one-task run against a bare Ray start and stop timed in the same run."""
    one = next((figures["crabray"] for count, figures in rows if count == 1), None)
    if one is None or isinstance(one.wall, str) or isinstance(bare.wall, str):
        print(f"one task against a bare Ray start and stop: not measured ({bare.wall})")
        return
    print(
        f"one task against a bare Ray start and stop (same run): crabray {one.wall:.2f} s, "
        f"bare Ray {bare.wall:.2f} s, crabray/bare Ray {one.wall / bare.wall:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="1,300,2000", help="Task counts, comma-separated.")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "crabray" / "peers")
    parser.add_argument("--smoke", action="store_true", help="Does it run: 1 and 20 tasks.")
    parser.add_argument(
        "--baseline", type=Path, help="Time this checkout of crabray beside the current one."
    )
    parser.add_argument("--repeat", type=int, default=5, help="Paired runs per task count.")
    args = parser.parse_args()
    counts = [1, 20] if args.smoke else [int(n) for n in args.tasks.split(",")]
    timeout = SMOKE_TIMEOUT_SEC if args.smoke else None
    if args.baseline is not None:
        paired(counts, args.baseline.resolve(), 1 if args.smoke else args.repeat, timeout)
        return
    args.cache.mkdir(parents=True, exist_ok=True)
    pythons: dict[str, Path] = {}
    for name in PEERS:
        found = peer_python(args.cache, name)
        if isinstance(found, Path):
            pythons[name] = found
        else:
            print(f"{name}: not measured: {found}", flush=True)
    programs = {"CRAB": CRAB_PROGRAM, "Inspect": INSPECT_PROGRAM}
    rows: list[tuple[int, dict[str, Timing]]] = []
    with tempfile.TemporaryDirectory(prefix="crabray-peers-") as tmp:
        bare = run_bare_ray(Path(tmp), timeout)
    for count in counts:
        figures: dict[str, Timing] = {}
        for name, python in pythons.items():
            with tempfile.TemporaryDirectory(prefix="crabray-peers-") as tmp:
                figures[name] = run_peer(python, programs[name], count, Path(tmp), timeout)
        with tempfile.TemporaryDirectory(prefix="crabray-peers-") as tmp:
            figures["crabray"] = run_crabray(count, Path(tmp), timeout=timeout)
        for name, run in figures.items():
            if isinstance(run.wall, str):
                print(f"{name}, {count} tasks: {run.wall}", flush=True)
        print(f"{count} tasks measured", flush=True)
        rows.append((count, figures))
    print_table("whole processes, seconds; ratios below 1: crabray is faster", rows, "wall")
    counted = CPU_COUNTED if CpuGroup.possible() else CPU_WAITED
    print_table(f"CPU seconds of {counted}; ratios below 1: crabray used less", rows, "cpu")
    print_shares(rows)
    print_floor(rows, bare)
    if isinstance(rows[-1][1]["crabray"].wall, str):
        raise SystemExit("crabray itself failed; see above")


def print_shares(rows: list[tuple[int, dict[str, Timing]]]) -> None:
    """Where crabray's CPU went, by kind of process, per task count (when a cgroup counted it)."""
    runs = [(count, figures["crabray"]) for count, figures in rows if figures["crabray"].shares]
    if not runs:
        return
    kinds = sorted({kind for _, run in runs for kind in run.shares})
    print("where crabray's CPU went, seconds (/proc sampled every 0.1 s during the run)")
    print(f"{'kind':<40}" + "".join(f"{f'{count} tasks':>13}" for count, _ in runs))
    for kind in kinds:
        print(f"{kind:<40}" + "".join(f"{run.shares.get(kind, 0.0):>13.2f}" for _, run in runs))
    unseen = "".join(f"{run.cpu - sum(run.shares.values()):>13.2f}" for _, run in runs)
    print(f"{'not sampled (the cgroup total less these)':<40}{unseen}")
    print(f"{'all (the cgroup)':<40}" + "".join(f"{run.cpu:>13.2f}" for _, run in runs))


def print_table(title: str, rows: list[tuple[int, dict[str, Timing]]], figure: str) -> None:
    """One table of the runs: their wall clock (``wall``) or their CPU (``cpu``), with ratios."""

    def pick(run: Timing | None) -> float | str | None:
        if run is None or isinstance(run.wall, str):
            return None
        return run.wall if figure == "wall" else run.cpu

    print(title)
    print(
        f"{'tasks':>6} {'crabray':>10} {'CRAB':>10} {'Inspect':>10} "
        f"{'crabray/CRAB':>14} {'crabray/Inspect':>14}"
    )
    for count, figures in rows:
        mine, crab, inspect = (pick(figures.get(name)) for name in ("crabray", "CRAB", "Inspect"))
        print(
            f"{count:>6} {cell(mine)} {cell(crab)} {cell(inspect)} "
            f"{ratio(mine, crab)} {ratio(mine, inspect)}"
        )


if __name__ == "__main__":
    main()
