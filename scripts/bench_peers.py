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
crabray/Inspect (below 1: crabray is faster).

Usage: python scripts/bench_peers.py [--tasks 1,300,2000] [--cache DIR] [--smoke]
       [--baseline DIR [--repeat N]]

``--baseline DIR`` (a checkout of another commit, e.g. ``git archive`` of
main unpacked into DIR) times that checkout's ``crabray run`` beside this
one's, alternately, ``--repeat`` times per task count (the same Python and
packages, DIR first on ``PYTHONPATH``), and prints both medians and the
median of the paired ratios: on a loaded machine the ratio of runs made
side by side says more than either time.

``--smoke`` (1 and 20 tasks) only shows that the script runs;
``tests/test_bench_scripts.py`` runs it in CI.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

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


LAST_CPU_SEC = [0.0]
"""CPU seconds (user + system) of the last timed command and every process it waited for."""


def timed(command: list[str], cwd: Path, pythonpath: Path | None = None) -> float | str:
    """Seconds the command took, start to exit, or its error when it failed."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU_SEC[0] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode != 0:
        return f"failed: {(done.stderr or done.stdout).strip()[-300:]}"
    return elapsed


def run_peer(python: Path, program: str, tasks: int, work: Path) -> float | str:
    script = work / "peer.py"
    script.write_text(program)
    return timed([str(python), str(script), str(tasks)], work)


def run_crabray(tasks: int, work: Path, checkout: Path | None = None) -> float | str:
    """``crabray run`` of the trivial suite: this checkout's, or ``checkout``'s."""
    suite = work / "suite.py"
    suite.write_text(CRABRAY_SUITE.replace("N_TASKS", str(tasks)))
    command = [sys.executable, "-m", "crabray", "run", str(suite), "--agent", "oracle"]
    return timed([*command, "--out", str(work / "out")], work, checkout)


def paired(counts: list[int], baseline: Path, repeat: int) -> None:
    """This checkout's ``crabray run`` against ``baseline``'s, alternated; medians and ratio."""
    print("this checkout against the baseline, alternated; ratios below 1: this one is faster")
    print("(CPU: seconds of every process the run waited for, Ray's included)")
    header = f"{'tasks':>6} {'runs':>5} {'this s':>10} {'baseline s':>11} {'paired ratio':>13}"
    print(f"{header} {'this CPU s':>11} {'baseline CPU s':>15}")
    for count in counts:
        mine: list[float] = []
        theirs: list[float] = []
        cpu: dict[Path | None, list[float]] = {None: [], baseline: []}
        for turn in range(repeat):
            # Who goes first alternates too, so neither always follows the other.
            order = [None, baseline] if turn % 2 == 0 else [baseline, None]
            times: dict[Path | None, float | str] = {}
            for checkout in order:
                with tempfile.TemporaryDirectory(prefix="crabray-peers-") as tmp:
                    times[checkout] = run_crabray(count, Path(tmp), checkout)
                cpu[checkout].append(LAST_CPU_SEC[0])
            if isinstance(times[None], str) or isinstance(times[baseline], str):
                raise SystemExit(f"{count} tasks: {times[None]} / baseline {times[baseline]}")
            mine.append(float(times[None]))
            theirs.append(float(times[baseline]))
            print(f"  pair {turn + 1}: {mine[-1]:.2f} s against {theirs[-1]:.2f} s", flush=True)
        ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
        print(
            f"{count:>6} {repeat:>5} {statistics.median(mine):>10.2f} "
            f"{statistics.median(theirs):>11.2f} {statistics.median(ratios):>13.2f} "
            f"{statistics.median(cpu[None]):>11.2f} {statistics.median(cpu[baseline]):>15.2f}",
            flush=True,
        )


def cell(value: float | str | None) -> str:
    return f"{value:>10.2f}" if isinstance(value, float) else f"{'-':>10}"


def ratio(mine: float | str | None, theirs: float | str | None) -> str:
    if isinstance(mine, float) and isinstance(theirs, float):
        return f"{mine / theirs:>14.2f}"
    return f"{'-':>14}"


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
    if args.baseline is not None:
        paired(counts, args.baseline.resolve(), 1 if args.smoke else args.repeat)
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
    rows: list[tuple[int, dict[str, float | str]]] = []
    for count in counts:
        figures: dict[str, float | str] = {}
        for name, python in pythons.items():
            with tempfile.TemporaryDirectory(prefix="crabray-peers-") as tmp:
                figures[name] = run_peer(python, programs[name], count, Path(tmp))
        with tempfile.TemporaryDirectory(prefix="crabray-peers-") as tmp:
            figures["crabray"] = run_crabray(count, Path(tmp))
        for name, value in figures.items():
            if isinstance(value, str):
                print(f"{name}, {count} tasks: {value}", flush=True)
        print(f"{count} tasks measured", flush=True)
        rows.append((count, figures))
    print("whole processes, seconds; ratios below 1: crabray is faster")
    print(
        f"{'tasks':>6} {'crabray':>10} {'CRAB':>10} {'Inspect':>10} "
        f"{'crabray/CRAB':>14} {'crabray/Inspect':>14}"
    )
    for count, figures in rows:
        mine = figures.get("crabray")
        print(
            f"{count:>6} {cell(mine)} {cell(figures.get('CRAB'))} {cell(figures.get('Inspect'))} "
            f"{ratio(mine, figures.get('CRAB'))} {ratio(mine, figures.get('Inspect'))}"
        )
    if not isinstance(rows[-1][1].get("crabray"), float):
        raise SystemExit("crabray itself failed; see above")


if __name__ == "__main__":
    main()
