"""``crabray run --out s3://...``: a run staged locally and uploaded to an S3-compatible store.

The store is moto's S3 server on loopback (``tests/s3server.py``); the URIs
reach it through pyarrow's query parameters, as a user of MinIO or Ceph would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from crabray.results import read_episodes
from tests.conftest import ROOT, crabray, write_sleepy_suite
from tests.s3server import CREDENTIALS, S3Server, start_moto

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    yield from start_moto()


@pytest.fixture
def bucket(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket, with the store's credentials in this process's (and children's) env."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    name = f"results-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(name)
    return name


def _episode_rows(s3: S3Server, bucket: str, prefix: str) -> list[dict]:
    """Every episode row in the bucket, read with pyarrow alone (duplicates included)."""
    store, root = pafs.FileSystem.from_uri(s3.uri(bucket, prefix))
    infos = store.get_file_info(
        pafs.FileSelector(f"{root}/episodes", allow_not_found=True, recursive=True)
    )
    parts = sorted(i.path for i in infos if i.is_file and i.base_name.startswith("part-"))
    rows: list[dict] = []
    for part in parts:
        rows += pq.read_table(
            part, filesystem=store, columns=["task_id", "episode_id", "termination_reason"]
        ).to_pylist()
    return rows


def test_run_to_s3_then_leaderboard_from_it(
    s3: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    uri = s3.uri(bucket, "sweeps/demo")
    done = crabray("run", "tasks/demo", "-a", "oracle", "-a", "noop", "--out", uri)
    assert done.returncode == 0, done.stderr
    assert f"results: {uri}" in done.stdout
    run_id = next(ln for ln in done.stdout.splitlines() if ln.startswith("results: ")).split()[-1]
    shown = f"crabray leaderboard '{uri}' --run {run_id}"
    assert shown in done.stdout, "the next steps name the store, quoted for the shell"

    store, root = pafs.FileSystem.from_uri(uri)
    with store.open_input_stream(f"{root}/runs/{run_id}.json") as manifest:
        recorded = json.loads(manifest.read())["options"]["out_dir"]
    assert recorded == uri, "the manifest records the store, not the staging folder"

    rows = _episode_rows(s3, bucket, "sweeps/demo")
    assert len(rows) == 22, "one committed row per episode, compacted in the bucket"
    episodes = read_episodes(uri)
    assert episodes.groupby("agent")["success"].sum().to_dict() == {"oracle": 11, "noop": 0}
    assert (tmp_path / "cache" / "crabray").is_dir(), "the run was staged in the cache"
    assert not list((tmp_path / "cache" / "crabray").iterdir()), (
        "the staging folder is removed once everything is uploaded"
    )

    for run in ([], ["--run", run_id]):
        board = crabray("leaderboard", uri, *run, "--format", "json", check=True)
        scores = {row["agent"]: row["success_rate"] for row in json.loads(board.stdout)}
        assert scores == {"oracle": 1.0, "noop": 0.0}


def test_interrupted_run_resumes_exactly_from_the_bucket(
    s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    suite = write_sleepy_suite(tmp_path / "slow.py", tasks=8, sleep=0.7)
    uri = s3.uri(bucket, "slow")
    driver = subprocess.Popen(
        [sys.executable, "-m", "crabray", "run", str(suite), "-a", "oracle", "--out", uri],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(_episode_rows(s3, bucket, "slow")) < 2:
            assert driver.poll() is None, "the run ended before it could be stopped"
            time.sleep(0.2)
        driver.send_signal(signal.SIGTERM)  # how Ray stops a job's driver
        driver.wait(timeout=120)
    finally:
        driver.kill()
    before = _episode_rows(s3, bucket, "slow")
    assert 2 <= len(before) < 8, f"expected a partial run in the bucket, found {len(before)} rows"
    store, root = pafs.FileSystem.from_uri(uri)
    manifests = store.get_file_info(pafs.FileSelector(f"{root}/runs"))
    (run_id,) = [Path(i.path).stem for i in manifests if i.path.endswith(".json")]

    resumed = crabray("run", str(suite), "-a", "oracle", "--out", uri, "--resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    # Episodes the SIGTERM stopped mid-way are kept as `cancelled` rows and run again.
    finished = [r for r in before if r["termination_reason"] != "cancelled"]
    assert f"{len(finished)} episodes were already finished" in resumed.stdout

    after = _episode_rows(s3, bucket, "slow")
    tasks = [row["task_id"] for row in after if row["termination_reason"] != "cancelled"]
    assert len(tasks) == len(set(tasks)) == 8, "every task has exactly one finished row"
    assert {r["episode_id"] for r in finished} <= {r["episode_id"] for r in after}, (
        "episodes recorded before the interruption were not run again"
    )
    assert read_episodes(uri, run_id).success.all()

    config = tmp_path / "again.toml"
    config.write_text(f'run_id = "{run_id}"\n')
    again = crabray("run", str(suite), "-a", "oracle", "--out", uri, "--config", str(config))
    assert again.returncode == 2, "a new run may not take the id of a run in the store"
    assert f"run {run_id} exists in {uri}; resume it with --resume {run_id}" in again.stderr


def test_missing_bucket_is_refused_before_anything_runs(
    s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    missing = s3.uri("no-such-bucket", "x")
    done = crabray("run", "tasks/demo", "-a", "oracle", "--out", missing)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "bucket 'no-such-bucket' does not exist" in done.stderr
    assert "Traceback" not in done.stderr

    bad = crabray("run", "tasks/demo", "-a", "oracle", "--out", "nosuch://bucket/x")
    assert bad.returncode == 2
    assert "--out nosuch://bucket/x: pyarrow cannot write nosuch:// URIs" in bad.stderr

    resume = crabray("run", "tasks/demo", "-a", "oracle", "--out", s3.uri(bucket), "--resume", "r1")
    assert resume.returncode == 2
    assert f"no run r1 in s3://{bucket}" in resume.stderr


def test_readers_of_a_store_read_a_copy_of_it(
    s3: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runs list`, `view` and `leaderboard --html` read a store through a temporary copy."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    uri = s3.uri(bucket, "copied")
    empty = crabray("runs", "list", uri)
    assert empty.returncode == 2, empty.stdout + empty.stderr
    assert f"no runs in {uri}" in empty.stderr and "Traceback" not in empty.stderr
    missing = crabray("runs", "list", s3.uri("no-such-bucket", "x"))
    assert missing.returncode == 2
    assert "bucket 'no-such-bucket' does not exist" in missing.stderr

    done = crabray("run", "tasks/demo", "-a", "oracle", "-t", "hello-file", "--out", uri)
    assert done.returncode == 0, done.stderr
    run_id = next(ln for ln in done.stdout.splitlines() if ln.startswith("results: ")).split()[-1]

    latest = crabray("leaderboard", uri, "--run", "latest", "--format", "json", check=True)
    assert [row["agent"] for row in json.loads(latest.stdout)] == ["oracle"]
    listed = crabray("runs", "list", uri, check=True)
    assert f"runsin{uri}" in "".join(listed.stdout.split()), "the title names the store"
    assert run_id in listed.stdout

    site = crabray("leaderboard", uri, "--html", str(tmp_path / "site"), check=True)
    assert "oracle" in site.stdout
    index = (tmp_path / "site" / "index.html").read_text()
    assert "hello-file" in index and "oracle" in index, "the site shows the store's run"

    view = subprocess.Popen(
        [sys.executable, "-m", "crabray", "view", uri, "--port", "0"],
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "400"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert view.stdout is not None
        first = view.stdout.readline()
        assert first.startswith(f"serving {uri} (a copy of the store made now) at http://"), first
        url = first.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as page:
            shown = page.read().decode()
        assert "hello-file" in shown and "oracle" in shown, "the viewer shows the store's run"
    finally:
        view.terminate()
        view.wait(timeout=30)
    assert not list((cache / "crabray").glob("store-copy-*")), "every copy is removed"
