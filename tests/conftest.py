"""Shared test helpers: running the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def crabray(
    *args: str, timeout: float = 300, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m crabray ARGS`` as a user would, and capture what it shows."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "crabray", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"crabray {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done


@pytest.fixture
def demo_suite() -> Path:
    return ROOT / "tasks" / "demo"
