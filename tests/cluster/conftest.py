"""Fixtures for the Ray layer: real local Ray instances and multi-node clusters."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from crabray.cluster.runtime.nodes import NodeConfig, ray_start_command


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test here starts Ray, one instance or a cluster of several nodes: a ``component`` test
    (tests/conftest.py). pytest calls this hook for the tests of this folder only."""
    item.add_marker(pytest.mark.component)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A real single-node Ray instance hosting 2 'local' and 1 'other' sandbox slots."""
    ray.init(
        address="local",
        num_cpus=2,
        resources={"crabray_local": 2, "crabray_other": 1},
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def two_workers() -> Iterator[Cluster]:
    """A real Ray cluster on this machine: a head hosting nothing and two workers.

    Worker 'a' hosts 2 'local' slots labelled family=a; worker 'b' hosts 2
    labelled family=b. This process is connected to it as the driver.
    """
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for family in ("a", "b"):
        cluster.add_node(
            num_cpus=1,
            resources={"crabray_local": 2},
            labels={"crabray-local": "yes", "family": family},
        )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def far_node() -> Iterator[dict]:
    """A cluster whose only sandbox node keeps its files where the driver cannot see them.

    The head (the driver's node) hosts nothing; a worker node hosts one 'local'
    slot and has a temporary folder of its own (``TMPDIR``), as another machine
    would: what an episode records there, the driver's host does not have.
    Yields that node (an entry of ``ray.nodes()``).
    """
    far_tmp = tempfile.mkdtemp(prefix="crabray-far-node-")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1, resources={"crabray_local": 1}, env_vars={"TMPDIR": far_tmp})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        (node,) = [n for n in ray.nodes() if n["Alive"] and "crabray_local" in n["Resources"]]
        yield node
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(far_tmp, ignore_errors=True)


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def ray_start_head(
    env: dict[str, str], num_cpus: int = 1, shared_folder: bool = False
) -> Iterator[str]:
    """A real Ray head started by ``ray start`` (not by crabray: no state file names it),
    hosting 2 'local' sandbox slots; yields its address, then stops its process group.

    With ``shared_folder`` it uses Ray's default folder (``/tmp/ray``), as a user's
    plain ``ray start --head`` does; otherwise a folder of its own, removed after."""
    port = free_port()
    # Ray's socket paths must stay under 108 bytes: pytest's tmp_path is too deep.
    temp_dir = None if shared_folder else Path(tempfile.mkdtemp(prefix="crabray-head-", dir="/tmp"))
    command = ray_start_command(
        NodeConfig(hosts={"local": 2}, num_cpus=num_cpus),
        head_port=port,
        address=None,
        node_ip="127.0.0.1",
        temp_dir=temp_dir,
    )
    command += [f"--ray-client-server-port={free_port()}", "--dashboard-agent-listen-port=0"]
    started = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, start_new_session=True
    )
    if started.returncode != 0:
        pytest.fail(f"ray start failed:\n{started.stdout}\n{started.stderr}")
    pgid = _group_of(f"--gcs_server_port={port}")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        if pgid is not None:
            os.killpg(pgid, signal.SIGKILL)
            time.sleep(0.5)
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _group_of(marker: str) -> int | None:
    """The process group of the GCS whose command line has ``marker`` (``ray start``
    exits, its processes stay)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "gcs_server" in cmdline and marker in cmdline:
            return os.getpgid(int(proc.name))
    return None


@dataclass
class CrabrayHead:
    """A head started by ``crabray cluster start-head``, and the "laptop" folder that
    submits to its Job Submission API (``jobs``)."""

    laptop: Path
    env: dict[str, str]
    jobs: str

    def cli(self, *args: str, timeout: float = 500) -> subprocess.CompletedProcess[str]:
        """``crabray ARGS`` run in the laptop folder, as its user would."""
        return subprocess.run(
            [sys.executable, "-m", "crabray", *args],
            cwd=self.laptop, env=self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip


@contextmanager
def crabray_head(base: Path, suite: str, text: str) -> Iterator[CrabrayHead]:
    """A head hosting ``local=2`` in a home of its own under ``base`` (its token and
    ``~/crabray/results`` live there, not in the user's), with the suite file ``suite``
    in the laptop folder. Stopped on exit, checking that no node is left."""
    laptop = base / "laptop"
    laptop.mkdir()
    (laptop / suite).write_text(text)
    env = {
        **os.environ,
        "HOME": str(base / "home"),
        "CRABRAY_NODES_FILE": str(base / "nodes.json"),
        "RAY_ADDRESS": "",
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    dashboard = free_port()
    head = CrabrayHead(laptop, env, f"http://127.0.0.1:{dashboard}")
    started = head.cli(
        "cluster", "start-head", "--hosts", "local=2", "--num-cpus", "2",
        "--port", str(free_port()), "--dashboard-port", str(dashboard),
        "--job-agent-port", str(free_port()), "--node-ip-address", "127.0.0.1",
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield head
    finally:
        stopped = head.cli("cluster", "stop")
        assert json.loads((base / "nodes.json").read_text()) == [], stopped.stderr
