"""Rules of the docker backend beyond the shared contract, against the real engine.

Isolation (labels, no network, limits), both reset modes, orphan cleanup of
dead owners only, the errors for a missing image and a dead engine, and
settings validation. The contract suite (``test_contract.py``) covers exec,
files, reset and close for docker as for every backend.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crabray.backends import create_backend
from crabray.backends.ownership import owner_tag
from crabray.core.environment import EnvironmentConfig
from crabray.core.errors import ConfigError, SandboxError
from tests.backends.docker.dockerd import BUSYBOX_IMAGE
from tests.conftest import ROOT, crabray

docker = pytest.importorskip("docker")

Make = Callable[..., Any]


@pytest.fixture
def make() -> Iterator[Make]:
    """Start docker backends with the given settings; every one is closed afterwards."""
    made: list[Any] = []

    def start(name: str = "dockertest", **settings: Any) -> Any:
        config = EnvironmentConfig(
            name=name, backend="docker", backend_settings={"image": BUSYBOX_IMAGE, **settings}
        )
        backend = create_backend(config)
        made.append(backend)
        backend.start()
        return backend

    yield start
    for backend in made:
        backend.close()


def test_container_carries_crabray_labels(
    make: Make, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRABRAY_RUN_ID", "run-123")
    backend = make("labelled")
    labels = client.containers.get(backend.describe()["container"]).labels
    assert labels["crabray"] == "1"
    assert labels["crabray.env"] == "labelled"
    assert labels["crabray.run"] == "run-123"
    assert labels["crabray.owner"] == owner_tag()
    assert make("named", run_id="explicit").exec("true").ok


def test_no_network_by_default(make: Make) -> None:
    backend = make()
    assert backend.exec("ls /sys/class/net").stdout.split() == ["lo"]
    result = backend.exec(
        "wget -q -T 3 -O - http://172.17.0.1/ || echo unreachable", timeout_sec=20
    )
    assert "unreachable" in result.stdout


def test_isolation_and_limits_are_applied(make: Make, client: Any) -> None:
    backend = make(cpus=0.5, memory_mb=64, pids_limit=20)
    host = client.containers.get(backend.describe()["container"]).attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["Privileged"] is False
    assert host["Memory"] == 64 * 1024 * 1024
    assert host["MemorySwap"] == 64 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000
    assert host["PidsLimit"] == 20
    assert "no-new-privileges" in host["SecurityOpt"]
    assert not host.get("Binds") and not host.get("Mounts")
    forks = backend.exec("for i in $(seq 40); do sleep 5 & done", timeout_sec=30)
    assert "fork" in forks.stderr, forks


def test_mounts_are_read_only_unless_asked(make: Make, tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("from host")
    backend = make(mounts=[{"source": str(tmp_path), "target": "/data"}])
    assert backend.exec("cat /data/in.txt").stdout == "from host"
    assert backend.exec("touch /data/new").exit_code != 0


@pytest.mark.parametrize("mode", ["recreate", "snapshot"])
def test_reset_restores_clean_state_in_both_modes(make: Make, client: Any, mode: str) -> None:
    backend = make(reset=mode, init_commands=["echo ready >> /etc/prepared"])
    if mode == "snapshot":
        snapshot = backend.describe()["snapshot"]
        assert client.images.get(snapshot).labels["crabray.snapshot"] == "1"
    first = backend.describe()["container"]
    backend.exec("echo junk > /etc/junk; echo home > leftover; sleep 300 >/dev/null 2>&1 &")
    backend.reset()
    assert backend.describe()["container"] != first
    assert backend.exec("cat /etc/prepared").stdout == "ready\n"
    assert backend.exec("test ! -e /etc/junk && test ! -e leftover").exit_code == 0
    assert "sleep 300" not in backend.exec("ps").stdout
    backend.exec("echo more junk > /etc/junk")
    backend.reset()
    assert backend.exec("test ! -e /etc/junk").exit_code == 0
    assert backend.exec("cat /etc/prepared").stdout == "ready\n"


def test_a_failing_init_command_fails_the_start_and_names_itself(make: Make, client: Any) -> None:
    with pytest.raises(SandboxError) as caught:
        make(name="initbox", init_commands=["echo prepared", "echo no disk >&2; exit 3"])
    message = str(caught.value)
    assert "init command of 'initbox' 'echo no disk >&2; exit 3' failed (exit 3)" in message
    assert message.endswith("no disk")
    left = client.containers.list(all=True, filters={"label": "crabray.env=initbox"})
    assert left == [], "the half-started container is removed"


def test_reset_without_warm_spare(make: Make) -> None:
    backend = make(warm_spare=False)
    backend.put_file("x.txt", b"x")
    backend.reset()
    assert backend.exec("test ! -e x.txt").exit_code == 0


def test_close_removes_snapshot_image(make: Make, client: Any) -> None:
    backend = make(reset="snapshot")
    snapshot = backend.describe()["snapshot"]
    backend.reset()
    backend.close()
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(snapshot)


def test_timeout_kills_a_tree_that_left_its_session(make: Make) -> None:
    backend = make()
    result = backend.exec("setsid sh -c 'sleep 301' & (sleep 302 &) ; sleep 303", timeout_sec=1.5)
    assert (result.timed_out, result.exit_code) == (True, -1)
    assert result.duration_sec < 10
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        listing = backend.exec("ps -o args").stdout
        if not any(f"sleep 30{i}" in listing for i in (1, 2, 3)):
            break
        time.sleep(0.1)
    assert not any(f"sleep 30{i}" in listing for i in (1, 2, 3)), listing


_ORPHAN_MAKER = textwrap.dedent(
    """
    import os, sys
    from crabray.backends import create_backend
    from crabray.core.environment import EnvironmentConfig
    backend = create_backend(EnvironmentConfig(
        name="orphan", backend="docker",
        backend_settings={"image": sys.argv[1], "reset": "snapshot", "die_with_owner": False},
    ))
    backend.start()
    backend._spares.wait_started()  # its warm spare exists too, so no create is in flight at death
    print(backend.describe()["container"], backend.describe()["snapshot"], flush=True)
    os._exit(0)  # dies without close(): its container and snapshot are orphans now
    """
)


def _make_orphan() -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _ORPHAN_MAKER, BUSYBOX_IMAGE],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=True,
    )
    container, snapshot = done.stdout.split()
    return container, snapshot


def test_cleanup_removes_only_dead_owners_containers(make: Make, client: Any) -> None:
    from crabray.backends.docker import DockerBackend

    orphan, snapshot = _make_orphan()
    mine = make("alive")
    assert client.containers.get(orphan).labels["crabray.env"] == "orphan"

    removed = DockerBackend.cleanup_orphans({})

    # The orphan's container and its warm spare, and its snapshot, each named.
    assert len(removed) >= 2
    assert any(what.startswith("container ") and "(env orphan)" in what for what in removed)
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(orphan)
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(snapshot)
    assert client.containers.get(mine.describe()["container"]).status == "running"
    assert mine.exec("echo still here").stdout == "still here\n"
    assert client.containers.list(all=True, filters={"label": "crabray.env=orphan"}) == []


def test_envs_prune_command_reports_what_it_removed(make: Make, client: Any) -> None:
    orphan, _ = _make_orphan()
    mine = make("alive")
    done = crabray("envs", "prune", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(env orphan)" in done.stdout
    assert "(env alive)" not in done.stdout
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(orphan)
    assert mine.exec("true").ok


def test_missing_image_names_the_image_and_the_build_command() -> None:
    config = EnvironmentConfig(
        name="nobox", backend="docker", backend_settings={"image": "crabray/busybox:no-such-tag"}
    )
    backend = create_backend(config)
    with pytest.raises(
        SandboxError, match=r"crabray/busybox:no-such-tag.*crabray envs build busybox"
    ):
        backend.start()
    backend.close()
    other = create_backend(
        EnvironmentConfig(name="nobox", backend="docker", backend_settings={"image": "nowhere/x:1"})
    )
    with pytest.raises(SandboxError, match=r"nowhere/x:1.*docker build"):
        other.start()


def test_dead_engine_says_what_to_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    backend = create_backend(
        EnvironmentConfig(name="dead", backend="docker", backend_settings={"image": BUSYBOX_IMAGE})
    )
    with pytest.raises(SandboxError, match=r"Is dockerd running.*Is DOCKER_HOST right"):
        backend.start()


def test_settings_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match="memory_mb") as caught:
        create_backend(
            EnvironmentConfig(
                name="bad", backend="docker", backend_settings={"image": "x", "memry_mb": 5}
            )
        )
    assert caught.value.field == "backend_settings.memry_mb"
    with pytest.raises(ConfigError, match=r"'image'.*'build'"):
        create_backend(EnvironmentConfig(name="bad", backend="docker", backend_settings={}))
    with pytest.raises(ConfigError, match="reset"):
        create_backend(
            EnvironmentConfig(
                name="bad", backend="docker", backend_settings={"image": "x", "reset": "revert"}
            )
        )
    with pytest.raises(ConfigError, match="max_spares") as caught:
        create_backend(
            EnvironmentConfig(
                name="bad", backend="docker", backend_settings={"image": "x", "max_spares": 0}
            )
        )
    assert caught.value.field == "backend_settings.max_spares"


@pytest.mark.slow
def test_missing_image_is_built_on_first_use(client: Any, caplog: pytest.LogCaptureFixture) -> None:
    image = "crabray/test-autobuild:latest"
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(image, force=True)
    backend = create_backend(
        EnvironmentConfig(
            name="built", backend="docker", backend_settings={"image": image, "build": "busybox"}
        )
    )
    try:
        with caplog.at_level("INFO", logger="crabray.backends"):
            backend.start()
        assert backend.exec("echo built").stdout == "built\n"
        assert any("building it from envs/busybox" in r.getMessage() for r in caplog.records)
    finally:
        backend.close()
        client.images.remove(image, force=True)


def test_describe_is_json_friendly(make: Make) -> None:
    described = make().describe()
    assert json.loads(json.dumps(described))["kind"] == "docker"
