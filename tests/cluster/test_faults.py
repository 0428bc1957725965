"""Fault tolerance for real: a worker node killed mid-sweep, episodes past their time limit."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from ray.cluster_utils import Cluster

from crabray.results import read_episodes
from tests.conftest import ROOT, write_sleepy_suite

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def raw_rows(out: Path) -> list[dict]:
    if not (out / "episodes").exists():
        return []
    table = ds.dataset(
        out / "episodes", format="parquet", partitioning="hive", ignore_prefixes=[".", "_"]
    ).to_table(columns=["task_id", "attempt", "termination_reason", "node", "success"])
    return table.to_pylist()


def test_killing_a_worker_node_mid_sweep_loses_nothing(tmp_path: Path) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    doomed = cluster.add_node(num_cpus=1, resources={"crabray_local": 2})
    cluster.add_node(num_cpus=1, resources={"crabray_local": 2})
    cluster.wait_for_nodes()
    suite = write_sleepy_suite(tmp_path / "sweep.py", tasks=12, sleep=1.5)
    out = tmp_path / "out"
    driver = subprocess.Popen(
        [sys.executable, "-m", "crabray", "run", str(suite), "--agent", "oracle",
         "--out", str(out), "--address", cluster.address, "--concurrency", "4"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(raw_rows(out)) < 2:
            assert driver.poll() is None, driver.communicate()
            time.sleep(0.1)
        cluster.remove_node(doomed)
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        driver.kill()
        cluster.shutdown()
    assert driver.returncode == 0, stderr

    rows = raw_rows(out)
    final = [r for r in rows if r["termination_reason"] != "env_error"]
    assert sorted(r["task_id"] for r in final) == [f"t{i:02d}" for i in range(12)], (
        "every task ends with exactly one final row"
    )
    assert all(r["success"] for r in final)
    lost = [r for r in rows if r["termination_reason"] == "env_error"]
    assert lost, "the killed node was running episodes; they must show as infra failures"
    for row in lost:
        retried = [r for r in final if r["task_id"] == row["task_id"]]
        assert retried[0]["attempt"] > row["attempt"], "retried as a later attempt"
    assert doomed.node_id[:8] not in {r["node"].split("/")[-1] for r in final if r["attempt"]}
    episodes = read_episodes(out)
    assert len(episodes) == 12 and episodes.success.all()
    assert "infrastructure failures" in stdout


def test_an_episode_past_its_time_limit_is_stopped_and_recorded(tmp_path: Path) -> None:
    """The episode's own check cannot fire inside a 60 s command: the scheduler stops it."""
    from crabray.agents import agent_spec
    from crabray.cluster.ray_runtime import connect, disconnect
    from crabray.cluster.scheduler import Scheduler, SchedulerSettings, SweepItem
    from crabray.formats import load_suite, resolve_suite
    from crabray.results import ResultSink

    suite = load_suite(
        resolve_suite(write_sleepy_suite(tmp_path / "slow.py", 2, sleep=60, limit=1.0))
    )
    sink = ResultSink(tmp_path / "out", "timeouts")
    settings = SchedulerSettings(
        run_id="timeouts",
        concurrency=2,
        max_steps=None,
        pooling=True,
        warm=0,
        timeout_grace_sec=1.0,
        kill_grace_sec=1.0,
    )
    connect(hosts={"local": 2})
    try:
        started = time.monotonic()
        progress = Scheduler(suite, settings, sink.write).run(
            SweepItem(task_id=t, agent=agent_spec("oracle")) for t in suite.task_ids
        )
        elapsed = time.monotonic() - started
    finally:
        disconnect()
    assert elapsed < 45, "stopped long before the 60 s command would have ended"
    assert (progress.done, progress.timeouts, progress.retries) == (2, 2, 0)
    episodes = read_episodes(tmp_path / "out")
    assert set(episodes.termination_reason) == {"timeout"}
    assert episodes.error.str.contains("past its time limit").all()
    assert not episodes.success.any()


def test_killing_the_driver_mid_sweep_then_resuming_on_the_cluster(tmp_path: Path) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1, resources={"crabray_local": 2})
    cluster.wait_for_nodes()
    suite = write_sleepy_suite(tmp_path / "sweep.py", tasks=12, sleep=1.0)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "crabray", "run", str(suite), "--agent", "oracle",
               "--out", str(out), "--address", cluster.address, "--concurrency", "4"]  # fmt: skip
    try:
        driver = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(raw_rows(out)) < 3:
            assert driver.poll() is None, driver.communicate()
            time.sleep(0.1)
        driver.kill()  # the driver alone dies; the cluster lives on
        driver.wait()
        before = raw_rows(out)
        assert 3 <= len(before) < 12
        (run_id,) = [p.stem for p in (out / "runs").glob("*.json")]
        resumed = subprocess.run(
            [*command, "--resume", run_id], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
    finally:
        cluster.shutdown()
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before)} episodes were already finished" in resumed.stdout
    after = raw_rows(out)
    assert sorted(r["task_id"] for r in after) == [f"t{i:02d}" for i in range(12)], (
        "every task exactly once: nothing finished ran again, nothing was lost"
    )
    assert all(r["success"] for r in after)
