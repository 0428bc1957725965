"""Every benchmark and simulation script under scripts/ runs on today's code, in its smoke mode.

The scripts measure speed and memory and print figures; nothing here checks
the figures (the machine may be loaded), only that each script ran to the end
and printed its table. Without this, a script rots silently when the code it
drives changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

SMOKE_RUNS: dict[str, tuple[list[str], str]] = {
    "bench_episodes.py": (["--smoke"], "steady-state ray c=2 / in-process:"),
    "bench_leaderboard.py": (["--smoke"], "target (leaderboard"),
    "bench_peers.py": (["--smoke"], "crabray/bare Ray"),
    "bench_cluster.py": (["--smoke"], "ideal/ep/s: the 1-node figure"),
    "bench_sandboxes.py": (["--smoke"], "trivial suite (one-action episodes"),
    "bench_local_episode.py": (["--smoke"], "CPU per episode, this checkout"),
    "bench_integrity_memory.py": (["--smoke"], "grade a 1.5 GiB sparse file"),
    "bench_models.py": (["--smoke"], "raylet logs)"),
    "sim_scale.py": (["--smoke"], "simulation done"),
}
"""Per script: its smoke-mode arguments and a line of the table it prints at the end."""

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = [*SCRIPTS.glob("bench_*.py"), *SCRIPTS.glob("sim_*.py")]
    assert sorted(p.name for p in scripts) == sorted(SMOKE_RUNS)


@pytest.mark.parametrize("script", sorted(SMOKE_RUNS))
def test_bench_script_runs_in_smoke_mode(script: str) -> None:
    arguments, table_line = SMOKE_RUNS[script]
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPTS / script), *arguments],
            capture_output=True,
            text=True,
            timeout=420,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(SCRIPTS)},
        )
    except subprocess.TimeoutExpired as late:
        partial = _text(late.stdout) + _text(late.stderr)
        pytest.fail(
            f"{script} still ran after {late.timeout:.0f} s; it printed:\n{partial[-4000:]}"
        )
    shown = done.stdout + done.stderr
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{shown[-4000:]}"
    assert table_line in shown, f"{script} printed no table:\n{shown[-4000:]}"


def _text(output: str | bytes | None) -> str:
    """What a timed-out ``subprocess.run`` had read (bytes even in text mode), as text."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""
