"""The README's demo command, ``bash scripts/demo.sh``, as a new user runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.backends.conftest import require_kind
from tests.conftest import ROOT

DEMO = ROOT / "scripts" / "demo.sh"


@pytest.mark.ray
@pytest.mark.slow
def test_the_demo_runs_end_to_end_and_ends_with_the_leaderboard(tmp_path: Path) -> None:
    require_kind("local-bwrap")
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(DEMO)],
        env={**os.environ, "OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    episodes = read_episodes(out)
    solved = episodes.groupby("agent")["success"].sum().to_dict()
    assert solved == {"oracle": 11, "noop": 0}
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["oracle", "11", "11", "1.000"] in [line[:4] for line in lines]
    assert ["noop", "11", "0", "0.000"] in [line[:4] for line in lines]


def test_without_bubblewrap_a_user_is_told_the_command_to_run(tmp_path: Path) -> None:
    """Not root and no ``bwrap`` on PATH: the script stops at once with the install command."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("dirname", "bash"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    (tools / "id").write_text("#!/bin/sh\necho 1000\n")
    (tools / "id").chmod(0o755)
    done = subprocess.run(
        [str(tools / "bash"), str(DEMO)],
        env={"PATH": str(tools), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "need bubblewrap (bwrap), which is not installed" in done.stderr
    assert "sudo apt-get install bubblewrap" in done.stderr
