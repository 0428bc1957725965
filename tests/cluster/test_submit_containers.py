"""A sweep submitted from this machine to a two-node Ray cluster running in containers.

The head and the worker are Docker containers (image crabray/ray-node, built
here by envs/ray-node/build.sh) on a network of their own; they do not see
this machine's files, so the suite, which exists only in a temporary folder
here, reaches them only by being shipped with the job. The nodes are started
with the commands cluster/README.md gives an operator, and the laptop side
runs the commands it gives a user. The suite's sandboxes are the local
backend with ``isolation = "none"``: bubblewrap needs privileges an ordinary
container lacks.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from crabray.results import list_runs, read_episodes
from tests.conftest import ROOT
from tests.s3server import CREDENTIALS, S3Server, start_moto

pytestmark = [pytest.mark.slow]

SUITE = textwrap.dedent(
    '''
    """Three file tasks: a suite that exists only on the submitting machine."""

    from crabray import BenchmarkConfig, EnvironmentConfig, Task
    from crabray.actions import FILE_ACTIONS, file_equals, write_file

    BOX = EnvironmentConfig(
        name="box",
        description="A working directory.",
        action_space=FILE_ACTIONS,
        backend_settings={"isolation": "none"},
    )
    shipped = BenchmarkConfig(
        name="shipped",
        environments=[BOX],
        tasks=[
            Task(
                id=f"write-{i}",
                description=f"Write {i} into out.txt.",
                evaluator=file_equals(path="out.txt", content=str(i)),
                solution=[write_file(path="out.txt", content=f"{i}\\n")],
            )
            for i in range(3)
        ],
    )
    '''
)


@dataclass
class ContainerCluster:
    head: str
    worker: str
    head_ip: str
    worker_ip: str
    token: str
    gateway: str
    """This machine's address on the cluster's network (where the test's S3 server listens)."""

    @property
    def jobs(self) -> str:
        return f"http://{self.head_ip}:8265"


def _docker(*args: str, input: str | None = None, timeout: float = 300) -> str:
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, input=input, timeout=timeout
    )
    if done.returncode != 0:
        pytest.fail(f"docker {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _need_docker() -> None:
    if (
        shutil.which("docker") is None
        or subprocess.run(["docker", "info"], capture_output=True).returncode
    ):
        message = "needs a running Docker engine: bash scripts/system-deps.sh"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ContainerCluster]:
    """A head and a worker container joined as a crabray cluster, as cluster/README.md says."""
    _need_docker()
    build = subprocess.run(
        ["bash", str(ROOT / "envs" / "ray-node" / "build.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=1800,
    )
    if build.returncode != 0:
        pytest.fail(f"envs/ray-node/build.sh failed:\n{build.stdout[-3000:]}\n{build.stderr}")
    tag = secrets.token_hex(3)
    network, head, worker = (f"crabray-jobs-{tag}", f"crabray-head-{tag}", f"crabray-worker-{tag}")
    _docker("network", "create", network)
    try:
        gateway = _docker(
            "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", network
        ).strip()
        # The object store's credentials are in the nodes' own environment, as an operator
        # sets them: the head writes `--out s3://...` with them (the test store's dummy keys).
        store_env = [
            arg for name, value in CREDENTIALS.items() for arg in ("-e", f"{name}={value}")
        ]
        for name in (head, worker):
            _docker(
                "run", "-d", "--name", name, "--hostname", name, "--network", network,
                "--shm-size=512m", *store_env, "crabray/ray-node:latest",
            )  # fmt: skip
        _docker("exec", head, "crabray", "cluster", "start-head")
        head_ip = _docker("exec", head, "hostname", "-i").split()[0]
        token = _docker("exec", head, "cat", "/root/.ray/auth_token").strip()
        _docker("exec", "-i", worker, "sh", "-c",
                "mkdir -p ~/.ray && cat > ~/.ray/auth_token", input=token)  # fmt: skip
        _docker(
            "exec", worker, "crabray", "cluster", "start-worker",
            "--address", f"{head_ip}:6379", "--hosts", "local=2",
        )  # fmt: skip
        worker_ip = _docker("exec", worker, "hostname", "-i").split()[0]
        yield ContainerCluster(head, worker, head_ip, worker_ip, token, gateway)
    finally:
        subprocess.run(["docker", "rm", "-f", head, worker], capture_output=True)
        subprocess.run(["docker", "network", "rm", network], capture_output=True)


@pytest.fixture(scope="module")
def laptop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The submitting machine's folder: the suite is here and nowhere else."""
    home = tmp_path_factory.mktemp("laptop")
    (home / "shipped").mkdir()
    (home / "shipped" / "suite.py").write_text(SUITE)
    (home / "shipped" / "results").mkdir()  # never shipped
    (home / "shipped" / "results" / "big.bin").write_bytes(b"x" * 1024)
    return home


def _crabray(
    laptop: Path, cluster: ContainerCluster, *args: str
) -> subprocess.CompletedProcess[str]:
    """``crabray ARGS`` on the laptop, with the head's token as a user copies it."""
    env = _laptop_env(laptop)
    subprocess.run(
        ["sh", "-c", "mkdir -p ~/.ray && cat > ~/.ray/auth_token"],
        input=cluster.token, text=True, env=env, check=True,
    )  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "crabray", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=laptop,
        env=env,
    )


def _laptop_env(laptop: Path) -> dict[str, str]:
    env = {**os.environ, "HOME": str(laptop), "COLUMNS": "200", "NO_COLOR": "1"}
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
        env.pop(name, None)
    return env


def _run_id(output: str) -> str:
    line = next(line for line in output.splitlines() if line.startswith("submitted run "))
    return line.split()[2]


def test_a_submitted_sweep_runs_on_the_cluster_and_resumes(
    cluster: ContainerCluster, laptop: Path
) -> None:
    done = _crabray(
        laptop, cluster, "run", "shipped", "--agent", "oracle", "--address", cluster.jobs
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = _run_id(done.stderr)
    assert "episodes 3/3, 3 ok" in done.stdout + done.stderr
    assert "Uploading package" not in done.stderr  # Ray's info lines stay off the terminal
    # A followed run's results are copied back into the results root here, and stay on
    # the head too.
    assert f"results of run {run_id} copied into results" in done.stderr
    assert (laptop / "results" / "runs" / f"{run_id}.json").is_file()
    on_head = _docker("exec", cluster.head, "ls", f"/root/crabray/results/runs/{run_id}.json")
    assert on_head.strip()

    board = _crabray(laptop, cluster, "leaderboard", "--run", run_id)
    assert board.returncode == 0, board.stderr
    assert "oracle" in board.stdout
    episodes = read_episodes(laptop / "results", run_id)
    assert sorted(episodes.task_id) == ["write-0", "write-1", "write-2"]
    assert episodes.success.all()
    assert {node.split("/")[0] for node in episodes.node} == {cluster.worker_ip}

    resumed = _crabray(
        laptop, cluster, "run", "shipped", "--agent", "oracle", "--address", cluster.jobs,
        "--resume", run_id,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "3 episodes were already finished" in resumed.stdout
    assert _run_id(resumed.stderr) == run_id


@pytest.fixture(scope="module")
def store(cluster: ContainerCluster) -> Iterator[S3Server]:
    """An S3-compatible server the nodes reach at this machine's address on their network."""
    yield from start_moto(cluster.gateway)


def test_a_detached_run_writes_its_results_to_an_object_store(
    cluster: ContainerCluster, laptop: Path, store: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_bucket("sweeps")
    uri = store.uri("sweeps", "team/results")
    done = _crabray(
        laptop, cluster, "run", "shipped", "--agent", "oracle", "--address", cluster.jobs,
        "--out", uri, "--detach",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ids = next(line for line in done.stdout.splitlines() if line.startswith("run id: "))
    run_id, job_id = ids.split()[2], ids.split()[5]
    assert job_id.startswith(f"crabray-{run_id}-")
    assert f"crabray runs follow {run_id} --address {cluster.jobs}" in done.stdout
    assert f"crabray leaderboard '{uri}' --run {run_id}" in done.stdout

    followed = _crabray(laptop, cluster, "runs", "follow", run_id, "--address", cluster.jobs)
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert "episodes 3/3, 3 ok" in followed.stdout + followed.stderr

    stopped = _crabray(laptop, cluster, "runs", "stop", run_id, "--address", cluster.jobs)
    assert f"run {run_id} (job {job_id}) already ended: succeeded" in stopped.stdout
    unknown = _crabray(laptop, cluster, "runs", "follow", "no-such-run", "--address", cluster.jobs)
    assert unknown.returncode == 2
    assert "no job of run no-such-run on this cluster" in unknown.stderr

    for name, value in CREDENTIALS.items():  # the laptop reads the store with its own keys
        monkeypatch.setenv(name, value)
    episodes = read_episodes(uri, run_id)
    assert sorted(episodes.task_id) == ["write-0", "write-1", "write-2"]
    assert episodes.success.all()
    assert run_id not in list_runs(laptop / "results")
    staged = _docker("exec", cluster.head, "ls", "-A", "/root/.cache/crabray")
    assert "staging-" not in staged, "the head's staging folder is gone once all is uploaded"


def test_a_bad_suite_fails_here_before_anything_is_shipped(
    cluster: ContainerCluster, laptop: Path
) -> None:
    done = _crabray(
        laptop, cluster, "run", "shipped", "--agent", "nobody", "--address", cluster.jobs
    )
    assert done.returncode == 2
    assert "nobody" in done.stderr
    assert "submitted run" not in done.stderr


def test_joining_as_a_driver_from_a_machine_with_no_node_fails_fast(
    cluster: ContainerCluster, laptop: Path
) -> None:
    out = laptop / "driver-results"
    done = _crabray(
        laptop, cluster, "run", "shipped", "--agent", "oracle", "--out", str(out),
        "--address", f"{cluster.head_ip}:6379",
    )  # fmt: skip
    assert done.returncode == 2
    assert "runs no node of the Ray cluster" in done.stderr
    assert "--address http://HEAD:8265" in done.stderr
    assert not list_runs(out)


def test_ctrl_c_stops_the_job_on_the_cluster(cluster: ContainerCluster, laptop: Path) -> None:
    _crabray(laptop, cluster, "--version")  # stores the token
    proc = subprocess.Popen(
        [sys.executable, "-m", "crabray", "run", "shipped", "--agent", "oracle",
         "--address", cluster.jobs],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=laptop,
        env=_laptop_env(laptop),
    )  # fmt: skip
    assert proc.stderr is not None
    shown = []
    while not (line := proc.stderr.readline()).startswith("submitted run ") and line:
        shown.append(line)
    assert line, "".join(shown)
    submitted = line
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, rest
    job_id = submitted.split()[5]
    assert f"job {job_id} stopped" in rest
    assert f"--resume {_run_id(submitted)}" in rest


def test_a_node_joins_as_driver_with_the_suite_at_the_same_path_on_every_node(
    cluster: ContainerCluster, laptop: Path
) -> None:
    for machine in (cluster.head, cluster.worker):
        _docker("exec", machine, "mkdir", "-p", "/srv/suites")
        _docker("cp", str(laptop / "shipped"), f"{machine}:/srv/suites/my_suite")
    done = _docker(
        "exec", cluster.head, "crabray", "run", "/srv/suites/my_suite", "--agent", "oracle",
        "--address", f"{cluster.head_ip}:6379",
    )  # fmt: skip
    assert "results: results" in done
    episodes = _docker("exec", cluster.head, "crabray", "leaderboard", "--format", "csv")
    assert "oracle" in episodes


def test_status_lists_the_worker_and_stop_stops_each_machines_nodes(
    cluster: ContainerCluster,
) -> None:
    status = _docker("exec", cluster.head, "crabray", "cluster", "status")
    assert cluster.worker_ip in status
    assert "local 0/2" in status
    for machine in (cluster.worker, cluster.head):
        stopped = _docker("exec", machine, "crabray", "cluster", "stop")
        assert "stopped 1 node" in stopped
