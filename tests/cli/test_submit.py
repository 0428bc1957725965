"""Submitting runs to a cluster as Ray jobs: the pieces that need no cluster.

The whole path (a suite shipped to containers, results fetched, a resume) is
tested against a two-node cluster in Docker containers in
tests/cluster/test_submit_containers.py.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.cli.submit import remote_out
from crabray.cluster.runtime.submit import MAX_UPLOAD_BYTES, check_upload_size, is_job_address
from crabray.core.errors import CrabrayError, ResultsError
from crabray.results import list_runs, pack_run, read_episodes, unpack_run
from crabray.results.store.root import ResultsRoot
from tests.conftest import crabray


def test_job_addresses_are_http_urls() -> None:
    assert is_job_address("http://10.0.0.5:8265")
    assert is_job_address("https://head.example:443")
    assert not is_job_address("10.0.0.5:6379")
    assert not is_job_address(None)


def test_relative_result_roots_go_under_crabray_in_the_heads_home() -> None:
    assert remote_out(ResultsRoot("results")) == '"$HOME"/crabray/results'
    assert remote_out(ResultsRoot("my runs")) == "\"$HOME\"/crabray/'my runs'"
    assert remote_out(ResultsRoot("/mnt/shared/results")) == "/mnt/shared/results"
    assert remote_out(ResultsRoot("file:///mnt/shared")) == "file:///mnt/shared"


def test_a_suite_too_large_to_ship_is_refused_naming_what_is_large(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with (tmp_path / "data" / "huge.bin").open("wb") as handle:
        handle.truncate(MAX_UPLOAD_BYTES + 1)
    (tmp_path / "results").mkdir()
    with (tmp_path / "results" / "old.bin").open("wb") as handle:
        handle.truncate(MAX_UPLOAD_BYTES * 2)  # not shipped, not counted
    with pytest.raises(CrabrayError, match=r"too large to ship.*largest: data \("):
        check_upload_size(tmp_path)
    (tmp_path / "data" / "huge.bin").unlink()
    assert check_upload_size(tmp_path) == 0


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_packs_and_unpacks_into_another_root(tmp_path: Path) -> None:
    first = tmp_path / "head"
    done = crabray(
        "run", "tasks/demo", "--agent", "oracle", "--task", "hello-file", "--out", str(first)
    )
    assert done.returncode == 0, done.stderr
    (run_id,) = list_runs(first)
    data = pack_run(first, run_id)
    here = tmp_path / "laptop"
    unpack_run(data, here, run_id)
    unpack_run(data, here, run_id)  # again: replaces, no duplicate rows
    assert list_runs(here) == [run_id]
    episodes = read_episodes(here, run_id)
    assert list(episodes.task_id) == ["hello-file"]
    with pytest.raises(ResultsError, match="no run nope"):
        pack_run(first, "nope")
    with pytest.raises(ResultsError, match="holds other files"):
        unpack_run(data, tmp_path / "elsewhere", "another-run")


@pytest.fixture
def listener() -> Iterator[int]:
    """Something listening on a loopback port, as a port forwarded to a remote head would."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.slow  # a Ray driver tries the address: seconds
def test_joining_a_cluster_with_no_node_here_fails_fast(listener: int, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = crabray(
        "run", "tasks/demo", "--agent", "noop", "--out", str(out),
        "--address", f"127.0.0.1:{listener}",
    )  # fmt: skip
    assert done.returncode == 2
    assert f"runs no node of the Ray cluster at 127.0.0.1:{listener}" in done.stderr
    assert "--address http://HEAD:8265" in done.stderr
    assert not list_runs(out)


def test_a_new_run_with_the_id_of_an_existing_one_is_refused(tmp_path: Path) -> None:
    from crabray.results import RunManifest, write_manifest

    out = tmp_path / "out"
    write_manifest(
        out,
        RunManifest(
            run_id="nightly-1", suite="tasks/demo", suite_name="demo", agents=["oracle"],
            crabray_version="0",
        ),
    )  # fmt: skip
    run_file = tmp_path / "run.toml"
    run_file.write_text('run_id = "nightly-1"\n')
    done = crabray(
        "run", "tasks/demo", "--agent", "oracle", "--config", str(run_file), "--out", str(out)
    )
    assert done.returncode == 2
    assert "run nightly-1 exists" in done.stderr
    assert "--resume nightly-1" in done.stderr


def test_a_detached_run_says_the_real_command_that_resumes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 39: the resume hint held a literal "..." where the run's arguments go. The
    command printed is the one typed, with what the run needs to be shipped again."""
    import shlex

    from crabray.cli.submit import _print_detached
    from crabray.run.spec import RunSpec

    given = {
        "suite": "tasks/task_json_demo",
        "agents": ["oracle", "mock-llm"],
        "agent_config": "agents.example.toml",
        "index": "tasks/task_json_demo/test_small.json",
        "task_ids": ["a", "b c"],
        "backend_settings": {"memory_mb": 512},
        "concurrency": "8",
        "out_dir": "sweep results",
        "address": "http://10.0.0.5:8265",
        "model": "m-1",
    }
    spec = RunSpec.of(**given)
    _print_detached(spec, "20261205-162521-9d255a", "job-1", "(1.0 MiB shipped)")
    shown = capsys.readouterr().out
    assert "..." not in shown, shown
    (line,) = [line for line in shown.splitlines() if line.startswith("resume it:")]
    words = shlex.split(line.removeprefix("resume it:"))
    assert words == [
        "crabray", "run", "tasks/task_json_demo", "--agent", "oracle", "--agent", "mock-llm",
        "--agent-config", "agents.example.toml", "--model", "m-1",
        "--backend-setting", "memory_mb=512", "--index", "tasks/task_json_demo/test_small.json",
        "--task", "a", "--task", "b c", "--out", "sweep results",
        "--address", "http://10.0.0.5:8265", "--resume", "20261205-162521-9d255a",
    ]  # fmt: skip
