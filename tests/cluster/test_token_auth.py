"""Token mode for drivers joining a cluster that wants Ray's token: set before Ray is imported.

The cluster's GCS is asked (real heads started with ``ray start``, open and with
a token); when nothing answers, a head ``crabray cluster`` started here gets
the token (a state file naming it).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.cluster.runtime.token_auth import use_token_auth
from crabray.core.errors import CrabrayError
from tests.cluster.conftest import free_port, ray_start_head
from tests.conftest import ROOT, crabray, raw_episode_rows

pytestmark = pytest.mark.ray

CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from crabray.cluster.runtime.token_auth import use_token_auth
    from crabray.core.errors import CrabrayError

    try:
        use_token_auth(sys.argv[1], Path(sys.argv[2]))
    except CrabrayError as exc:
        print("error:", exc)
        raise SystemExit(0)
    print(os.environ.get("RAY_AUTH_MODE"), "ray" in sys.modules)
    """
)


def state_file(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "nodes.json"
    head = {"role": "head", "address": f"127.0.0.1:{port}", "process_group": 1, "hosts": {}}
    path.write_text(json.dumps([{**head, "started_at": 0.0}]))
    return path


def in_fresh_python(address: str, state: Path, token: str | None = None) -> str:
    """What ``use_token_auth`` did in a new Python: its RAY_AUTH_MODE, whether Ray loaded,
    or its error. ``token``: this machine's Ray token (its $RAY_AUTH_TOKEN), "" for none."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    if token is not None:
        env["HOME"] = str(state.parent)  # no ~/.ray/auth_token there
        if token:
            env["RAY_AUTH_TOKEN"] = token
    done = subprocess.run(
        [sys.executable, "-c", CHILD, address, str(state)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_a_head_crabray_started_here_gets_token_mode_before_ray_loads(tmp_path: Path) -> None:
    # Nothing answers at the port yet (a head still starting): the state file decides.
    port = free_port()
    state = state_file(tmp_path, port)
    assert in_fresh_python(f"127.0.0.1:{port}", state) == "token False"
    assert in_fresh_python(f"localhost:{port}", state) == "token False"


def test_other_clusters_are_left_to_the_users_environment(tmp_path: Path) -> None:
    port, other = free_port(), free_port()
    state = state_file(tmp_path, port)
    assert in_fresh_python(f"127.0.0.1:{other}", state) == "None False"
    assert in_fresh_python(f"10.9.8.7:{port}", state) == "None False"


def test_too_late_once_ray_is_imported_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray  # noqa: F401  (this process has Ray loaded, as a library user's would)

    port = free_port()
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(CrabrayError, match="set RAY_AUTH_MODE=token in the environment before"):
        use_token_auth(f"127.0.0.1:{port}", state_file(tmp_path, port))
    assert "RAY_AUTH_MODE" not in os.environ
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    use_token_auth(f"127.0.0.1:{port}", state_file(tmp_path, port))


HEAD_TOKEN = secrets.token_hex(32)


@pytest.fixture
def token_head() -> Iterator[str]:
    """A head that wants Ray's token (HEAD_TOKEN)."""
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": HEAD_TOKEN}
    with ray_start_head(env) as address:
        yield address


@pytest.fixture
def open_head() -> Iterator[str]:
    """A head without token authentication, on a machine that has a token."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": HEAD_TOKEN}
    with ray_start_head(env) as address:
        yield address


def test_a_head_that_wants_the_token_gets_it_though_crabray_did_not_start_it(
    tmp_path: Path, token_head: str
) -> None:
    nobody = state_file(tmp_path, 1)  # no crabray-started head at that address
    assert in_fresh_python(token_head, nobody, token=HEAD_TOKEN) == "token False"


def test_a_wrong_or_missing_token_is_named_before_ray_retries(
    tmp_path: Path, token_head: str
) -> None:
    nobody = state_file(tmp_path, 1)
    wrong = in_fresh_python(token_head, nobody, token=secrets.token_hex(32))
    assert wrong.startswith("error:") and "refuses this machine's Ray token" in wrong
    assert "RAY_AUTH_TOKEN" in wrong
    missing = in_fresh_python(token_head, nobody, token="")
    assert missing.startswith("error:") and "this machine has no Ray token" in missing


def test_an_open_head_is_joined_without_the_token_this_machine_has(
    tmp_path: Path, open_head: str
) -> None:
    # The state file even says crabray started it: the GCS's answer wins.
    port = int(open_head.rpartition(":")[2])
    assert in_fresh_python(open_head, state_file(tmp_path, port), token=HEAD_TOKEN) == "None False"


def test_a_run_joins_a_head_the_user_started_with_ray_start(
    tmp_path: Path, token_head: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first hour: `ray start --head` on a machine with a token, then `crabray run
    --address`: the run joins with the token instead of failing after Ray's retries."""
    monkeypatch.setenv("RAY_AUTH_TOKEN", HEAD_TOKEN)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setenv("CRABRAY_NODES_FILE", str(state_file(tmp_path, 1)))
    out = tmp_path / "results"
    done = crabray(
        "run", "tasks/demo", "--agent", "oracle", "--task", "hello-file",
        "--address", token_head, "--out", str(out), timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = raw_episode_rows(out, ["task_id", "success"])
    assert rows == [{"task_id": "hello-file", "success": True}]


def test_the_gcs_is_asked_once_per_process_for_an_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``crabray run`` decides before Ray is imported and ``connect`` asks again: the
    second call must not ask (an address that does not answer would cost its timeout
    twice). Here a port that accepts and says nothing, counting who connects."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []

    def count() -> None:
        while listener.fileno() != -1:
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            accepted.append(connection)

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)  # set by the user, it decides
    counting = threading.Thread(target=count, daemon=True)
    counting.start()
    nobody = state_file(tmp_path, 1)  # no crabray-started head at that address
    try:
        use_token_auth(f"127.0.0.1:{port}", nobody)
        asked = len(accepted)
        use_token_auth(f"127.0.0.1:{port}", nobody)
        assert asked >= 1
        assert len(accepted) == asked
        assert "RAY_AUTH_MODE" not in os.environ
    finally:
        listener.close()
        for connection in accepted:
            connection.close()
