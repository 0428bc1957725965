"""Token mode for drivers joining a cluster crabray started: set before Ray is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crabray.cluster.nodes import use_token_auth
from crabray.core.errors import CrabrayError
from tests.conftest import ROOT

CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from crabray.cluster.nodes import use_token_auth

    use_token_auth(sys.argv[1], Path(sys.argv[2]))
    print(os.environ.get("RAY_AUTH_MODE"), "ray" in sys.modules)
    """
)


def state_file(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "nodes.json"
    head = {"role": "head", "address": f"127.0.0.1:{port}", "process_group": 1, "hosts": {}}
    path.write_text(json.dumps([{**head, "started_at": 0.0}]))
    return path


def in_fresh_python(address: str, state: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
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
    state = state_file(tmp_path, 6390)
    assert in_fresh_python("127.0.0.1:6390", state) == "token False"
    assert in_fresh_python("localhost:6390", state) == "token False"


def test_other_clusters_are_left_to_the_users_environment(tmp_path: Path) -> None:
    state = state_file(tmp_path, 6390)
    assert in_fresh_python("127.0.0.1:6391", state) == "None False"
    assert in_fresh_python("10.9.8.7:6390", state) == "None False"


def test_too_late_once_ray_is_imported_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray  # noqa: F401  (this process has Ray loaded, as a library user's would)

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(CrabrayError, match="set RAY_AUTH_MODE=token in the environment before"):
        use_token_auth("127.0.0.1:6390", state_file(tmp_path, 6390))
    assert "RAY_AUTH_MODE" not in os.environ
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    use_token_auth("127.0.0.1:6390", state_file(tmp_path, 6390))
