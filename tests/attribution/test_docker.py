"""Docker's failures are not the agent's: an image typo is the benchmark's, a dead engine the
infrastructure's; both are shown at the end of the run, which exits 1."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.backends.conftest import require_kind
from tests.conftest import crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _suite(path: Path, image: str) -> Path:
    path.write_text(
        textwrap.dedent(
            f"""
            from crabray import BenchmarkConfig, EnvironmentConfig, Task
            from crabray.actions import FILE_ACTIONS, path_exists, write_file

            ENV = EnvironmentConfig(
                name="box",
                backend="docker",
                backend_settings={{"image": {image!r}}},
                action_space=FILE_ACTIONS,
            )
            boxed = BenchmarkConfig(
                name="boxed",
                environments=[ENV],
                tasks=[
                    Task(
                        id="write",
                        description="write done.txt",
                        evaluator=path_exists(path="done.txt"),
                        solution=[write_file(path="done.txt", content="x")],
                    )
                ],
            )
            """
        )
    )
    return path


def test_an_image_typo_is_a_benchmark_error_shown_and_not_retried(tmp_path: Path) -> None:
    require_kind("docker")
    suite = _suite(tmp_path / "typo.py", "crabray/debain-typo:latest")
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    (row,) = read_episodes(out).to_dict("records")
    assert row["termination_reason"] == "setup_error"
    assert row["attribution"] == "benchmark"
    assert row["attempt"] == 0, "deterministic: never retried"
    assert "1 benchmark errors" in done.stdout
    assert "docker image 'crabray/debain-typo:latest'" in done.stdout
    board = crabray("leaderboard", str(out), "--format", "json", check=True)
    (entry,) = json.loads(board.stdout)
    assert (entry["episodes"], entry["benchmark_errors"], entry["infra_errors"]) == (0, 1, 0)

    # The site shows it as the suite's error, never as the agent's red 0.00.
    site = tmp_path / "site"
    crabray("leaderboard", str(out), "--html", str(site), check=True)
    index = (site / "index.html").read_text(encoding="utf-8")
    assert ">benchmark error</a>" in index
    assert ">0.00</a>" not in index
    page = (site / "episodes" / f"{row['episode_id']}.html").read_text(encoding="utf-8")
    assert "benchmark error, not the agent's (not scored): setup_error" in page


def test_an_unreachable_engine_is_an_infrastructure_error_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = _suite(tmp_path / "down.py", "crabray/debian:latest")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    out = tmp_path / "out"
    done = crabray("run", str(suite), "--agent", "oracle", "--out", str(out), "--max-attempts", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    (row,) = read_episodes(out).to_dict("records")
    assert row["termination_reason"] == "env_error"
    assert row["attribution"] == "infrastructure"
    assert row["attempt"] == 1, "infrastructure is retried"
    assert "1 infrastructure errors" in done.stdout
    assert "no-engine.sock" in done.stdout
    assert "--resume" in done.stdout
