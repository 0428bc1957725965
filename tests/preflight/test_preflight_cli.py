"""The preflight through the real CLI: a run that cannot start its sandboxes stops at once.

Each scenario is one a new user meets: bubblewrap not installed, an image name
with a typo, a Docker engine that does not answer, a host tool found missing
by an episode. Each must exit 2 with the fix, record no episode it did not run,
and retry nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crabray.backends.local._bwrap import SANDBOX_PATH
from crabray.results import list_runs, read_episodes
from tests.backends.docker.dockerd import BUSYBOX_IMAGE, require_docker
from tests.conftest import ROOT, crabray
from tests.preflight.suites import docker_suite, host_error_suite

pytestmark = [pytest.mark.slow]


def _bwrap_copies() -> list[str]:
    """Every ``bwrap`` the local backend could find (its PATH, then the sandbox's)."""
    found = {shutil.which("bwrap"), shutil.which("bwrap", path=SANDBOX_PATH)}
    return sorted(os.path.realpath(path) for path in found if path)


def _hiding_bwrap(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a mount namespace where every ``bwrap`` is an empty, unexecutable file:
    this machine as it was before ``apt-get install bubblewrap``."""
    unshare = shutil.which("unshare")
    copies = _bwrap_copies()
    if unshare is None or not copies:
        pytest.skip("needs util-linux's unshare and bubblewrap (apt-get install bubblewrap)")
    if os.geteuid() != 0:
        pytest.skip("hiding bwrap needs a private mount namespace: run the tests as root")
    hide = " && ".join(f"mount --bind /dev/null {path}" for path in copies)
    script = f"{hide} && exec {sys.executable} -m crabray " + " ".join(args)
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [unshare, "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )


def test_fresh_machine_without_bubblewrap_stops_before_any_episode(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _hiding_bwrap("run", "tasks/demo", "--agent", "oracle", "--out", str(out))
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert "bwrap not found on PATH (install with: apt-get install bubblewrap)" in done.stderr
    assert "nothing ran" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists() or list_runs(out) == [], "a refused run leaves no run behind"


def test_an_image_typo_is_caught_before_any_episode(tmp_path: Path) -> None:
    require_docker()
    suite = docker_suite(tmp_path / "suite", BUSYBOX_IMAGE.replace("busybox", "busybx"))
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out))
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert "docker image 'crabray/busybx:latest'" in done.stderr
    assert "hello-box" in done.stderr, "the message names the task that needs the image"
    assert "does not exist on this engine" in done.stderr
    assert not out.exists() or list_runs(out) == []


def test_an_unreachable_docker_engine_stops_the_run_at_once(tmp_path: Path) -> None:
    pytest.importorskip("docker", reason="pip install 'crabray[docker]'")
    suite = docker_suite(tmp_path / "suite", BUSYBOX_IMAGE)
    dead = tmp_path / "dead.sock"
    out = tmp_path / "out"
    env = {**os.environ, "DOCKER_HOST": f"unix://{dead}", "COLUMNS": "200", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "crabray", "run", str(suite), "-a", "oracle", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert f"cannot reach the Docker engine at unix://{dead}" in done.stderr
    assert "Is dockerd running" in done.stderr, "the message says what to check"
    assert not out.exists() or list_runs(out) == []


@pytest.mark.ray
def test_a_host_error_found_by_an_episode_stops_the_run_without_retries(
    tmp_path: Path,
) -> None:
    suite = host_error_suite(tmp_path / "suite", tasks=4)
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--concurrency", "1", "--out", str(out))
    assert done.returncode == 2, f"{done.stdout}\n{done.stderr}"
    assert "apt-get install frob" in done.stderr
    assert "--resume" in done.stderr, "the message says how to go on once the host is fixed"
    # The oracle is warned up front about the task it cannot solve.
    assert "1 of 4 tasks have no reference solution" in done.stderr
    assert "task-0" in done.stderr
    episodes = read_episodes(out)
    assert 1 <= len(episodes) < 4, "the run stopped instead of failing every episode"
    assert set(episodes.termination_reason) == {"setup_error"}
    assert set(episodes.attempt) == {0}, "a host error is never retried"
    assert set(episodes.error_type) == {"SandboxHostError"}


def test_a_model_server_that_is_down_stops_the_run_at_once(tmp_path: Path) -> None:
    """Issue 39: an LLM agent whose server is down cost 23 s of retries per episode before
    the run said so. The preflight asks the server once: exit 2 within seconds, nothing run."""
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on: a server that was stopped
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agents = tmp_path / "agents.toml"
    base_url = f"http://127.0.0.1:{port}/v1"
    agents.write_text(
        f'[[agents]]\nname = "local-llm"\nkind = "openai"\nmodel = "m"\nbase_url = "{base_url}"\n'
    )
    out = tmp_path / "out"
    started = time.monotonic()
    run = ["run", "tasks/demo", "--agent-config", str(agents), "-a", "local-llm", "-a", "oracle"]
    done = crabray(*run, "--limit", "2", "--out", str(out))
    took = time.monotonic() - started
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    message = done.stderr[done.stderr.index("error:") :]
    assert "agent 'local-llm'" in message and base_url in message, message
    assert "does not answer, so nothing ran" in message and "base_url" in message, message
    assert "ConnectError" in message, message
    assert not (out / "runs").exists() or not list_runs(out), "no run was opened"
    assert took < 20, f"the preflight took {took:.0f} s"
