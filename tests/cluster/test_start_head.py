"""``crabray cluster start-head`` advertises an address other machines can join at."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from crabray.cluster.runtime.nodes import NodeConfig, ray_start_command, routable_address
from tests.conftest import ROOT

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crabray", *args],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def test_the_routable_address_is_not_loopback() -> None:
    address = routable_address()
    if address.startswith("127."):
        pytest.fail("this machine has no route out: start-head would advertise loopback")
    socket.inet_aton(address)


def test_the_node_ip_address_reaches_ray_start() -> None:
    command = ray_start_command(NodeConfig(), head_port=6379, address=None, node_ip="10.1.2.3")
    assert "--node-ip-address=10.1.2.3" in command
    assert not any(
        part.startswith("--node-ip-address")
        for part in ray_start_command(NodeConfig(), head_port=6379, address=None)
    ), "without one, Ray guesses as it always has"


def head_ports() -> list[str]:
    """Free ports for the dashboard and the job agent: tests running at once never collide."""
    return ["--dashboard-port", str(free_port()), "--job-agent-port", str(free_port())]


@pytest.mark.timeout(400)
def test_workers_join_the_head_at_the_address_it_prints(tmp_path: Path) -> None:
    env = {"CRABRAY_NODES_FILE": str(tmp_path / "nodes.json"), "RAY_ADDRESS": ""}
    port = free_port()
    # A narrow terminal: the commands it prints stay whole lines a user can copy.
    narrow = {**env, "COLUMNS": "50"}
    head = cli(
        "cluster", "start-head", "--port", str(port), "--num-cpus", "1", *head_ports(), env=narrow
    )  # fmt: skip
    try:
        assert head.returncode == 0, head.stderr
        joins = [ln for ln in head.stdout.splitlines() if "cluster start-worker" in ln]
        assert len(joins) == 1 and joins[0].endswith("--hosts ..."), head.stdout
        sweeps = [ln for ln in head.stdout.splitlines() if "crabray run SUITE" in ln]
        assert len(sweeps) == 1 and re.search(r"--address http://\S+:\d+$", sweeps[0]), head.stdout
        shown = re.search(r"--address (\S+:\d+)", head.stdout)
        assert shown, head.stdout
        address = shown.group(1)
        assert address == f"{routable_address()}:{port}"
        assert not address.startswith("127."), head.stdout

        worker = cli(
            "cluster", "start-worker", "--address", address, "--hosts", "local=1",
            "--num-cpus", "1", env=env,
        )  # fmt: skip
        assert worker.returncode == 0, worker.stderr
        status = cli("cluster", "status", "--address", address, env=env)
        assert status.returncode == 0, status.stderr
        rows = [line for line in status.stdout.splitlines() if " yes " in line]
        assert len(rows) == 2, status.stdout
        assert all(f" {routable_address()} " in row for row in rows), "both nodes advertise it"
        assert "local 0/1" in status.stdout, "the worker joined at the printed address"

        jobs = re.search(r"--address (http://\S+:\d+)", head.stdout)
        assert jobs, head.stdout
        remote = cli("cluster", "status", "--address", jobs.group(1), env=env)
        assert remote.returncode == 0, remote.stderr
        assert remote.stdout.startswith(" "), "the status alone, no line of Ray's about the job"
        assert "Running entrypoint" not in remote.stdout
        assert [ln for ln in remote.stdout.splitlines() if " yes " in ln] == rows, (
            "through the head's Job Submission API, the same nodes"
        )
    finally:
        stopped = cli("cluster", "stop", env=env)
    assert "stopped 2 nodes" in stopped.stdout, stopped.stdout + stopped.stderr
    assert json.loads((tmp_path / "nodes.json").read_text()) == []


@pytest.mark.timeout(300)
def test_a_head_whose_job_agent_cannot_serve_fails_and_stops(tmp_path: Path) -> None:
    """The job agent's port is held by a program that never answers: start-head does not
    report success (runs could not be submitted); it says why and leaves nothing running."""
    env = {"CRABRAY_NODES_FILE": str(tmp_path / "nodes.json"), "RAY_ADDRESS": ""}
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen(1)
        taken = str(holder.getsockname()[1])
        head = cli(
            "cluster", "start-head", "--port", str(free_port()), "--num-cpus", "1",
            "--dashboard-port", str(free_port()), "--job-agent-port", taken,
            "--ready-timeout-sec", "15", env=env,
        )  # fmt: skip
    try:
        assert head.returncode != 0, head.stdout
        assert "job agent did not answer" in head.stderr, head.stderr
        assert f":{taken}/" in head.stderr, "it names the port"
        assert "The head was stopped" in head.stderr
        assert json.loads((tmp_path / "nodes.json").read_text()) == [], "nothing left running"
    finally:
        cli("cluster", "stop", env=env)
