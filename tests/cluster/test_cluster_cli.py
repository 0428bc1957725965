"""``crabray cluster``: real Ray nodes started with ``ray start``, used, inspected, stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.conftest import ROOT

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def cli(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crabray", *args],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies, which nobody reaps here, are dead)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def test_local_cluster_runs_a_sweep_and_stops_cleanly(tmp_path: Path) -> None:
    env = {"CRABRAY_NODES_FILE": str(tmp_path / "nodes.json")}
    started = cli("cluster", "local", "--nodes", "3", "--hosts", "local=2", env=env)
    try:
        assert started.returncode == 0, started.stderr
        nodes = json.loads((tmp_path / "nodes.json").read_text())
        assert [n["role"] for n in nodes] == ["head", "worker", "worker"]
        address = nodes[0]["address"]

        out = tmp_path / "out"
        on_cluster = {**env, "RAY_ADDRESS": address}  # what `--address` defaults to
        ran = cli("run", "tasks/demo", "-a", "oracle", "-c", "4", "--out", str(out),
                  env=on_cluster)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        episodes = read_episodes(out)
        assert len(episodes) == 11 and episodes.success.all()
        assert episodes.node.nunique() == 2, "episodes spread over both hosting workers"

        # No address at all: the head `cluster local` started and recorded here.
        status = cli("cluster", "status", env={**env, "RAY_ADDRESS": ""})
        assert status.returncode == 0, status.stderr
        assert status.stdout.count("local 0/2") == 2, status.stdout
        assert "11/11" in status.stdout, "the finished run is listed"
    finally:
        stopped = cli("cluster", "stop", env=env)
    assert "stopped 3 nodes" in stopped.stdout
    assert not any(group_alive(n["process_group"]) for n in nodes)
    assert json.loads((tmp_path / "nodes.json").read_text()) == []
    folders = [Path(n["temp_dir"]) for n in nodes if n["temp_dir"]]
    assert len(folders) == 3, "each node had its own Ray folder"
    assert not any(f.exists() for f in folders), "removed when stopped"
    assert not any(f.parent.exists() for f in folders[1:]), "the workers' common folder too"


def test_status_without_an_address_says_how_to_give_one(tmp_path: Path) -> None:
    env = {"CRABRAY_NODES_FILE": str(tmp_path / "nodes.json"), "RAY_ADDRESS": ""}
    done = cli("cluster", "status", env=env)
    assert done.returncode == 2
    assert "give --address HOST:PORT or set RAY_ADDRESS" in done.stderr
    assert "crabray cluster local" in done.stderr


def test_bad_hosts_are_clear_errors(tmp_path: Path) -> None:
    env = {"CRABRAY_NODES_FILE": str(tmp_path / "nodes.json")}
    done = cli("cluster", "start-head", "--hosts", "docker=many", env=env)
    assert done.returncode == 2
    assert "--hosts" in done.stderr and "whole numbers" in done.stderr
    done = cli("cluster", "start-head", "--hosts", "docker", env=env)
    assert done.returncode == 2
    assert "'docker' is not KEY=VALUE" in done.stderr
    assert not (tmp_path / "nodes.json").exists(), "nothing was started"
