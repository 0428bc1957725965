"""The shipped task-folder suite, end to end: the oracle solves every task, noop earns
only the partial credit tasks/task_folder_demo/README.md states (real images, real notes
service, Parquet)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crabray.results import read_episodes
from tests.backends.docker.dockerd import require_env_image
from tests.conftest import crabray

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SUITE = Path(__file__).resolve().parents[2] / "tasks" / "task_folder_demo"
NOOP_CHECKPOINTS = {
    "archive-invoices": [(1, 1), (2, 0), (1, 0)],  # the precondition passes untouched
    "clean-sales-csv": [(1, 0), (2, 0), (1, 0)],
    "expense-report": [(1, 0), (1, 0), (2, 0)],
    "fix-invoice-script": [(1, 0), (2, 0), (1, 0)],
    "log-error-summary": [(1, 0), (1, 0), (2, 0)],
    "notes-action-items": [(1, 0), (1, 0), (2, 0), (1, 0)],
}


@pytest.fixture
def notes_service() -> Iterator[None]:
    """Stop the suite's notes service (started by its reset command) after the run."""
    yield
    subprocess.run(
        [sys.executable, "services/notes_service.py", "--port", "18770", "stop"],
        cwd=SUITE,
        check=False,
        timeout=30,
    )


def test_shipped_suite_oracle_and_noop(tmp_path: Path, notes_service: None) -> None:
    require_env_image("task-base")
    out = tmp_path / "out"
    done = crabray(
        "run", str(SUITE), "--agent", "oracle", "--agent", "noop", "--out", str(out), timeout=1200
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    rows = {(r.task_id, r.agent): r for r in read_episodes(out).itertuples()}
    assert {task for task, _ in rows} == set(NOOP_CHECKPOINTS)
    for task, expected in NOOP_CHECKPOINTS.items():
        oracle = rows[task, "oracle"]
        assert (oracle.score, oracle.success) == (1.0, True), (task, oracle.error)
        assert all(c["result"] == c["total"] for c in oracle.checkpoints), task
        noop = rows[task, "noop"]
        got = [(int(c["total"]), int(c["result"])) for c in noop.checkpoints]
        assert got == expected, task
        earned = sum(r for _, r in expected) / sum(t for t, _ in expected)
        assert noop.score == pytest.approx(0.5 * earned), task
        assert not noop.success
